import { existsSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess } from './helpers/view.js';

/**
 * `genbatch mark --out DIR` and `genbatch view --out DIR` rewrite the reports after marks, into DIR, the folder they
 * were given (as `genbatch report --out DIR` does): never into the folder the state recorded when the run wrote it,
 * which for an output folder moved since (with its state.db inside) is a path outside DIR. A finished run against
 * the in-process sandbox, its output folder then moved.
 */
const KEY = 'sk-mark-moved-0123456789abcdef';
let sb: Sandbox;
const t = tempDir('genbatch-mark-moved-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.001, seed: 13 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

/** A finished run into `<name>-first`, its folder then moved to `<name>-moved`. */
async function movedRun(name: string): Promise<{ first: string; moved: string }> {
  const first = join(t.dir, `${name}-first`);
  const m = imageManifest(join(t.dir, `${name}.yaml`), 2);
  const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.001', '--out', first], { GENBATCH_API_KEY: KEY });
  expect(r.code, r.stderr).toBe(0);
  const moved = join(t.dir, `${name}-moved`);
  renameSync(first, moved);
  return { first, moved };
}

const markOf = (out: string, id: string): unknown => {
  const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; mark: { state: string } | null }> };
  return report.jobs.find((j) => j.id === id)?.mark?.state ?? null;
};

describe('marks on a moved output folder', () => {
  it('genbatch mark --out DIR writes the reports into DIR, not into the folder the state recorded', async () => {
    const { first, moved } = await movedRun('cli');
    const r = await runCli(['mark', '--out', moved, '--approve', 'img-0001']);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(first)).toBe(false);
    expect(markOf(moved, 'img-0001')).toBe('approved');
  }, 60_000);

  it('genbatch view --out DIR writes the reports into DIR when it stops after marks', async () => {
    const { first, moved } = await movedRun('view');
    const view = await startViewProcess(['--out', moved]);
    try {
      const res = await rawRequest(view.port, '/api/marks', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-genbatch-token': view.token },
        body: JSON.stringify({ ids: ['img-0000'], mark: 'rejected' }),
      });
      expect(res.status, res.body).toBe(200);
    } finally {
      expect(await view.stop()).toBe(0);
    }
    expect(existsSync(first)).toBe(false);
    expect(markOf(moved, 'img-0000')).toBe('rejected');
  }, 60_000);
});
