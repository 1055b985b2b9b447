import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { Store } from '../src/store/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess } from './helpers/view.js';

/**
 * A job's errors over its attempts are kept (not only the last one), and `genbatch view` shows them on the
 * job's page, each with its attempt and the state it left the job in.
 */
const KEY = 'sk-view-errors-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-view-errors-');

beforeAll(async () => {
  ensureBuilt();
  // Tasks whose input holds the policy word fail (and are refunded): each attempt of the job fails.
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.001, seed: 5, policyWords: ['withheld-word'] });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

describe("a job's errors over its attempts", () => {
  it('are all kept with their attempt, and the view lists them on the job page', async () => {
    const manifest = join(t.dir, 'm.yaml');
    writeFileSync(manifest, 'jobs:\n  - {id: bad, model: alpha-image-2, input: {prompt: a withheld-word fox}}\n  - {id: good, model: alpha-image-2, input: {prompt: a fox}}\n');
    const out = join(t.dir, 'out');
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', '0.001', '--out', out];
    // A content-policy failure is permanent (exit 6): --redo failed-permanent sends it again anyway.
    expect((await runCli(args, { GENBATCH_API_KEY: KEY })).code).toBe(6);
    expect((await runCli([...args, '--redo', 'failed-permanent'], { GENBATCH_API_KEY: KEY })).code).toBe(6);

    const store = Store.openForRead(join(out, 'state.db'));
    try {
      store.useRun(store.runs()[0]!);
      const errors = store.jobErrors('bad').filter((e) => e.state === 'failed');
      expect(errors.map((e) => e.attempt)).toEqual([1, 2]);
      for (const e of errors) expect(e.error).toContain('content policy');
      expect(store.jobErrors('good')).toEqual([]);
    } finally {
      store.close();
    }

    const view = await startViewProcess(['--out', out]);
    try {
      const page = await rawRequest(view.port, '/job/bad', { headers: { 'x-genbatch-token': view.token } });
      expect(page.status).toBe(200);
      const rows = [...page.body.matchAll(/<tr><td>(\d+)<\/td><td>failed<\/td>/g)].map((m) => m[1]);
      expect(rows).toEqual(['1', '2']);
    } finally {
      await view.stop();
    }
  }, 60_000);
});
