import { existsSync, mkdirSync, readdirSync, renameSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { imageManifest, runCli } from './helpers/cli.js';
import { pgSandbox } from './helpers/pg-fixture.js';
import { startS3, type TestS3 } from './helpers/s3.js';

/**
 * A state records where its run's results are. The same state given another output folder or bucket used to
 * report the run done and list files that were not in the new folder: now refused, exit 2, naming both and
 * what to do. A folder moved with its state (`<out>/state.db`), or the same folder by another path, goes on.
 */

const KEY = 'sk-same-out-0123456789abcdef';
const f = pgSandbox({ prefix: 'genbatch-same-out-', key: KEY });
let s3: TestS3;
beforeAll(async () => {
  s3 = await startS3();
}, 60_000);
afterAll(async () => {
  await s3?.stop();
});

const env = () => ({ GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: f.sandbox.url });
const fast = ['--time-scale', '0.01'];

describe('the same SQLite state with another --out', () => {
  it('is refused with exit 2 naming both folders, nothing written in the new one; the recorded folder goes on', async () => {
    const manifest = imageManifest(join(f.dir, 'a.yaml'), 2, 'a');
    const [d1, d2, state] = ['d1', 'd2', 'st.db'].map((p) => join(f.dir, 'a', p)) as [string, string, string];
    const first = await runCli(['run', manifest, '--out', d1, '--state', state, ...fast], env());
    expect(first.code, first.stderr).toBe(0);
    const tasks = (await f.sandbox.stats()).tasks_total;
    const r = await runCli(['run', manifest, '--out', d2, '--state', state, ...fast], env());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`the state ${state} records the output of ${manifest} in ${d1}, and --out names another folder, ${d2}`);
    expect(r.stderr).toContain(`Go on with --out ${d1}, or start a run into ${d2} with a new state (--state PATH)`);
    expect(r.stdout).not.toMatch(/done/);
    expect(existsSync(d2) ? readdirSync(d2) : []).toEqual([]);
    expect((await f.sandbox.stats()).tasks_total).toBe(tasks);
    const again = await runCli(['run', manifest, '--out', d1, '--state', state, ...fast], env());
    expect(again.code, again.stderr).toBe(0);
  });

  it('a folder moved with its state (the default <out>/state.db) goes on from the new place', async () => {
    const manifest = imageManifest(join(f.dir, 'b.yaml'), 2, 'b');
    const first = await runCli(['run', manifest, ...fast], env());
    expect(first.code, first.stderr).toBe(0);
    const old = join(f.dir, 'genbatch-out', 'b');
    const moved = join(f.dir, 'moved-b');
    renameSync(old, moved);
    const tasks = (await f.sandbox.stats()).tasks_total;
    const r = await runCli(['run', manifest, '--out', moved, ...fast], env());
    expect(r.code, r.stderr).toBe(0);
    expect((await f.sandbox.stats()).tasks_total).toBe(tasks);
    expect(readdirSync(join(moved, 'b-0000')).length).toBeGreaterThan(0);
  });

  it('the same folder by another path (a symbolic link to it) goes on', async () => {
    const manifest = imageManifest(join(f.dir, 'c.yaml'), 1, 'c');
    const real = join(f.dir, 'c', 'real');
    const state = join(f.dir, 'c', 'st.db');
    mkdirSync(real, { recursive: true });
    symlinkSync(real, join(f.dir, 'c', 'link'));
    const first = await runCli(['run', manifest, '--out', real, '--state', state, ...fast], env());
    expect(first.code, first.stderr).toBe(0);
    const r = await runCli(['run', manifest, '--out', join(f.dir, 'c', 'link'), '--state', state, ...fast], env());
    expect(r.code, r.stderr).toBe(0);
  });

  it('another bucket prefix with the same state: refused with exit 2 naming both', async () => {
    const manifest = imageManifest(join(f.dir, 'd.yaml'), 1, 'd');
    const state = join(f.dir, 'd', 'st.db');
    const e = { ...env(), ...s3.env };
    const first = await runCli(['run', manifest, '--out', s3.url('d/one'), '--state', state, ...fast], e);
    expect(first.code, first.stderr).toBe(0);
    const r = await runCli(['run', manifest, '--out', s3.url('d/two'), '--state', state, ...fast], e);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`records the output of ${manifest} in ${s3.url('d/one')}, and --out names another place, ${s3.url('d/two')}`);
    expect(await s3.keys('d/two')).toEqual([]);
    // A local folder instead of the bucket: refused too.
    const local = await runCli(['run', manifest, '--out', join(f.dir, 'd', 'out'), '--state', state, ...fast], e);
    expect(local.code).toBe(2);
  });
});

describe('the same PostgreSQL state with another --out', () => {
  it('is refused with exit 2 naming both folders and the worker way, the password hidden; the recorded folder goes on', async () => {
    const manifest = imageManifest(join(f.dir, 'p.yaml'), 2, 'p');
    const [d1, d2] = ['d1', 'd2'].map((p) => join(f.dir, 'p', p)) as [string, string];
    const args = (out: string) => ['run', manifest, '--out', out, '--state', f.db.url, ...fast];
    const first = await runCli(args(d1), env());
    expect(first.code, first.stderr).toBe(0);
    const tasks = (await f.sandbox.stats()).tasks_total;
    const r = await runCli(args(d2), env());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`records the output of ${manifest} in ${d1}, and --out names another folder, ${d2}`);
    expect(r.stderr).toContain('genbatch work --out DIR');
    expect(r.stderr).not.toContain(new URL(f.db.url).password || '\0');
    expect(existsSync(d2) ? readdirSync(d2) : []).toEqual([]);
    expect((await f.pool.query<{ out_dir: string }>('SELECT out_dir FROM runs WHERE manifest = $1', [manifest])).rows[0]!.out_dir).toBe(d1);
    expect((await f.sandbox.stats()).tasks_total).toBe(tasks);
    const again = await runCli(args(d1), env());
    expect(again.code, again.stderr).toBe(0);
  });
});
