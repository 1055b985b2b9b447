import { afterAll } from 'vitest';
import { openPool, type Pool } from '../../src/store/pg/db.js';
import { ROW_COLUMNS } from '../../src/store/pg/leases.js';
import { migrate } from '../../src/store/pg/schema.js';
import { PgWorkStore } from '../../src/store/pg/work-store.js';
import type { JobRow } from '../../src/store/index.js';
import { testDatabase, type TestDatabase } from './pg.js';
import type { MakeWorkStore } from './workstore-cases.js';

/**
 * The PostgreSQL backend of the WorkStore behaviour suite: one test database per test file (dropped
 * after it), a new run in it per case, seeded with SQL as a manifest sync and earlier workers would
 * leave it (tasks of submitted/downloading jobs unleased: their workers are gone), and one worker over it.
 */
let shared: Promise<{ db: TestDatabase; pool: Pool }> | undefined;
let runs = 0;

afterAll(async () => {
  if (!shared) return;
  const { db, pool } = await shared;
  await pool.end();
  await db.drop();
});

function database(): Promise<{ db: TestDatabase; pool: Pool }> {
  shared ??= (async () => {
    const db = await testDatabase();
    const pool = openPool(db.url, { max: 4 });
    await migrate(pool);
    return { db, pool };
  })();
  return shared;
}

export const postgresWorkStore: MakeWorkStore = async ({ jobs }) => {
  const { db, pool: admin } = await database();
  const r = await admin.query<{ id: number }>(`INSERT INTO runs (manifest, out_dir, base_url) VALUES ($1, '/tmp/out', 'http://svc') RETURNING id`, [`/m${++runs}.yaml`]);
  const runId = r.rows[0]!.id;
  let seq = 0;
  for (const j of jobs) {
    const state = j.state ?? 'pending';
    const sent = state === 'submitted' || state === 'downloading' || state === 'done';
    await admin.query(
      `INSERT INTO jobs (run_id, id, seq, model, kind, "where", spec_hash, spec, state, task_id, attempts, created_at, updated_at, estimated_credits, generation, result, last_error)
       VALUES ($1, $2, $3, 'm', $4, $5, $6, '{}', $7, $8, $9, 'seeded', 'seeded', $10, 0, $11, $12)`,
      [
        runId,
        j.id,
        ++seq,
        j.kind ?? 'submit',
        `m.yaml:${j.id}`,
        `h-${j.id}`,
        state,
        sent ? `task-${j.id}` : null,
        sent ? 1 : 0,
        j.estimatedCredits === undefined ? 1 : j.estimatedCredits,
        state === 'downloading' || state === 'done' ? '{}' : null,
        state === 'failed' ? 'seeded' : null,
      ],
    );
    for (const p of j.parents ?? []) await admin.query(`INSERT INTO job_links (run_id, job_id, parent_id, kind) VALUES ($1, $2, $3, 'needs')`, [runId, j.id, p]);
    for (const f of state === 'downloading' ? (j.files ?? []) : []) {
      await admin.query(
        `INSERT INTO files (run_id, job_id, idx, name, url, type, content_type, expected_size, expires_at, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending')`,
        [runId, j.id, f.idx, f.name, f.url, f.type, f.content_type, f.expected_size, f.expires_at],
      );
    }
  }
  const pool = openPool(db.url, { max: 4 });
  const store = await PgWorkStore.open({ pool, runId, apiKey: 'test-key', slotPollMs: 50 });
  return {
    store,
    force: async (id, state) => {
      await admin.query('UPDATE jobs SET state = $3 WHERE run_id = $1 AND id = $2', [runId, id, state]);
    },
    readElsewhere: async (id) => (await admin.query<JobRow>(`SELECT ${ROW_COLUMNS} FROM jobs j WHERE j.run_id = $1 AND j.id = $2`, [runId, id])).rows[0],
    close: () => pool.end(),
  };
};
