// CPU and wall time per job of the work store alone, SQLite (SqliteWorkStore over Store, one writer) against
// PostgreSQL (PgWorkStore), in one run: each job's store calls as the pipeline makes them (claimed 16 at a time,
// the intent and the task id durable, downloading with one file row, done with the file recorded), 16 jobs in
// flight at once. Worker CPU is this process's; the PostgreSQL server's (postmaster and its backends, read from
// /proc) is shown apart. Numbers printed; no pass/fail.
// Usage: npx tsc -p tsconfig.json && node bench/pg-store.mjs [--jobs 2000]
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteWorkStore, Store } from '../dist/store/index.js';
import { openPool } from '../dist/store/pg/db.js';
import { migrate } from '../dist/store/pg/schema.js';
import { PgWorkStore } from '../dist/store/pg/work-store.js';

const i = process.argv.indexOf('--jobs');
const N = i > 0 ? Number(process.argv[i + 1]) : 2000;
const IN_FLIGHT = 16;
const file = { idx: 0, name: 'image-1.png', url: 'http://files.test/x.png', type: 'image', content_type: 'image/png', expected_size: 5641, expires_at: null };
const got = { idx: 0, path: 'x/image-1.png', size: 5641, sha256: 'ab'.repeat(32), content_type: 'image/png' };

/** Every job through the store as the pipeline moves it, IN_FLIGHT at once. */
async function lifecycle(store) {
  let done = 0;
  const queue = [];
  const one = async (id) => {
    await store.transition(id, 'pending', 'submitting', { attemptsInc: 1, submitted_at: new Date().toISOString() }, { durable: true });
    await store.transition(id, 'submitting', 'submitted', { task_id: `task-${id}` }, { durable: true });
    await store.transition(id, 'submitted', 'downloading', { result: '{"status":"finished"}', expires_at: Date.now() + 86_400_000 }, { addFiles: [file] });
    await store.transition(id, 'downloading', 'done', {}, { filesDone: [got] });
    done++;
  };
  const lanes = Array.from({ length: IN_FLIGHT }, async () => {
    for (;;) {
      if (queue.length === 0) {
        const c = await store.claimPending(16);
        if (c.jobs.length === 0) return;
        queue.push(...c.jobs.map((j) => j.id));
      }
      const id = queue.shift();
      if (id !== undefined) await one(id);
    }
  });
  await Promise.all(lanes);
  return done;
}

async function measure(name, store, serverCpu) {
  const s0 = serverCpu?.() ?? 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  const done = await lifecycle(store);
  const wall = performance.now() - t0;
  const c = process.cpuUsage(c0);
  const cpu = (c.user + c.system) / 1000;
  const server = serverCpu ? serverCpu() - s0 : null;
  console.log(`  ${name.padEnd(10)} ${done} jobs: ${(wall / done).toFixed(3)} ms wall/job, ${(cpu / done).toFixed(3)} ms worker CPU/job${server === null ? '' : `, ${(server / done).toFixed(3)} ms server CPU/job`}`);
}

function jobInputs() {
  return Array.from({ length: N }, (_, k) => ({ id: `j${String(k).padStart(6, '0')}`, model: 'alpha-image-2', kind: 'submit', where: `m.yaml:${k}`, specHash: `h${k}`, spec: '{}', estimatedCredits: 1 }));
}

/** CPU ms of a process and its children (the postmaster and its backends). */
function treeCpu(rootPid) {
  const tck = 100;
  let ms = 0;
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const f = readFileSync(`/proc/${d}/stat`, 'utf8');
      const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
      const ppid = Number(parts[1]);
      if (Number(d) === rootPid || ppid === rootPid) ms += ((Number(parts[11]) + Number(parts[12])) * 1000) / tck;
    } catch {
      // gone
    }
  }
  return ms;
}

const work = mkdtempSync(join(tmpdir(), 'genbatch-bench-store-'));
console.log(`Work store per job, ${N} jobs, ${IN_FLIGHT} in flight`);
// SQLite
{
  const store = Store.openForWrite(join(work, 'state.db'));
  store.openRun(join(work, 'm.yaml'), join(work, 'out'), 'http://svc', false, false);
  store.beginSync();
  for (const j of jobInputs()) store.syncJob(j);
  store.commitSync();
  await measure('SQLite', new SqliteWorkStore(store));
  store.close();
}
// PostgreSQL (embedded unless GENBATCH_TEST_DATABASE_URL; default durability)
{
  let url = process.env.GENBATCH_TEST_DATABASE_URL;
  let stop = async () => {};
  let serverCpu = null;
  if (!url) {
    const EmbeddedPostgres = await (await import('../test/helpers/pg-embedded.mjs')).loadEmbeddedPostgres();
    const port = await new Promise((resolve) => {
      const s = createServer().listen(0, '127.0.0.1', () => {
        const p = s.address().port;
        s.close(() => resolve(p));
      });
    });
    const dir = join(tmpdir(), `genbatch-bench-pg-${randomBytes(4).toString('hex')}`);
    const pgs = new EmbeddedPostgres({ databaseDir: dir, port, password: 'bench', persistent: false, createPostgresUser: true, onLog: () => {}, onError: () => {}, postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${dir}`] });
    await pgs.initialise();
    await pgs.start();
    url = `postgres://postgres:bench@127.0.0.1:${port}/postgres`;
    const pid = pgs.process?.pid;
    if (pid) serverCpu = () => treeCpu(pid);
    stop = async () => {
      await pgs.stop();
      rmSync(dir, { recursive: true, force: true });
    };
  }
  const pool = openPool(url, { max: IN_FLIGHT + 2 });
  try {
    await migrate(pool);
    const run = await pool.query(`INSERT INTO runs (manifest, out_dir) VALUES ($1, '/tmp') RETURNING id`, [`bench-store-${randomBytes(3).toString('hex')}`]);
    const runId = run.rows[0].id;
    const jobs = jobInputs();
    await pool.query(
      `INSERT INTO jobs (run_id, id, seq, model, kind, "where", spec_hash, spec, state, created_at, updated_at, estimated_credits, generation)
       SELECT $1, t.id, t.ord, 'alpha-image-2', 'submit', 'm.yaml', 'h', '{}', 'pending', 'now', 'now', 1, 1 FROM unnest($2::text[]) WITH ORDINALITY AS t(id, ord)`,
      [runId, jobs.map((j) => j.id)],
    );
    const store = await PgWorkStore.open({ pool, runId, apiKey: 'bench-key' });
    await measure('PostgreSQL', store, serverCpu);
  } finally {
    await pool.end();
    await stop();
  }
}
rmSync(work, { recursive: true, force: true });
