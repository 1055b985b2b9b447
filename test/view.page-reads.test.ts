import { join } from 'node:path';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { Store } from '../src/store/index.js';
import { startView, type View } from '../src/view/index.js';
import { tempDir } from './helpers/tmp.js';

/**
 * GET / reads the run's summary once: the header's values, the page's header and its rows come from one
 * buildReportData (each of its reads, such as store.counts(), is a pass over every job of the run: at 100,000 jobs
 * the page was read three times over, issue #24 item 5). The page carries the first 48 rows (test/view.rows.test.ts:
 * the rest come from /api/rows); these 30 are all of them.
 */
const N = 30;
let dir: { dir: string; cleanup: () => void };
let store: Store;
let view: View;

beforeAll(async () => {
  dir = tempDir('genbatch-view-reads-');
  const path = join(dir.dir, 'state.db');
  const w = Store.openForWrite(path);
  w.openRun(join(dir.dir, 'm.yaml'), dir.dir, 'http://service.invalid', true, false);
  w.db.transaction(() => {
    for (let i = 0; i < N; i++) {
      const input = { prompt: `Picture ${i}` };
      w.syncJob({ id: `job-${i}`, model: 'alpha-image-2', kind: 'submit', where: `m.yaml:${i + 2}`, specHash: 'h', spec: JSON.stringify({ model: 'alpha-image-2', input }), estimatedCredits: 2 });
    }
  })();
  w.close();
  store = Store.openForRead(path);
  store.useRun(store.runs()[0]!);
  view = await startView({ store, port: 0, token: 'view-reads-token' });
});
afterAll(async () => {
  await view?.close();
  store?.close();
  dir?.cleanup();
});

it('GET / counts the jobs once and still carries every row', async () => {
  const counts = vi.spyOn(store, 'counts');
  const res = await fetch(`http://127.0.0.1:${view.port}/`, { headers: { 'x-genbatch-token': 'view-reads-token' } });
  expect(res.status).toBe(200);
  const html = await res.text();
  expect(counts).toHaveBeenCalledTimes(1);
  const rows = JSON.parse(/<script type="application\/json" id="gb-jobs">([^<]*)<\/script>/.exec(html)![1]!) as unknown[][];
  expect(rows.map((r) => r[0])).toEqual(Array.from({ length: N }, (_, i) => `job-${i}`));
  counts.mockRestore();
});
