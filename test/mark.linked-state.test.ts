import Database from 'better-sqlite3';
import { cpSync, renameSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess } from './helpers/view.js';

/**
 * Marks are the one write of `genbatch mark` and of the view. A state path that is a symbolic link (planted in the
 * output folder, pointing at another SQLite file) is never written through, as `run` and `prune` refuse it: the
 * marks are refused with the reason, and the file the link points at is unchanged. A finished run against the
 * in-process sandbox, its state.db then moved out and replaced by a link to it.
 */
const KEY = 'sk-mark-linked-0123456789abcdef';
let sb: Sandbox;
let made: string;
const t = tempDir('genbatch-mark-linked-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.001, seed: 9 });
  made = join(t.dir, 'made');
  const m = imageManifest(join(t.dir, 'm.yaml'), 2);
  const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.001', '--out', made], { GENBATCH_API_KEY: KEY });
  expect(r.code, r.stderr).toBe(0);
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

/** A copy of the run whose out/state.db is a link to a SQLite file outside the folder; returns both. */
function linkedCopy(name: string): { out: string; target: string } {
  const out = join(t.dir, name);
  cpSync(made, out, { recursive: true });
  const target = join(t.dir, `${name}-elsewhere.db`);
  renameSync(join(out, 'state.db'), target);
  symlinkSync(target, join(out, 'state.db'));
  return { out, target };
}

const marksIn = (file: string): number => {
  const db = new Database(file, { readonly: true });
  try {
    return (db.prepare('SELECT COUNT(*) FROM marks').pluck().get() as number) ?? 0;
  } finally {
    db.close();
  }
};

describe('marks and a state path that is a symbolic link', () => {
  it('genbatch mark refuses to write through the link (exit 74, naming it) and changes nothing', async () => {
    const { out, target } = linkedCopy('mark');
    const r = await runCli(['mark', '--out', out, '--approve', 'img-0000']);
    expect(r.code).toBe(74);
    expect(r.stderr).toContain(join(out, 'state.db'));
    expect(r.stderr).toContain('symbolic link');
    expect(marksIn(target)).toBe(0);
    // Reading through it stays possible.
    const st = await runCli(['status', '--out', out]);
    expect(st.code, st.stderr).toBe(0);
  }, 60_000);

  it("the view's POST /api/marks refuses it too, and writes nothing", async () => {
    const { out, target } = linkedCopy('view');
    const view = await startViewProcess(['--out', out]);
    try {
      const res = await rawRequest(view.port, '/api/marks', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-genbatch-token': view.token },
        body: JSON.stringify({ ids: ['img-0000'], mark: 'approved' }),
      });
      expect(res.status).toBe(400);
      expect((JSON.parse(res.body) as { error: string }).error).toContain('symbolic link');
    } finally {
      await view.stop();
    }
    expect(marksIn(target)).toBe(0);
  }, 60_000);
});
