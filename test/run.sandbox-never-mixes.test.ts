import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { keyFingerprint } from '../src/engine/prepare/same-service.js';
import { imageManifest, runCli } from './helpers/cli.js';
import { pgSandbox } from './helpers/pg-fixture.js';

/**
 * Issue #23 item 1: after `npm run demo` (the in-process sandbox), a run against a service reused the demo's
 * state ("24 done", nothing sent). A --sandbox run now has its own default output (`<name>.sandbox/`), each
 * state records the service and key fingerprint it was made against, and the same state given another is
 * refused (exit 2, naming both and the way on), on SQLite and PostgreSQL, for run and work.
 */

const KEY = 'sk-never-mix-0123456789abcdef';
const OTHER = 'sk-never-mix-other-fedcba9876';
const f = pgSandbox({ prefix: 'genbatch-never-mix-', key: KEY, sandbox: { keys: { [KEY]: 100_000, [OTHER]: 100_000 } } });
const env = (key = KEY) => ({ GENBATCH_API_KEY: key, GENBATCH_BASE_URL: f.sandbox.url });
const fast = ['--time-scale', '0.01'];
const tasks = () => f.sandbox.stats().tasks_total;

describe('a --sandbox run and a run against a service', () => {
  it('keep apart by default: after the sandbox run, the same command against the service sends every job', async () => {
    const manifest = imageManifest(join(f.dir, 'a.yaml'), 3, 'a');
    const demo = await runCli(['run', manifest, '--sandbox', '--yes'], {});
    expect(demo.code, demo.stderr).toBe(0);
    expect(existsSync(join(f.dir, 'genbatch-out', 'a.sandbox', 'state.db'))).toBe(true);
    expect(existsSync(join(f.dir, 'genbatch-out', 'a'))).toBe(false);
    // status given the manifest finds the sandbox run while it is the only one.
    const alone = await runCli(['status', manifest, '--json'], {});
    expect(alone.code, alone.stderr).toBe(0);
    expect(alone.stdout).toContain(`"out_dir":"${join(f.dir, 'genbatch-out', 'a.sandbox')}"`);
    const before = tasks();
    const real = await runCli(['run', manifest, ...fast], env());
    expect(real.code, real.stderr).toBe(0);
    expect(tasks() - before).toBe(3);
    expect(existsSync(join(f.dir, 'genbatch-out', 'a', 'state.db'))).toBe(true);
    // Then status given the manifest finds the real run first.
    const st = await runCli(['status', manifest, '--json'], {});
    expect(st.code, st.stderr).toBe(0);
    expect(st.stdout).toContain(`"out_dir":"${join(f.dir, 'genbatch-out', 'a')}"`);
  });

  it('a sandbox state given to a run against the service is refused with exit 2, naming both, nothing sent', async () => {
    const manifest = imageManifest(join(f.dir, 'b.yaml'), 2, 'b');
    const out = join(f.dir, 'b-out');
    const demo = await runCli(['run', manifest, '--sandbox', '--yes', '--out', out], {});
    expect(demo.code, demo.stderr).toBe(0);
    const before = tasks();
    const r = await runCli(['run', manifest, '--out', out, ...fast], env());
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`the state ${join(out, 'state.db')} was made against the in-process sandbox (--sandbox), and this run is against ${f.sandbox.url} (key ${keyFingerprint(KEY)})`);
    expect(r.stderr).toContain('Go on with --sandbox, or start a run in another output folder (--out DIR) or with another state (--state PATH)');
    expect(r.stdout).not.toMatch(/\bdone\b/);
    expect(tasks()).toBe(before);
    // And the other way round: a service's state is refused to --sandbox.
    const out2 = join(f.dir, 'b-real');
    expect((await runCli(['run', manifest, '--out', out2, ...fast], env())).code).toBe(0);
    const back = await runCli(['run', manifest, '--out', out2, '--sandbox', '--yes'], {});
    expect(back.code).toBe(2);
    expect(back.stderr).toContain(`was made against ${f.sandbox.url} (key ${keyFingerprint(KEY)}), and this run is against the in-process sandbox (--sandbox)`);
  });

  it('another key on the same service is refused too; the key itself is never printed', async () => {
    const manifest = imageManifest(join(f.dir, 'c.yaml'), 1, 'c');
    expect((await runCli(['run', manifest, ...fast], env())).code).toBe(0);
    const before = tasks();
    const r = await runCli(['run', manifest, ...fast], env(OTHER));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`(key ${keyFingerprint(KEY)}), and this run is against ${f.sandbox.url} (key ${keyFingerprint(OTHER)})`);
    expect(r.stderr + r.stdout).not.toContain(KEY);
    expect(r.stderr + r.stdout).not.toContain(OTHER);
    expect(tasks()).toBe(before);
  });

  it('a state made before services were recorded adopts the current one, then holds to it', async () => {
    const manifest = imageManifest(join(f.dir, 'd.yaml'), 2, 'd');
    expect((await runCli(['run', manifest, ...fast], env())).code).toBe(0);
    const state = join(f.dir, 'genbatch-out', 'd', 'state.db');
    const db = new Database(state);
    const removed = db.prepare("DELETE FROM meta WHERE key LIKE 'service:%'").run().changes;
    db.close();
    expect(removed).toBe(1);
    const adopt = await runCli(['run', manifest, ...fast], env(OTHER));
    expect(adopt.code, adopt.stderr).toBe(0);
    const again = await runCli(['run', manifest, ...fast], env());
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`(key ${keyFingerprint(OTHER)}), and this run is against ${f.sandbox.url} (key ${keyFingerprint(KEY)})`);
  });
});

describe('a PostgreSQL state', () => {
  it('made against the service is refused to --sandbox and to a worker with another key (exit 2); the same service goes on', async () => {
    const manifest = imageManifest(join(f.dir, 'p.yaml'), 2, 'p');
    const out = join(f.dir, 'p-out');
    const first = await runCli(['run', manifest, '--state', f.db.url, '--out', out, ...fast], env());
    expect(first.code, first.stderr).toBe(0);
    const sandboxed = await runCli(['run', manifest, '--state', f.db.url, '--out', out, '--sandbox', '--yes'], {});
    expect(sandboxed.code).toBe(2);
    expect(sandboxed.stderr).toContain(`was made against ${f.sandbox.url} (key ${keyFingerprint(KEY)}), and this run is against the in-process sandbox (--sandbox)`);
    const worker = await runCli(['work', '--state', f.db.url, '--until-empty', ...fast], env(OTHER));
    expect(worker.code).toBe(2);
    expect(worker.stderr).toContain(`and this work is against ${f.sandbox.url} (key ${keyFingerprint(OTHER)})`);
    expect(worker.stderr).not.toContain(OTHER);
    const same = await runCli(['run', manifest, '--state', f.db.url, '--out', out, ...fast], env());
    expect(same.code, same.stderr).toBe(0);
  });
});
