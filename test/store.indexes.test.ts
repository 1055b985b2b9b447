import { hostname } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { StateError } from '../src/errors.js';
import { Store, type JobInput } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The jobs indexes: state files written before the partial index jobs_pending
 * (with jobs_by_state, jobs_by_task, jobs_by_expiry) open, are migrated by the
 * writer that holds the lease, and read and change exactly as before.
 */

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

/** The schema of genbatch before this change (schema version 1), verbatim. */
const OLD_SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
  id INTEGER PRIMARY KEY,
  manifest TEXT NOT NULL UNIQUE,
  out_dir TEXT NOT NULL,
  base_url TEXT,
  sandbox INTEGER NOT NULL DEFAULT 0,
  started_at TEXT,
  finished_at TEXT,
  balance_before REAL,
  balance_after REAL,
  user_prices INTEGER NOT NULL DEFAULT 0,
  generation INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS jobs (
  run_id INTEGER NOT NULL,
  id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  model TEXT NOT NULL,
  kind TEXT NOT NULL,
  "where" TEXT NOT NULL,
  spec_hash TEXT NOT NULL,
  spec TEXT NOT NULL,
  submitted_input TEXT,
  state TEXT NOT NULL,
  task_id TEXT,
  attempts INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  submitted_at TEXT,
  finished_at TEXT,
  expires_at INTEGER,
  last_error TEXT,
  result TEXT,
  estimated_credits REAL,
  generation INTEGER NOT NULL,
  PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (run_id, state, seq);
CREATE INDEX IF NOT EXISTS jobs_by_task ON jobs (task_id);
CREATE INDEX IF NOT EXISTS jobs_by_seq ON jobs (run_id, seq);
CREATE INDEX IF NOT EXISTS jobs_by_expiry ON jobs (run_id, state, expires_at, seq);
CREATE TABLE IF NOT EXISTS files (
  run_id INTEGER NOT NULL,
  job_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  name TEXT NOT NULL,
  url TEXT,
  type TEXT NOT NULL,
  content_type TEXT,
  expected_size INTEGER,
  path TEXT,
  size INTEGER,
  sha256 TEXT,
  expires_at INTEGER,
  state TEXT NOT NULL,
  PRIMARY KEY (run_id, job_id, idx)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS job_links (
  run_id INTEGER NOT NULL,
  job_id TEXT NOT NULL,
  parent_id TEXT NOT NULL,
  kind TEXT NOT NULL,
  PRIMARY KEY (run_id, job_id, parent_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS job_links_by_parent ON job_links (run_id, parent_id);
CREATE TABLE IF NOT EXISTS uploads (
  base_url TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  file_url TEXT NOT NULL,
  uploaded_at INTEGER NOT NULL,
  PRIMARY KEY (base_url, sha256)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lease (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  pid INTEGER NOT NULL,
  hostname TEXT NOT NULL,
  token TEXT NOT NULL,
  heartbeat INTEGER NOT NULL
);
`;

const STATES = ['pending', 'submitting', 'submitted', 'downloading', 'done', 'failed', 'uncertain', 'expired', 'skipped', 'exists'] as const;

/**
 * A state file as the old code leaves it: its DDL, a run, 40 jobs in every
 * state (ids not in seq order, some with expiry times), file rows, and links.
 */
function oldStateFile(dir: string): string {
  const path = join(dir, 'state.db');
  const db = new Database(path);
  db.pragma('journal_mode = WAL');
  db.exec(OLD_SCHEMA);
  db.prepare(`INSERT INTO meta (key, value) VALUES ('schema_version', '1')`).run();
  db.prepare(`INSERT INTO runs (id, manifest, out_dir, base_url, sandbox, generation) VALUES (1, ?, ?, 'http://x', 1, 1)`).run(join(dir, 'm.yaml'), dir);
  const ins = db.prepare(
    `INSERT INTO jobs (run_id, id, seq, model, kind, "where", spec_hash, spec, state, task_id, created_at, updated_at, expires_at, last_error, result, estimated_credits, generation)
     VALUES (1, ?, ?, 'm', 'submit', ?, ?, '{}', ?, ?, 't0', 't0', ?, ?, ?, 2, 1)`,
  );
  for (let i = 0; i < 40; i++) {
    const state = STATES[(i * 7) % STATES.length]!;
    const id = `j${String((i * 13) % 40).padStart(2, '0')}`;
    const active = state !== 'pending';
    ins.run(id, i + 1, `m.yaml:${i + 1}`, `h-${id}`, state, active ? `task-${id}` : null, active ? 1_000_000 - i * 1000 : null, state === 'failed' ? 'bad' : null, active ? '{"status":"finished"}' : null);
    if (state === 'done' || state === 'downloading') {
      db.prepare(`INSERT INTO files (run_id, job_id, idx, name, url, type, state) VALUES (1, ?, 0, 'a.png', 'http://x/a.png', 'image', ?)`).run(id, state === 'done' ? 'done' : 'pending');
    }
  }
  db.close();
  return path;
}

function jobIndexes(path: string): string[] {
  const db = new Database(path, { readonly: true });
  try {
    return (db.prepare(`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'jobs' ORDER BY name`).pluck().all() as string[]).filter((n) => !n.startsWith('sqlite_'));
  } finally {
    db.close();
  }
}

/** What the old code's queries return on the old file: the expected answers. */
function oldAnswers(path: string): { pending: string[]; byState: Record<string, string[]>; counts: Record<string, number>; removable: string[] } {
  const db = new Database(path, { readonly: true });
  try {
    const byState: Record<string, string[]> = {};
    for (const s of STATES) byState[s] = db.prepare(`SELECT id FROM jobs WHERE run_id = 1 AND state = ? ORDER BY seq`).pluck().all(s) as string[];
    const counts: Record<string, number> = {};
    for (const r of db.prepare('SELECT state, COUNT(*) AS n FROM jobs WHERE run_id = 1 GROUP BY state').all() as { state: string; n: number }[]) counts[r.state] = r.n;
    // skipRemoved's query as the old code ran it (planned on jobs_by_expiry).
    const removable = db.prepare(`SELECT id FROM jobs WHERE run_id = 1 AND state IN ('pending', 'failed', 'expired', 'exists')`).pluck().all() as string[];
    return { pending: byState.pending!, byState, counts, removable };
  } finally {
    db.close();
  }
}

const job = (id: string, hash: string): JobInput => ({ id, model: 'm', kind: 'submit', where: 'm.yaml:1', specHash: hash, spec: '{}', estimatedCredits: 2 });

describe('jobs indexes', () => {
  it('a new state file has the primary key, jobs_by_seq and the partial index of pending jobs only', () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const path = join(t.dir, 'state.db');
    Store.openForWrite(path).close();
    expect(jobIndexes(path)).toEqual(['jobs_by_seq', 'jobs_pending']);
  });

  it('a state file of the old schema: read as it is (status), migrated by the writer, same answers and moves', () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const path = oldStateFile(t.dir);
    const want = oldAnswers(path);
    expect(want.pending.length).toBeGreaterThan(0);

    // status/report: no lease, no schema change, same answers.
    const reader = Store.openForRead(path);
    reader.useRun(reader.runs()[0]!);
    expect([...reader.jobsIn('pending')].map((r) => r.id)).toEqual(want.pending);
    expect(reader.counts()).toMatchObject(want.counts);
    reader.close();
    expect(jobIndexes(path)).toEqual(['jobs_by_expiry', 'jobs_by_seq', 'jobs_by_state', 'jobs_by_task']);

    // A writer refused by a live lease (this live pid, this host, a fresh heartbeat) leaves the file as it is.
    const live = new Database(path);
    live.prepare(`INSERT INTO lease (id, pid, hostname, token, heartbeat) VALUES (1, ?, ?, 'x', ?)`).run(process.pid, hostname(), Date.now());
    live.close();
    expect(() => Store.openForWrite(path)).toThrow(StateError);
    expect(jobIndexes(path)).toEqual(['jobs_by_expiry', 'jobs_by_seq', 'jobs_by_state', 'jobs_by_task']);
    const unplant = new Database(path);
    unplant.prepare('DELETE FROM lease').run();
    unplant.close();

    const store = Store.openForWrite(path);
    cleanups.push(() => store.close());
    expect(jobIndexes(path)).toEqual(['jobs_by_seq', 'jobs_pending']);
    expect(store.integrityCheck()).toBe('ok');
    store.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', true, false);
    for (const s of STATES) expect([...store.jobsIn(s)].map((r) => r.id), s).toEqual(want.byState[s]);
    expect(store.counts()).toMatchObject(want.counts);
    expect(store.nextPending(0, 100).map((r) => r.id)).toEqual(want.pending);
    expect(store.nextPending(0, 2).map((r) => r.id)).toEqual(want.pending.slice(0, 2));

    // A manifest that names no job: the removable ones are skipped in the order the old index gave.
    store.beginSync();
    store.commitSync();
    store.skipRemoved();
    expect(store.drainSyncMoves().map((m) => m.id)).toEqual(want.removable);

    // Moves still guarded and recorded; the pending index follows them.
    const b = store.findRun(join(t.dir, 'm.yaml'))!;
    expect(b.generation).toBe(2);
    store.beginSync();
    store.syncJob(job('new1', 'h'));
    store.commitSync();
    expect(store.nextPending(0, 100).map((r) => r.id)).toEqual(['new1']);
    store.transition('new1', 'pending', 'submitting', { attemptsInc: 1 });
    expect(store.nextPending(0, 100)).toEqual([]);
    expect(() => store.transition('new1', 'pending', 'submitting')).toThrow(/expected state pending/);
    store.close();

    // An older genbatch opening it for a run creates its indexes again; the next writer replaces them again.
    const older = new Database(path);
    older.exec(OLD_SCHEMA);
    older.close();
    expect(jobIndexes(path)).toEqual(['jobs_by_expiry', 'jobs_by_seq', 'jobs_by_state', 'jobs_by_task', 'jobs_pending']);
    const again = Store.openForWrite(path);
    cleanups.push(() => again.close());
    expect(jobIndexes(path)).toEqual(['jobs_by_seq', 'jobs_pending']);
    again.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', true, false);
    expect(again.getJob('new1')!.state).toBe('submitting');
    expect(again.recoverSubmitting()).toEqual(['new1', ...want.byState.submitting!].sort());
  });

  it('the submit queue reads pending jobs through jobs_pending; no index holds the state of other jobs', () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const path = join(t.dir, 'state.db');
    const store = Store.openForWrite(path);
    cleanups.push(() => store.close());
    const plan = (sql: string, ...args: unknown[]) => (store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as { detail: string }[]).map((r) => r.detail).join(' | ');
    expect(plan(`SELECT * FROM jobs j WHERE run_id = ? AND state = 'pending' AND seq > ? ORDER BY seq LIMIT ?`, 1, 0, 10)).toContain('USING INDEX jobs_pending');
    expect(plan(`SELECT * FROM jobs WHERE run_id = ? AND state = 'pending' ORDER BY seq`, 1)).toContain('USING INDEX jobs_pending');
    // An UPDATE of the state touches jobs_pending only into and out of pending: no other index reads `state`.
    const sqls = store.db.prepare(`SELECT sql FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'jobs' AND sql IS NOT NULL`).pluck().all() as string[];
    expect(sqls.filter((s) => /state/.test(s))).toEqual([`CREATE INDEX jobs_pending ON jobs (run_id, seq) WHERE state = 'pending'`]);
  });
});
