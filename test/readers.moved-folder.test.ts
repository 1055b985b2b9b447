import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess } from './helpers/view.js';

/**
 * An output folder moved (with its state.db inside) since the run: the readers named with `--out DIR` read the run
 * as the run of DIR, where its files now are. `mark` and `view` rewrite the reports after marks into DIR, `report`
 * writes them there with links to the files there, `export` reads the files there, `view` serves them from there,
 * `status` shows DIR; none of them reads or writes the folder the state recorded, which is no folder of this run any
 * more: another one may be at that path now (a decoy here, with a file of the same name). A finished run against the
 * in-process sandbox, its output folder then moved.
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

describe('readers of a moved output folder', () => {
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

  /** The moved run, and a decoy folder at its old path holding a file of the same name as each result. */
  async function movedWithDecoy(name: string): Promise<{ first: string; moved: string; files: string[] }> {
    const { first, moved } = await movedRun(name);
    const files = readdirSync(join(moved, 'img-0000'));
    mkdirSync(join(first, 'img-0000'), { recursive: true });
    for (const f of files) writeFileSync(join(first, 'img-0000', f), 'not this run');
    return { first, moved, files };
  }

  it('genbatch view --out DIR serves the files from DIR, not from the folder now at the recorded path', async () => {
    const { moved, files } = await movedWithDecoy('serve');
    const image = files.find((f) => f.startsWith('image-'))!;
    const view = await startViewProcess(['--out', moved]);
    try {
      const res = await rawRequest(view.port, `/files/img-0000/${image}`, { headers: { 'x-genbatch-token': view.token } });
      expect(res.status).toBe(200);
      expect(res.body).not.toBe('not this run');
      expect(Buffer.from(res.body, 'latin1').length).toBeGreaterThan(0);
    } finally {
      expect(await view.stop()).toBe(0);
    }
  }, 60_000);

  it('genbatch export --out DIR exports the files in DIR, checked against their sha256', async () => {
    const { moved } = await movedWithDecoy('export');
    const to = join(t.dir, 'export-set');
    const r = await runCli(['export', '--out', moved, '--to', to]);
    expect(r.code, r.stderr).toBe(0);
    for (const id of ['img-0000', 'img-0001']) {
      for (const f of readdirSync(join(to, id))) {
        const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');
        expect(sha(join(to, id, f))).toBe(sha(join(moved, id, f)));
      }
    }
  }, 60_000);

  it('genbatch report --out DIR writes the reports into DIR with links to its own files; status shows DIR', async () => {
    const { first, moved } = await movedWithDecoy('report');
    const r = await runCli(['report', '--out', moved]);
    expect(r.code, r.stderr).toBe(0);
    const html = readFileSync(join(moved, 'report.html'), 'utf8');
    expect(html).toContain('img-0000/image-');
    expect(html).not.toContain('../');
    expect(existsSync(join(first, 'report.html'))).toBe(false);
    const s = await runCli(['status', '--out', moved]);
    expect(s.code, s.stderr).toBe(0);
    expect(s.stdout).toContain(`output: ${moved}`);
  }, 60_000);
});
