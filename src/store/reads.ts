import type Database from 'better-sqlite3';
import { JOB_STATES, type JobState } from './states.js';
import type { JobRow, SummaryRow, TakenJob } from './types.js';

/**
 * Plain reads of one run's jobs (the engine's queue, status and reports).
 * Store calls these with its cached statements (`stmt`) and its run id.
 */

export type Prepare = (sql: string) => Database.Statement;

/*
 * Rows are read in raw mode (arrays) and turned into objects here, with the
 * same keys in the same order as the named rows better-sqlite3 makes (which
 * looks every column name up again for every row: most of the cost of a read).
 * JOB_COLUMNS is the column list of `jobs` in table order, i.e. what
 * `SELECT *` returned; jobRow is its object.
 */
const JOB_COLUMNS =
  'run_id, id, seq, model, kind, "where", spec_hash, spec, submitted_input, state, task_id, attempts, created_at, updated_at, submitted_at, finished_at, expires_at, last_error, result, estimated_credits, generation, permanent, uncertain_at, sent_by, expected_credits';

type JobTuple = [
  number,
  string,
  number,
  string,
  string,
  string,
  string,
  string,
  string | null,
  JobState,
  string | null,
  number,
  string,
  string,
  string | null,
  string | null,
  number | null,
  string | null,
  string | null,
  number | null,
  number,
  number,
  string | null,
  number | null,
  number | null,
];

/** A jobs row as `SELECT *` gives it: JobRow and the run id and sync generation. */
export type StoredJobRow = JobRow & { run_id: number; generation: number };

export function jobRow(r: JobTuple): StoredJobRow {
  return {
    run_id: r[0],
    id: r[1],
    seq: r[2],
    model: r[3],
    kind: r[4],
    where: r[5],
    spec_hash: r[6],
    spec: r[7],
    submitted_input: r[8],
    state: r[9],
    task_id: r[10],
    attempts: r[11],
    created_at: r[12],
    updated_at: r[13],
    submitted_at: r[14],
    finished_at: r[15],
    expires_at: r[16],
    last_error: r[17],
    result: r[18],
    estimated_credits: r[19],
    generation: r[20],
    permanent: r[21],
    uncertain_at: r[22],
    sent_by: r[23],
    expected_credits: r[24],
  };
}

const SUMMARY_COLUMNS = 'id, model, kind, "where", state, task_id, attempts, submitted_at, finished_at, last_error, estimated_credits, permanent';

type SummaryTuple = [string, string, string, string, JobState, string | null, number, string | null, string | null, string | null, number | null, number];
/** How many columns SUMMARY_COLUMNS names (none has a comma inside). */
const SUMMARY_WIDTH = SUMMARY_COLUMNS.split(',').length;

function summaryRow(r: SummaryTuple): SummaryRow {
  return {
    id: r[0],
    model: r[1],
    kind: r[2],
    where: r[3],
    state: r[4],
    task_id: r[5],
    attempts: r[6],
    submitted_at: r[7],
    finished_at: r[8],
    last_error: r[9],
    estimated_credits: r[10],
    permanent: r[11],
  };
}

/** Rows of a raw-mode iterator as objects; ending the loop early ends the statement's iteration too. */
function* mapRows<T, R>(rows: IterableIterator<unknown>, make: (r: T) => R): IterableIterator<R> {
  for (const r of rows) yield make(r as T);
}

/** The task result JSON last read for a job, or null. */
export function resultOf(raw: Prepare, runId: number, jobId: string): string | null {
  const r = raw('SELECT result FROM jobs WHERE run_id = ? AND id = ?').get(runId, jobId) as [string | null] | undefined;
  return r ? r[0] : null;
}

export function getJob(raw: Prepare, runId: number, jobId: string): JobRow | undefined {
  const r = raw(`SELECT ${JOB_COLUMNS} FROM jobs WHERE run_id = ? AND id = ?`).get(runId, jobId) as JobTuple | undefined;
  return r ? jobRow(r) : undefined;
}

/**
 * Up to `limit` ready pending jobs after sequence number `afterSeq`, in
 * manifest order: a job with graph parents is ready when every parent is done.
 */
export function nextPending(raw: Prepare, runId: number, afterSeq: number, limit: number): JobRow[] {
  const rows = raw(
    `SELECT ${JOB_COLUMNS} FROM jobs j WHERE run_id = ? AND state = 'pending' AND seq > ?
         AND NOT EXISTS (SELECT 1 FROM job_links l JOIN jobs p ON p.run_id = l.run_id AND p.id = l.parent_id WHERE l.run_id = j.run_id AND l.job_id = j.id AND l.kind != 'child' AND p.state != 'done')
       ORDER BY seq LIMIT ?`,
  ).all(runId, afterSeq, limit) as JobTuple[];
  return rows.map(jobRow);
}

/** The jobs in one state with what resuming them needs, in manifest order. */
export function takenJobs(db: Database.Database, runId: number, state: 'submitted' | 'downloading'): TakenJob[] {
  return db.prepare(`SELECT id, state, task_id, model, submitted_at, expires_at FROM jobs WHERE run_id = ? AND state = ? ORDER BY +seq`).all(runId, state) as TakenJob[];
}

/** Jobs in one state, in manifest order (iterated lazily). */
export function jobsIn(db: Database.Database, runId: number, state: JobState): IterableIterator<JobRow> {
  // Pending jobs through the partial index jobs_pending (a bound state could not use it); other states are read once per run.
  const rows =
    state === 'pending'
      ? db.prepare(`SELECT ${JOB_COLUMNS} FROM jobs WHERE run_id = ? AND state = 'pending' ORDER BY seq`).raw(true).iterate(runId)
      : // `+seq`: the run's rows by primary key, the few that match sorted (not every row looked up through jobs_by_seq).
        db.prepare(`SELECT ${JOB_COLUMNS} FROM jobs WHERE run_id = ? AND state = ? ORDER BY +seq`).raw(true).iterate(runId, state);
  return mapRows(rows, jobRow);
}

/** Id and estimated credits of the pending jobs, in manifest order (iterated lazily; `--only`/`--limit` choose from these). */
export function pendingCredits(db: Database.Database, runId: number): IterableIterator<[string, number | null]> {
  return db.prepare(`SELECT id, estimated_credits FROM jobs WHERE run_id = ? AND state = 'pending' ORDER BY seq`).raw(true).iterate(runId) as IterableIterator<[string, number | null]>;
}

/** Every job of the run, in manifest order. */
export function allJobs(db: Database.Database, runId: number): IterableIterator<JobRow> {
  return mapRows(db.prepare(`SELECT ${JOB_COLUMNS} FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? ORDER BY seq`).raw(true).iterate(runId), jobRow);
}

/** The ids of every job of the run, in manifest order: jobs_by_seq holds them (a read of no table row). */
export function jobIds(db: Database.Database, runId: number): string[] {
  return db.prepare(`SELECT id FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? ORDER BY seq`).pluck().all(runId) as string[];
}

/**
 * summaryRows with more columns read beside each row in the same statement (`extra`: SQL column expressions), each
 * row as [SummaryRow, its extra values]: the reports take each job's input with its row in one pass over the
 * table instead of two (the extra columns sit after the summary ones; an index walk of the table each).
 */
export function summaryRowsWith(db: Database.Database, runId: number, extra: readonly string[]): IterableIterator<[SummaryRow, unknown[]]> {
  const stmt = db.prepare(`SELECT ${SUMMARY_COLUMNS}, ${extra.join(', ')} FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? ORDER BY seq`).raw(true);
  return mapRows(stmt.iterate(runId), (r: unknown[]): [SummaryRow, unknown[]] => [summaryRow(r as SummaryTuple), r.slice(SUMMARY_WIDTH)]);
}

/** Every job of the run, in manifest order, without the large spec and input columns (reports, status). */
export function summaryRows(db: Database.Database, runId: number): IterableIterator<SummaryRow> {
  return mapRows(db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? ORDER BY seq`).raw(true).iterate(runId), summaryRow);
}

export function counts(stmt: Prepare, runId: number): Record<JobState, number> {
  const out = { pending: 0, submitting: 0, submitted: 0, downloading: 0, done: 0, failed: 0, uncertain: 0, expired: 0, skipped: 0, exists: 0 } as Record<JobState, number>;
  for (const r of stmt('SELECT state, COUNT(*) AS n FROM jobs WHERE run_id = ? GROUP BY state').all(runId) as { state: JobState; n: number }[]) out[r.state] = r.n;
  return out;
}

/** What estimate() sums: jobs not skipped, and not a for_each job that is done (its children are counted). */
const ESTIMATED = `state != 'skipped' AND NOT (kind = 'fanout' AND state = 'done')`;

/**
 * ChatTotals' five sums, over every job of the run (json_extract only on the chat jobs' results, and only on those
 * that are JSON: json_extract throws 'malformed JSON' on any other text, which a row edited by hand or copied from a
 * PostgreSQL state written by another client may hold, and the whole read failed).
 */
const CHAT = `kind = 'chat'`;
const CHAT_RESULT = `${CHAT} AND json_valid(result)`;
const CHAT_COLUMNS = `COALESCE(SUM(${CHAT}), 0), COALESCE(SUM(CASE WHEN ${CHAT} THEN state = 'done' END), 0), COALESCE(SUM(CASE WHEN ${CHAT} THEN MAX(attempts - 1, 0) END), 0),
  COALESCE(SUM(CASE WHEN ${CHAT_RESULT} THEN json_extract(result, '$.usage.input_tokens') END), 0), COALESCE(SUM(CASE WHEN ${CHAT_RESULT} THEN json_extract(result, '$.usage.output_tokens') END), 0)`;

/** One scan for counts(), estimate() and chatTotals(): a column per state, the total, the estimate's two sums, the chat sums. */
const COUNTS_AND_ESTIMATE = `SELECT ${JOB_STATES.map((s) => `COALESCE(SUM(state = '${s}'), 0)`).join(', ')}, COUNT(*),
  COALESCE(SUM(CASE WHEN ${ESTIMATED} THEN estimated_credits END), 0), COALESCE(SUM(CASE WHEN ${ESTIMATED} AND estimated_credits IS NULL THEN 1 ELSE 0 END), 0),
  ${CHAT_COLUMNS}
  FROM jobs WHERE run_id = ?`;

/**
 * counts(), estimate() and the chat totals in one scan of the run's jobs instead of three. The estimate sums the same
 * rows in the same order (the primary key's) as estimate()'s own query: the same number to the last bit. A state outside
 * JOB_STATES (a file written by something else): the three reads apart, as before, so counts() still shows it.
 */
export type Totals = { counts: Record<JobState, number>; estimate: { known: number; unknown: number }; chat: ChatTotals };

export function countsAndEstimate(stmt: Prepare, raw: Prepare, runId: number): Totals {
  const r = raw(COUNTS_AND_ESTIMATE).get(runId) as number[];
  const n = JOB_STATES.length;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += r[i]!;
  if (sum !== r[n]) return { counts: counts(stmt, runId), estimate: estimate(stmt, runId), chat: chatTotals(raw, runId) };
  return {
    counts: Object.fromEntries(JOB_STATES.map((s, i) => [s, r[i]!])) as Record<JobState, number>,
    estimate: { known: r[n + 1]!, unknown: r[n + 2]! },
    chat: chatOf(r.slice(n + 3)),
  };
}

/** The run's chat jobs: how many, done, calls made again (attempts past the first), and the tokens their results report. */
export interface ChatTotals {
  jobs: number;
  done: number;
  repeated_calls: number;
  input_tokens: number;
  output_tokens: number;
}

const CHAT_SUMS = `SELECT ${CHAT_COLUMNS} FROM jobs WHERE run_id = ?`;

export function chatTotals(raw: Prepare, runId: number): ChatTotals {
  return chatOf(raw(CHAT_SUMS).get(runId) as number[]);
}

function chatOf(c: number[]): ChatTotals {
  return { jobs: c[0]!, done: c[1]!, repeated_calls: c[2]!, input_tokens: c[3]!, output_tokens: c[4]! };
}

/**
 * Result files on disk (recorded done) of the run's jobs but skipped ones, and their bytes (the reports' "Files"
 * line, progress). `noSkipped`: the run has no skipped job (a count says so), so the files alone are counted,
 * without looking each one's job up (a resume of 100,000 jobs: ~100,000 lookups in the jobs table).
 */
export function fileTotals(stmt: Prepare, runId: number, noSkipped = false): { count: number; bytes: number } {
  const r = stmt(
    noSkipped
      ? `SELECT COUNT(*) AS n, COALESCE(SUM(size), 0) AS b FROM files WHERE run_id = ? AND state = 'done'`
      : `SELECT COUNT(*) AS n, COALESCE(SUM(f.size), 0) AS b FROM files f JOIN jobs j ON j.run_id = f.run_id AND j.id = f.job_id WHERE f.run_id = ? AND f.state = 'done' AND j.state != 'skipped'`,
  ).get(runId) as { n: number; b: number };
  return { count: r.n, bytes: r.b };
}

export function estimate(stmt: Prepare, runId: number): { known: number; unknown: number } {
  const r = stmt(
    `SELECT COALESCE(SUM(estimated_credits), 0) AS known, SUM(CASE WHEN estimated_credits IS NULL THEN 1 ELSE 0 END) AS unknown FROM jobs WHERE run_id = ? AND state != 'skipped' AND NOT (kind = 'fanout' AND state = 'done')`,
  ).get(runId) as { known: number; unknown: number | null };
  return { known: r.known, unknown: r.unknown ?? 0 };
}

/**
 * Pending jobs whose manifest entry names its own callback_url. A spec that is not JSON (a row edited by hand) names
 * none: json_extract throws on it, and CASE (unlike AND) is sure to ask json_valid first.
 */
export function pendingWithOwnCallback(stmt: Prepare, runId: number): number {
  const r = stmt(`SELECT COUNT(*) AS n FROM jobs WHERE run_id = ? AND state = 'pending' AND CASE WHEN json_valid(spec) THEN json_extract(spec, '$.callback_url') END IS NOT NULL`).get(runId) as { n: number };
  return r.n;
}

/** Estimate of the work this run will submit (pending jobs only). */
export function pendingEstimate(stmt: Prepare, runId: number): { known: number; unknown: number } {
  const r = stmt(
    `SELECT COALESCE(SUM(estimated_credits), 0) AS known, SUM(CASE WHEN estimated_credits IS NULL THEN 1 ELSE 0 END) AS unknown FROM jobs WHERE run_id = ? AND state = 'pending'`,
  ).get(runId) as { known: number; unknown: number | null };
  return { known: r.known, unknown: r.unknown ?? 0 };
}

/**
 * The jobs of the run changed at or after `since` (an ISO time): their row was updated, or (`marks`: the file
 * has the marks table) a mark was added; in manifest order (the view's live updates).
 */
export function summaryRowsChangedSince(db: Database.Database, runId: number, since: string, marks: boolean): SummaryRow[] {
  const byMark = marks ? ' OR id IN (SELECT job_id FROM marks WHERE run_id = ? AND at >= ?)' : '';
  const args: Array<string | number> = marks ? [runId, since, runId, since] : [runId, since];
  return (db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM jobs WHERE run_id = ? AND (updated_at >= ?${byMark}) ORDER BY seq`).raw(true).all(...args) as SummaryTuple[]).map(summaryRow);
}

/** The latest change of the run: the greatest updated_at of its jobs and time of its marks (ISO), '' when none. */
export function lastChange(db: Database.Database, runId: number, marks: boolean): string {
  const jobs = (db.prepare('SELECT MAX(updated_at) FROM jobs WHERE run_id = ?').pluck().get(runId) as string | null) ?? '';
  const mark = marks ? ((db.prepare('SELECT MAX(at) FROM marks WHERE run_id = ?').pluck().get(runId) as string | null) ?? '') : '';
  return jobs > mark ? jobs : mark;
}

/**
 * The run's jobs after sequence number `after`, in manifest order, about `limit` of them: every job with seq in
 * (after, upto], `upto` the seq of the limit-th one, or when fewer are left the greatest seq now (`end`: none
 * after them as this read saw it). A bound by seq, not an offset, so that the next stretch starts where this
 * one ended however many jobs are added (a new job takes a seq above every other), two jobs with one seq are
 * never split, and a read of their files or inputs by the same bound meets no job added since.
 */
export function summaryRowsAfter(db: Database.Database, runId: number, after: number, limit: number): { rows: SummaryRow[]; upto: number; end: boolean } {
  const nth = db.prepare('SELECT seq FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? AND seq > ? ORDER BY seq LIMIT 1 OFFSET ?').pluck().get(runId, after, limit - 1) as number | undefined;
  const upto = nth ?? Math.max(after, (db.prepare('SELECT MAX(seq) FROM jobs WHERE run_id = ?').pluck().get(runId) as number | null) ?? after);
  const rows = db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq`).raw(true).all(runId, after, upto) as SummaryTuple[];
  return { rows: rows.map(summaryRow), upto, end: nth === undefined };
}

/** Up to `limit` of the run's jobs in these states, in manifest order (the view's list of problems). */
export function summaryRowsIn(db: Database.Database, runId: number, states: readonly string[], limit: number): SummaryRow[] {
  if (states.length === 0 || limit <= 0) return [];
  const rows = db.prepare(`SELECT ${SUMMARY_COLUMNS} FROM jobs WHERE run_id = ? AND state IN (${states.map(() => '?').join(', ')}) ORDER BY seq LIMIT ?`).raw(true).all(runId, ...states, limit) as SummaryTuple[];
  return rows.map(summaryRow);
}
