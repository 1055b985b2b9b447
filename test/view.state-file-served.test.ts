import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess } from './helpers/view.js';

/**
 * `genbatch view` never serves the state file under /files/, whatever it is called: a run given
 * `--state out/run.sqlite --out out` keeps it in the output folder under a name that is not `*.db`. A finished run
 * against the in-process sandbox; the view as a child process.
 */
const KEY = 'sk-view-state-served-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-view-state-served-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.001, seed: 17 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

describe('genbatch view and a state file in the output folder', () => {
  it('does not serve the state file (nor its -wal, -shm) under another name than state.db', async () => {
    const out = join(t.dir, 'out');
    const state = join(out, 'run.sqlite');
    const m = imageManifest(join(t.dir, 'm.yaml'), 1);
    const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.001', '--out', out, '--state', state], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    const view = await startViewProcess(['--state', state]);
    try {
      const get = (path: string) => rawRequest(view.port, path, { headers: { 'x-genbatch-token': view.token } });
      // A result file is served, so the route works.
      expect((await get('/files/img-0000/result.json')).status).toBe(200);
      for (const name of ['run.sqlite', 'run.sqlite-wal', 'run.sqlite-shm']) {
        const res = await get(`/files/${name}`);
        expect(res.status, name).toBe(404);
        expect(res.body).not.toContain('SQLite format');
      }
    } finally {
      await view.stop();
    }
  }, 60_000);
});
