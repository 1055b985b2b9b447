import { resolve } from 'node:path';
import { nowIso } from './clock.js';
import type { StoreConn } from './conn.js';
import * as files from './files.js';
import * as invocationTable from './invocations.js';
import * as previousTable from './previous.js';
import * as errorsLog from './errors-log.js';
import * as marks from './marks.js';
import * as reads from './reads.js';
import * as runTable from './runs.js';
import type { JobState } from './states.js';
import type { FileRow, InvocationRow, JobRow, RunRow, SummaryRow, TakenJob } from './types.js';

/** Meta key of the ids of a run's jobs that its last sync found no longer in the manifest (a JSON array; none: no key). */
export function removedMetaKey(runId: number): string {
  return `removed:${runId}`;
}

/**
 * The part of Store's API that reads and writes rows without changing a job's
 * state: runs, job reads, file rows, uploads, meta values and noteError. Each
 * method calls reads.ts, files.ts or runs.ts with the cached statements and
 * the run in use (a StoreConn, shared with Store). Store (store.ts) holds one
 * and passes these calls on; it keeps the transactions and transition().
 */
export class StoreQueries {
  constructor(private readonly c: StoreConn) {}

  /** Reads of every job of the run (counts, the estimate) kept with the jobs stamp they were read at (see kept). */
  private readonly keptReads = new Map<string, { run: number; writes: number; data: number; value: unknown }>();

  /**
   * `read()`, a read over every job of the run in use, or what it gave last time when no jobs or files row has changed
   * since (StoreConn.rowsStamp: any write of this connection or a commit of another one reads it again).
   * A resume with nothing to do counts the jobs several times over; each count is a scan of the whole table.
   */
  private kept<T>(name: string, read: () => T): T {
    const v = this.c.rowsStamp();
    const k = this.keptReads.get(name);
    if (v !== null && k !== undefined && k.run === this.c.runId && k.writes === v.writes && k.data === v.data) return k.value as T;
    const value = read();
    // Read inside a transaction: it may yet be rolled back, which no trigger counts; not kept.
    if (v === null || this.c.db.inTransaction) this.keptReads.delete(name);
    else this.keptReads.set(name, { run: this.c.runId, writes: v.writes, data: v.data, value });
    return value;
  }

  /** counts() and estimate() of every job of the run, kept (see kept). */
  private totals(): reads.Totals {
    return this.kept('totals', () => reads.countsAndEstimate(this.c.cached, this.c.cachedRaw, this.c.runId));
  }

  /** True when a count of the run's jobs still current says none is in `state` (never reads the jobs itself). */
  noneIn(state: JobState): boolean {
    const v = this.c.rowsStamp();
    const k = this.keptReads.get('totals');
    return v !== null && k !== undefined && k.run === this.c.runId && k.writes === v.writes && k.data === v.data && (k.value as reads.Totals).counts[state] === 0;
  }

  // ---- runs ----

  /** The run of this manifest (absolute path), created when new; starts a new sync generation. */
  openRun(manifest: string, outDir: string, baseUrl: string, sandbox: boolean, userPrices: boolean): RunRow {
    const run = runTable.openRun(this.c.db, this.c.cached, resolve(manifest), outDir, baseUrl, sandbox, userPrices);
    this.useRun(run);

    this.c.seq = runTable.maxSeq(this.c.cached, run.id);
    return run;
  }

  /** Output folders recorded by runs, seen at another path (moved since: seeOutputAt). */
  private readonly movedOut = new Map<string, string>();

  /** Reads of the runs give `to` as the output folder of a run that recorded `from` (a folder moved since the run). */
  seeOutputAt(from: string, to: string): void {
    this.movedOut.set(from, to);
  }

  private seen(run: RunRow): RunRow {
    const to = this.movedOut.get(run.out_dir);
    return to === undefined ? run : { ...run, out_dir: to };
  }

  /** Every run in this state file (status/report without a manifest). */
  runs(): RunRow[] {
    return runTable.runs(this.c.cached).map((r) => this.seen(r));
  }

  /** The run of this manifest, without starting a new generation (status, report). */
  findRun(manifest: string): RunRow | undefined {
    const run = runTable.findRun(this.c.cached, resolve(manifest));
    return run && this.seen(run);
  }

  useRun(run: RunRow): void {
    this.c.runId = run.id;
    this.c.generation = run.generation;
  }

  run(): RunRow {
    return this.seen(runTable.runById(this.c.cached, this.c.runId));
  }

  setRunFields(fields: { finished_at?: string | null }): void {
    runTable.setRunFields(this.c.cached, this.c.runId, fields);
  }

  // ---- invocations (balance readings of each `genbatch run` of the run) ----

  /** Record the start of an invocation of the run in use with its opening balance reading (null: not read); returns its number. */
  startInvocation(balance: number | null, readAt: string | null): number {
    this.c.sendingInvocation = invocationTable.startInvocation(this.c.db, this.c.cached, this.run(), balance, readAt);
    return this.c.sendingInvocation;
  }

  /** Record the end of invocation `n` with its closing balance reading (null: not read) and the submit requests it sent. */
  finishInvocation(n: number, balance: number | null, readAt: string | null, submits: number): void {
    invocationTable.finishInvocation(this.c.db, this.c.cached, this.c.runId, n, balance, readAt, submits);
  }

  /** The invocations of the run in use that read the balance, in order. */
  invocations(): InvocationRow[] {
    return invocationTable.invocations(this.c.db, this.run());
  }

  /** What became of the jobs each invocation of the run in use sent last, by invocation number. */
  jobsByInvocation(): Map<number, invocationTable.InvocationJobs> {
    return invocationTable.jobsByInvocation(this.c.db, this.c.runId);
  }

  // ---- earlier generations of result files (previous.ts) ----

  /** The entries `names` of the job folder went to `target` (previous-<n>/): its retired files are recorded there. */
  keepPrevious(jobId: string, folder: string, target: string, names: readonly string[], also: previousTable.KeptFile | null = null): number {
    return this.c.db.transaction(() => previousTable.keepPrevious(this.c.cached, this.c.runId, jobId, folder, target, names, also))();
  }

  previousFiles(): previousTable.PreviousFile[] {
    return previousTable.previousFiles(this.c.cached, this.c.runId);
  }

  /** The file at `path` (a previous generation of the job) is gone: its record goes too. */
  dropPrevious(jobId: string, path: string): void {
    previousTable.dropPrevious(this.c.cached, this.c.runId, jobId, path);
  }

  /** The job's current result file at `path` was removed (prune --removed): its record goes, without being kept as retired. */
  dropFile(jobId: string, path: string): void {
    this.c.db.transaction(() => {
      this.c.cached('DELETE FROM files WHERE run_id = ? AND job_id = ? AND path = ?').run(this.c.runId, jobId, path);
      this.c.cached('DELETE FROM retired_files WHERE run_id = ? AND job_id = ? AND path = ?').run(this.c.runId, jobId, path);
    })();
  }

  /** Set last_error without changing the state (kept in the job's error history too). */
  noteError(jobId: string, message: string): void {
    this.c.stmt('UPDATE jobs SET last_error = ?, updated_at = ? WHERE run_id = ? AND id = ?').run(message, nowIso(), this.c.runId, jobId);
    this.recordError(jobId, message);
  }

  // ---- each job's errors over its attempts (errors-log.ts) ----

  private errorsTable = false;

  /** One more entry of the job's error history (the table is made in a state file written before it existed). */
  recordError(jobId: string, message: string): void {
    if (!this.errorsTable) {
      if (!errorsLog.hasErrorsTable(this.c.db)) this.c.db.exec(errorsLog.ERRORS_TABLE);
      this.errorsTable = true;
    }
    errorsLog.addJobError(this.c.cached, this.c.runId, jobId, message, nowIso());
  }

  /** The job's errors over its attempts, oldest first (none in a state file written before the history existed). */
  jobErrors(jobId: string): errorsLog.JobError[] {
    if (!this.errorsTable && !errorsLog.hasErrorsTable(this.c.db)) return [];
    return errorsLog.jobErrors(this.c.cached, this.c.runId, jobId);
  }

  // ---- review marks (marks.ts) ----

  /** True when the state file has the marks table (a file written before marks existed, opened to read, has none). */
  private hasMarks(): boolean {
    return (this.marksTable ||= marks.hasMarksTable(this.c.db));
  }
  private marksTable = false;

  /** Record a mark (null: clear it) on a job of the run in use, as one more row of its history. */
  addMark(jobId: string, mark: marks.MarkState | null, note: string | null): void {
    if (!this.marksTable) {
      marks.ensureMarksTable(this.c.db);
      this.marksTable = true;
    }
    marks.addMark(this.c.cached, this.c.runId, jobId, mark, note, nowIso());
  }

  /** The job's current mark, null when none. */
  markOf(jobId: string): marks.Mark | null {
    return this.hasMarks() ? marks.currentMark(this.c.cached, this.c.runId, jobId) : null;
  }

  /** Every job of the run in use with a current mark. */
  marks(): Map<string, marks.Mark> {
    return this.hasMarks() ? marks.currentMarks(this.c.cached, this.c.runId) : new Map();
  }

  /** A job's mark history, oldest first. */
  markHistory(jobId: string): marks.MarkEvent[] {
    return this.hasMarks() ? marks.markHistory(this.c.cached, this.c.runId, jobId) : [];
  }

  // ---- reads ----

  /** The task result JSON last read for a job, or null. */
  resultOf(jobId: string): string | null {
    return reads.resultOf(this.c.cachedRaw, this.c.runId, jobId);
  }

  getJob(jobId: string): JobRow | undefined {
    return reads.getJob(this.c.cachedRaw, this.c.runId, jobId);
  }

  /** A job of this run other than `except` that records task `taskId`, or null (no index: read only on a callback's adoption). */
  jobOfTask(taskId: string, except: string): string | null {
    const row = this.c.db.prepare('SELECT id FROM jobs WHERE run_id = ? AND task_id = ? AND id <> ? LIMIT 1').get(this.c.runId, taskId, except) as { id: string } | undefined;
    return row?.id ?? null;
  }

  /**
   * Up to `limit` ready pending jobs after sequence number `afterSeq`, in
   * manifest order: a job with graph parents is ready when every parent is done.
   */
  nextPending(afterSeq: number, limit: number): JobRow[] {
    return reads.nextPending(this.c.cachedRaw, this.c.runId, afterSeq, limit);
  }

  /** The jobs in `submitted` or `downloading` with what resuming them needs (not spec, input, result), in manifest order. */
  takenJobs(state: 'submitted' | 'downloading'): TakenJob[] {
    if (this.noneIn(state)) return [];
    return reads.takenJobs(this.c.db, this.c.runId, state);
  }

  /** Jobs in one state, in manifest order (iterated lazily). */
  *jobsIn(state: JobState): IterableIterator<JobRow> {
    if (this.noneIn(state)) return;
    yield* reads.jobsIn(this.c.db, this.c.runId, state);
  }

  /** A job's state and spec hash (the sync's guard on re-sends reads these before the sync changes them); undefined: no such job. */
  stateAndHash(id: string): { state: JobState; spec_hash: string } | undefined {
    return this.c.stmt('SELECT state, spec_hash FROM jobs WHERE run_id = ? AND id = ?').get(this.c.runId, id) as { state: JobState; spec_hash: string } | undefined;
  }

  /** Ids of the jobs that failed permanently (the service refused their input), in manifest order. */
  permanentFailedIds(): string[] {
    if (this.noneIn('failed')) return [];
    return this.c.db.prepare(`SELECT id FROM jobs WHERE run_id = ? AND state = 'failed' AND permanent = 1 ORDER BY seq`).pluck().all(this.c.runId) as string[];
  }

  /** Id and estimated credits of every pending job, in manifest order (iterated lazily). */
  *pendingCredits(): IterableIterator<[string, number | null]> {
    yield* reads.pendingCredits(this.c.db, this.c.runId);
  }

  /** The ids of every job of the run, in manifest order (read from an index: none of the job's columns). */
  jobIds(): string[] {
    return reads.jobIds(this.c.db, this.c.runId);
  }

  /** Every job of the run, in manifest order. */
  *allJobs(): IterableIterator<JobRow> {
    yield* reads.allJobs(this.c.db, this.c.runId);
  }

  // ---- jobs no longer in the manifest (readers leave them out) ----

  /** Readers (status, reports, view, export) leave out the jobs the last sync found no longer in the manifest. */
  private leavingOutRemoved = false;

  /**
   * From now on summaryRows(), summaryRowsChangedSince(), counts(), filesDone() and estimate() leave out the
   * jobs no longer in the manifest (as the last sync found them: meta `removed:<run id>`); false: show them.
   * The engine never calls it: what it sends and its exit code count every job.
   */
  leaveOutRemoved(on = true): void {
    this.leavingOutRemoved = on;
  }

  /** The ids of the run's jobs no longer in the manifest (the last sync's), whether or not they are left out. */
  removedIds(): ReadonlySet<string> {
    const raw = runTable.getMeta(this.c.cached, removedMetaKey(this.c.runId));
    if (raw === null) return new Set();
    try {
      const ids = JSON.parse(raw) as unknown;
      return new Set(Array.isArray(ids) ? ids.filter((id): id is string => typeof id === 'string') : []);
    } catch {
      return new Set();
    }
  }

  /** The removed ids left out now (empty when not leaving them out): readers that join rows by job skip them too. */
  leftOutIds(): ReadonlySet<string> {
    return this.leavingOutRemoved ? this.removedIds() : new Set();
  }

  /** Every job of the run, in manifest order, without the large spec and input columns (reports, status). */
  *summaryRows(): IterableIterator<SummaryRow> {
    const out = this.leftOutIds();
    if (out.size === 0) yield* reads.summaryRows(this.c.db, this.c.runId);
    else for (const r of reads.summaryRows(this.c.db, this.c.runId)) if (!out.has(r.id)) yield r;
  }

  /** The jobs changed at or after `since` (an ISO time: row updated or mark added), in manifest order. */
  summaryRowsChangedSince(since: string): SummaryRow[] {
    const out = this.leftOutIds();
    const rows = reads.summaryRowsChangedSince(this.c.db, this.c.runId, since, this.hasMarks());
    return out.size === 0 ? rows : rows.filter((r) => !out.has(r.id));
  }

  /** The jobs after seq `after`, about `limit` of them, in manifest order, the seq they end at, and whether that is the run's end. */
  summaryRowsAfter(after: number, limit: number): { rows: SummaryRow[]; upto: number; end: boolean } {
    const out = this.leftOutIds();
    const r = reads.summaryRowsAfter(this.c.db, this.c.runId, after, limit);
    return out.size === 0 ? r : { ...r, rows: r.rows.filter((x) => !out.has(x.id)) };
  }

  /** Up to `limit` jobs in these states, in manifest order. */
  summaryRowsIn(states: readonly string[], limit: number): SummaryRow[] {
    const out = this.leftOutIds();
    // Left-out jobs are read and dropped: the limit is met by those that remain.
    const rows = reads.summaryRowsIn(this.c.db, this.c.runId, states, limit + out.size);
    return (out.size === 0 ? rows : rows.filter((x) => !out.has(x.id))).slice(0, limit);
  }

  /** The time of the run's latest change (a job's updated_at or a mark), '' when none. */
  lastChange(): string {
    return reads.lastChange(this.c.db, this.c.runId, this.hasMarks());
  }

  counts(): Record<JobState, number> {
    const out = this.leftOutIds();
    // A copy: the kept counts are never changed by the caller (nor below).
    const all = { ...this.totals().counts };
    if (out.size === 0) return all;
    for (const [state, n] of Object.entries(this.removedStates(out, `state, COUNT(*) AS n`, 'GROUP BY state'))) all[state as JobState] -= n;
    return all;
  }

  /** The run's chat jobs and their token sums, over every job of the run (read with counts(): one scan, kept). */
  chatTotals(): reads.ChatTotals {
    return { ...this.totals().chat };
  }

  /** Result files on disk of the run's jobs (progress counts them over the whole run, not one invocation). */
  filesDone(): number {
    const out = this.leftOutIds();
    const all = this.kept('fileTotals', () => reads.fileTotals(this.c.cached, this.c.runId, this.noneIn('skipped'))).count;
    if (out.size === 0) return all;
    const r = this.c.stmt(`SELECT COUNT(*) AS n FROM files WHERE run_id = ? AND state = 'done' AND job_id IN (SELECT value FROM json_each(?))`).get(this.c.runId, JSON.stringify([...out])) as { n: number };
    return all - r.n;
  }

  /** Result files on disk of the run's jobs, and their bytes. */
  fileTotals(): { count: number; bytes: number } {
    return { ...this.kept('fileTotals', () => reads.fileTotals(this.c.cached, this.c.runId, this.noneIn('skipped'))) };
  }

  estimate(): { known: number; unknown: number } {
    const out = this.leftOutIds();
    const all = { ...this.totals().estimate };
    if (out.size === 0) return all;
    const r = this.c.stmt(
      `SELECT COALESCE(SUM(estimated_credits), 0) AS known, SUM(CASE WHEN estimated_credits IS NULL THEN 1 ELSE 0 END) AS unknown FROM jobs WHERE run_id = ? AND state != 'skipped' AND NOT (kind = 'fanout' AND state = 'done') AND id IN (SELECT value FROM json_each(?))`,
    ).get(this.c.runId, JSON.stringify([...out])) as { known: number; unknown: number | null };
    return { known: all.known - r.known, unknown: all.unknown - (r.unknown ?? 0) };
  }

  /** The removed jobs' states and how many of each (counts() takes them off). */
  private removedStates(out: ReadonlySet<string>, columns: string, tail: string): Record<string, number> {
    const rows = this.c.stmt(`SELECT ${columns} FROM jobs WHERE run_id = ? AND id IN (SELECT value FROM json_each(?)) ${tail}`).all(this.c.runId, JSON.stringify([...out])) as { state: string; n: number }[];
    return Object.fromEntries(rows.map((r) => [r.state, r.n]));
  }

  /** Pending jobs whose manifest entry names its own callback_url. */
  pendingWithOwnCallback(): number {
    if (this.noneIn('pending')) return 0;
    return reads.pendingWithOwnCallback(this.c.cached, this.c.runId);
  }

  /** Estimate of the work this run will submit (pending jobs only). */
  pendingEstimate(): { known: number; unknown: number } {
    if (this.noneIn('pending')) return { known: 0, unknown: 0 };
    return reads.pendingEstimate(this.c.cached, this.c.runId);
  }

  // ---- files ----

  addFiles(jobId: string, rows: Omit<FileRow, 'job_id' | 'path' | 'size' | 'sha256' | 'state'>[]): void {
    files.addFiles(this.c.cached, this.c.runId, jobId, rows);
  }

  fileDone(jobId: string, idx: number, got: { path: string; size: number; sha256: string; content_type: string | null }): void {
    files.fileDone(this.c.cached, this.c.runId, jobId, idx, got);
  }

  filesOf(jobId: string): FileRow[] {
    return files.filesOf(this.c.cachedRaw, this.c.runId, jobId);
  }

  // ---- uploads (shared by every run in this file) ----

  /** A previous upload of this content to this service (base URL) still younger than maxAgeMs. */
  findUpload(baseUrl: string, sha256: string, maxAgeMs: number): string | null {
    return files.findUpload(this.c.cached, baseUrl, sha256, maxAgeMs);
  }

  recordUpload(baseUrl: string, sha256: string, fileUrl: string): void {
    files.recordUpload(this.c.cached, baseUrl, sha256, fileUrl);
  }

  // ---- small named values (meta table) ----

  /** A value stored under `key` (e.g. what the last manifest sync depended on), or null. */
  getMeta(key: string): string | null {
    return runTable.getMeta(this.c.cached, key);
  }

  /** Store `value` under `key`; null removes it. */
  setMeta(key: string, value: string | null): void {
    runTable.setMeta(this.c.cached, key, value);
  }

  integrityCheck(): string {
    return String(this.c.db.pragma('integrity_check', { simple: true }));
  }
}
