import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildReportData } from '../src/engine/index.js';
import { writeHtmlReport } from '../src/report/index.js';
import { Store } from '../src/store/index.js';
import { startView, type View } from '../src/view/index.js';
import { pageRows, type PageRow } from './helpers/page.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest } from './helpers/view.js';
import { bigViewState, jobId } from './helpers/view-state.js';

/**
 * GET / carries one page of rows (issue #24 item 5: at 100,000 jobs the page was 24 MB); the rest come from
 * GET /api/rows?after=<n>, a stretch at a time, each answer naming the next `after`. Over real HTTP to the view
 * in this process (small stretches: `chunkRows`), on state files written here.
 */
const N = 130;
const CHUNK = 40;
const FAILED = [5, 100, 129];
const HOSTILE = 60;
const TOKEN = 'view-rows-token';
const cleanups: Array<() => void | Promise<void>> = [];

afterAll(async () => {
  while (cleanups.length) await cleanups.pop()!();
});

async function openView(statePath: string, leaveOut = false): Promise<{ view: View; store: Store }> {
  const store = Store.openForRead(statePath);
  store.useRun(store.runs()[0]!);
  if (leaveOut) store.leaveOutRemoved();
  const view = await startView({ store, port: 0, token: TOKEN, chunkRows: CHUNK });
  cleanups.push(async () => {
    await view.close();
    store.close();
  });
  return { view, store };
}

const get = (view: View, path: string, headers: Record<string, string> = {}) => rawRequest(view.port, path, { headers: { 'x-genbatch-token': TOKEN, ...headers } });

type Answer = { rows: unknown[][]; next: number | null; tables: { states: string[]; models: string[] } };

/** Rows of one answer by name (helpers/page.ts reads them from a page's two script elements). */
function named(a: Answer): PageRow[] {
  const esc = (v: unknown) => JSON.stringify(v).replace(/</g, '\\u003c');
  return pageRows(`<script type="application/json" id="gb-jobs">${esc(a.rows)}</script><script type="application/json" id="gb-meta">${esc({ ...a.tables, more: 0 })}</script>`).rows;
}

/** Every stretch after GET /'s rows, following `next` until null: the answers as sent and as read. */
async function rest(view: View, next: number | null): Promise<{ bodies: string[]; answers: Answer[] }> {
  const bodies: string[] = [];
  const answers: Answer[] = [];
  while (next !== null) {
    const r = await get(view, `/api/rows?after=${next}`);
    expect(r.status).toBe(200);
    bodies.push(r.body);
    const a = JSON.parse(r.body) as Answer;
    answers.push(a);
    next = a.next;
    expect(answers.length).toBeLessThan(N);
  }
  return { bodies, answers };
}

const liveOf = (html: string) => JSON.parse(/<script type="application\/json" id="gb-live">([^<]*)<\/script>/.exec(html)![1]!) as { next: number | null; total: number; since: string; gen: number };

describe('the view of a run larger than one page of cards', () => {
  let statePath: string;
  let out: string;
  let view: View;

  beforeAll(async () => {
    const t = tempDir('genbatch-view-rows-');
    cleanups.push(t.cleanup);
    ({ statePath, out } = bigViewState(t.dir, N, { failed: FAILED, prompt: (i) => (i === HOSTILE ? '</script><script>alert(1)</script> a harbour' : `Picture ${i} of a quiet harbour`) }));
    ({ view } = await openView(statePath));
  });

  it('GET / carries the first page of rows, and the header, counts, files and problems of every job', async () => {
    const page = await get(view, '/');
    expect(page.status).toBe(200);
    expect(pageRows(page.body).rows.map((r) => r.id)).toEqual(Array.from({ length: 48 }, (_, i) => jobId(i)));
    expect(page.body).toContain(`<h2 id="gb-jobs-title">Jobs (${N})</h2>`);
    expect(page.body).toContain(`jobs: ${N}`);
    expect(page.body).toContain(`>${N - FAILED.length} (`);
    // The problems of jobs beyond the first rows are listed too, as report.html lists them.
    expect(page.body).toContain(`Failed, uncertain and expired jobs (${FAILED.length})`);
    for (const i of FAILED) expect(page.body).toContain(`the service failed job ${i}`);
    const live = liveOf(page.body);
    expect(live.total).toBe(N);
    expect(typeof live.next).toBe('number');
  });

  it('GET /api/rows gives the rest of the jobs, each once, in manifest order, as report.html carries them', async () => {
    const page = await get(view, '/');
    const first = pageRows(page.body).rows;
    const { bodies, answers } = await rest(view, liveOf(page.body).next);
    for (const a of answers) expect(a.rows.length).toBeLessThanOrEqual(CHUNK);
    expect(answers.length).toBe(Math.ceil((N - 48) / CHUNK) + ((N - 48) % CHUNK === 0 ? 1 : 0));
    // The page's script reads the JSON as JSON: no "<" in it, so a prompt holding </script> stays a value.
    for (const b of bodies) expect(b).not.toContain('<');
    const rows = [...first, ...answers.flatMap(named)];
    expect(rows.map((r) => r.id)).toEqual(Array.from({ length: N }, (_, i) => jobId(i)));
    expect(rows[HOSTILE]!.prompt).toBe('</script><script>alert(1)</script> a harbour');
    // The same rows as report.html's of the same state, file links under /files/.
    const store = Store.openForRead(statePath);
    try {
      store.useRun(store.runs()[0]!);
      await writeHtmlReport(join(out, 'report.html'), buildReportData(store));
    } finally {
      store.close();
    }
    const report = pageRows(readFileSync(join(out, 'report.html'), 'utf8')).rows;
    const linked = (r: PageRow) => ({ ...r, files: r.files.map((f) => ({ ...f, href: f.href === null ? null : `/files/${f.href}` })) });
    expect(rows).toEqual(report.map(linked));
  });

  it('brings a job added after the page was made in a later stretch, last, as the manifest has it', async () => {
    const page = await get(view, '/');
    const w = Store.openForWrite(statePath);
    try {
      const run = w.runs()[0]!;
      // As a run's sync does: openRun takes the run's greatest seq, so that a new job comes after every other.
      w.openRun(run.manifest, run.out_dir, 'http://service.invalid', true, false);
      w.syncJob({ id: 'job-late', model: 'alpha-image-2', kind: 'submit', where: 'm.yaml:999', specHash: 'h', spec: JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'late' } }), estimatedCredits: 2 });
    } finally {
      w.close();
    }
    const ids = (await rest(view, liveOf(page.body).next)).answers.flatMap((a) => a.rows.map((r) => r[0]));
    expect(ids.at(-1)).toBe('job-late');
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(N + 1 - 48);
  });

  it('answers 400 to an after that is not a whole number, and an empty last stretch past the end', async () => {
    for (const bad of ['-1', 'abc', '1e3', '', '0x10', '1.5', '%201', '+1', '1234567890123456', '..%2F..%2Fstate.db', '1%00']) {
      const r = await get(view, `/api/rows?after=${bad}`);
      expect(r.status, bad).toBe(400);
      expect(JSON.parse(r.body).error).toContain('after must be a whole number');
    }
    expect((await get(view, '/api/rows')).status).toBe(400);
    const far = await get(view, '/api/rows?after=999999999999999');
    expect(far.status).toBe(200);
    expect(JSON.parse(far.body)).toMatchObject({ rows: [], next: null });
    expect((await get(view, '/api/rows/?after=0')).status).toBe(404);
  });

  it('refuses GET /api/rows without the token, from another Host, and any method but GET', async () => {
    expect((await rawRequest(view.port, '/api/rows?after=0')).status).toBe(403);
    expect((await get(view, '/api/rows?after=0', { 'x-genbatch-token': TOKEN.slice(1) })).status).toBe(403);
    expect((await get(view, '/api/rows?after=0', { host: `evil.test:${view.port}` })).status).toBe(403);
    const post = await rawRequest(view.port, '/api/rows?after=0', { method: 'POST', headers: { 'x-genbatch-token': TOKEN, 'content-type': 'application/json' }, body: '{}' });
    expect(post.status).toBe(405);
  });
});

it('leaves the jobs no longer in the manifest out of the stretches and the counts, as the page left them out', async () => {
  const t = tempDir('genbatch-view-rows-removed-');
  cleanups.push(t.cleanup);
  const { statePath } = bigViewState(t.dir, 100);
  const w = Store.openForWrite(statePath);
  try {
    const run = w.runs()[0]!;
    w.useRun(run);
    w.setMeta(`removed:${run.id}`, JSON.stringify([jobId(10), jobId(70), jobId(99)]));
  } finally {
    w.close();
  }
  const { view } = await openView(statePath, true);
  const page = await get(view, '/');
  expect(page.body).toContain('<h2 id="gb-jobs-title">Jobs (97)</h2>');
  const first = pageRows(page.body).rows.map((r) => r.id);
  expect(first).toHaveLength(47);
  const ids = [...first, ...(await rest(view, liveOf(page.body).next)).answers.flatMap((a) => a.rows.map((r) => r[0] as string))];
  expect(ids).toEqual(Array.from({ length: 100 }, (_, i) => jobId(i)).filter((id) => ![jobId(10), jobId(70), jobId(99)].includes(id)));
});
