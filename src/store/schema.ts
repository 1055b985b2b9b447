import Database from 'better-sqlite3';
import { StateError } from '../errors.js';
import { ERRORS_TABLE } from './errors-log.js';
import { MARKS_TABLE } from './marks.js';
import { PREVIOUS_TABLES } from './previous.js';

/**
 * Opening the state file. WAL journal; `synchronous=NORMAL` by default and
 * `FULL` around the two commits that must survive a power loss (see
 * Store.durable): the submit intent and the task id. A WAL commit under NORMAL
 * survives a killed process (the OS still holds it) but not a power cut; losing
 * an intent row after the POST was sent would resubmit a paid task, so those
 * commits are fsynced before the POST is sent or the next step is taken.
 */
export const SCHEMA_VERSION = 1;

const SCHEMA = `
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
CREATE TABLE IF NOT EXISTS invocations (
  run_id INTEGER NOT NULL,
  n INTEGER NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  balance_before REAL,
  balance_before_at TEXT,
  balance_after REAL,
  balance_after_at TEXT,
  submits INTEGER,
  PRIMARY KEY (run_id, n)
) WITHOUT ROWID;
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
  permanent INTEGER NOT NULL DEFAULT 0,
  uncertain_at TEXT,
  PRIMARY KEY (run_id, id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS jobs_by_seq ON jobs (run_id, seq);
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
${PREVIOUS_TABLES}
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
${MARKS_TABLE}
${ERRORS_TABLE}
`;

/**
 * The indexes of `jobs` besides its primary key and jobs_by_seq (which no
 * state change touches). Every index that holds `state` is rewritten by every
 * state change (WAL pages, every transaction), so there is one: the pending
 * jobs in manifest order (Store.nextPending, the submit queue), a partial
 * index that only the changes into and out of `pending` touch. The other
 * reads by state are once per run (start, status, report) and read the run's
 * rows by primary key.
 *
 * State files written before this layout had jobs_by_state (run_id, state,
 * seq), jobs_by_task (task_id, read by no query) and jobs_by_expiry (run_id,
 * state, expires_at, seq; downloads are ordered in memory). Store.openForWrite
 * replaces them once the lease is held (ensureJobIndexes); the schema version
 * stays 1: an older genbatch opening such a file for a run creates its
 * indexes again (CREATE INDEX IF NOT EXISTS) and works as before.
 */
const OLD_JOB_INDEXES = ['jobs_by_state', 'jobs_by_task', 'jobs_by_expiry'] as const;
const JOB_INDEXES = `CREATE INDEX IF NOT EXISTS jobs_pending ON jobs (run_id, seq) WHERE state = 'pending';`;

/** Bring the jobs indexes to the layout above (a writer, holding the lease). True when something changed. */
export function ensureJobIndexes(db: Database.Database): boolean {
  const names = new Set((db.prepare(`SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'jobs'`).pluck().all() as string[]));
  if (names.has('jobs_pending') && !OLD_JOB_INDEXES.some((n) => names.has(n))) return false;
  db.transaction(() => {
    for (const n of OLD_JOB_INDEXES) db.exec(`DROP INDEX IF EXISTS ${n}`);
    db.exec(JOB_INDEXES);
  }).immediate();
  return true;
}

/**
 * Columns of `jobs` added after the first layout, with their definitions: a state file written before them gets
 * them at its next open for writing (ALTER TABLE ... ADD COLUMN; the schema version stays 1, as an older genbatch
 * reads the file as before and never sets them). Every opener but a read-only one adds them (status and report
 * open read-write): nullable columns, or 0, that change nothing an older genbatch reads.
 *
 *   permanent          1 when the job failed because the service refused its input (src/engine/permanent.ts); read
 *                      only while the state is `failed` (every move into `failed` writes it)
 *   uncertain_at       when the job last became `uncertain` (ISO-8601; every move into `uncertain` writes it)
 *   sent_by            the invocation (invocations.n) that last sent the job; null: not sent since they exist
 *   expected_credits   its expected price when that invocation sent it (the estimate, from the learned price of
 *                      its class where one was known); null: unknown
 */
export const ADDED_JOB_COLUMNS = [
  ['permanent', 'INTEGER NOT NULL DEFAULT 0'],
  ['uncertain_at', 'TEXT'],
  ['sent_by', 'INTEGER'],
  ['expected_credits', 'REAL'],
] as const;

/** The columns of ADDED_JOB_COLUMNS that `jobs` lacks (none when there is no jobs table). */
function missingJobColumns(db: Database.Database): Array<(typeof ADDED_JOB_COLUMNS)[number]> {
  const have = new Set(db.prepare(`SELECT name FROM pragma_table_info('jobs')`).pluck().all() as string[]);
  if (have.size === 0) return []; // no jobs table (a file opened mustExist that is not a state file: refused below)
  return ADDED_JOB_COLUMNS.filter(([name]) => !have.has(name));
}

/** Add the columns of ADDED_JOB_COLUMNS that `jobs` lacks. True when something changed. */
export function ensureJobColumns(db: Database.Database): boolean {
  const missing = missingJobColumns(db);
  if (missing.length === 0) return false;
  db.transaction(() => {
    for (const [name, def] of missing) db.exec(`ALTER TABLE jobs ADD COLUMN ${name} ${def}`);
  }).immediate();
  return true;
}

/** True when the state file's `jobs` has the columns sent_by and expected_credits (false only for a read-only open of an older file). */
export function hasJobSendColumns(db: Database.Database): boolean {
  return (db.prepare(`SELECT COUNT(*) FROM pragma_table_info('jobs') WHERE name IN ('sent_by', 'expected_credits')`).pluck().get() as number) === 2;
}

export interface OpenOptions {
  /** Open an existing file only (status, report): never create it. */
  mustExist?: boolean;
  readonly?: boolean;
}

export function openDatabase(path: string, opts: OpenOptions = {}): Database.Database {
  let db: Database.Database;
  try {
    db = new Database(path, { fileMustExist: opts.mustExist === true || opts.readonly === true, readonly: opts.readonly === true });
  } catch (err) {
    throw new StateError(`cannot open state file ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  try {
    db.pragma('busy_timeout = 5000');
    if (!opts.readonly) {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
    }
    db.pragma('foreign_keys = ON');
    const check = db.pragma('quick_check', { simple: true });
    if (check !== 'ok') throw new StateError(`state file ${path} failed its integrity check: ${String(check)}`);
    if (!opts.readonly && !opts.mustExist) db.exec(SCHEMA);
    {
      const row = db.prepare('SELECT value FROM meta WHERE key = ?').get('schema_version') as { value: string } | undefined;
      if (!row && opts.mustExist) throw new StateError(`${path} is not a genbatch state file`);
      if (!row) db.prepare('INSERT INTO meta (key, value) VALUES (?, ?)').run('schema_version', String(SCHEMA_VERSION));
      else if (Number(row.value) !== SCHEMA_VERSION) {
        throw new StateError(`state file ${path} has schema version ${row.value}; this genbatch reads version ${SCHEMA_VERSION}`);
      }
    }
    // Any opener that may write (run, and the readers: status, report, view open the file read-write) adds them.
    if (!opts.readonly) ensureJobColumns(db);
  } catch (err) {
    db.close();
    if (err instanceof StateError) throw err;
    throw new StateError(`state file ${path} is not usable: ${err instanceof Error ? err.message : String(err)}`);
  }
  return db;
}
