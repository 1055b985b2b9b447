import { lstatSync, mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { EXIT, GenbatchError, StateError, TransitionError } from '../errors.js';
import { nowIso } from './clock.js';
import { StoreConn } from './conn.js';
import { GraphLinks } from './graph.js';
import { Lease, writerActive, type LeaseOptions } from './lease.js';
import { removedMetaKey, StoreQueries } from './queries.js';
import * as resume from './resume.js';
import { ensureJobIndexes, openDatabase } from './schema.js';
import { removedJobs, syncJob, type SyncHost } from './sync.js';
import { TRANSITIONS, type JobState } from './states.js';
import { impliedPatch, PATCH_COLUMNS, type JobInput, type JobPatch, type SyncResult } from './types.js';

export type { FileRow, InvocationRow, JobInput, JobPatch, JobRow, RunRow, SummaryRow, SyncResult, TakenJob } from './types.js';
export { nowIso } from './clock.js';

/**
 * The state file: runs, jobs, files, uploads and the writer lease.
 * A job's state changes only through transition(). The API key is never stored.
 * The plain SQL reads and writes are in reads.ts, files.ts, runs.ts and sync.ts
 * (runs, reads, file rows, uploads, meta and noteError: StoreQueries in queries.ts,
 * which Store holds and passes those calls to; resuming a run's in-flight jobs:
 * resume.ts). What both share (the database, its statements and transactions,
 * the run in use) is a StoreConn (conn.ts).
 */

/** PATCH_COLUMNS[i] -> bit i (guardedMove). */
const PATCH_BIT = new Map<string, number>(PATCH_COLUMNS.map((c, i) => [c, 1 << i]));
const EXPECTED_BIT = PATCH_BIT.get('expected_credits')!;
/** guardedMove's bits past the patch columns: `attempts = attempts + ?`; the submit intent's sender and expected price. */
const ATTEMPTS_BIT = 1 << PATCH_COLUMNS.length;
const SENT_BY_BIT = 1 << (PATCH_COLUMNS.length + 1);

type Q = StoreQueries;

export class Store {
  readonly db: Database.Database;
  readonly path: string;
  private readonly c: StoreConn;
  private readonly q: StoreQueries;
  private lease: Lease | null = null;
  /** The guarded UPDATE of guardedMove, by the set of columns it sets (bit i: PATCH_COLUMNS[i]; then ATTEMPTS_BIT, SENT_BY_BIT). */
  private readonly moveStmts = new Map<number, Database.Statement>();
  /** During a sync: the ids the manifest named. */
  private seen: Set<string> | null = null;
  private syncMoves: Array<{ id: string; from: JobState; to: JobState; error: string | null }> = [];
  private replacedResults: string[] = [];
  /** In-flight and uncertain jobs this run's sync found no longer in the manifest (they keep their state); null: no sync this run. */
  private removedInFlightIds: Set<string> | null = null;
  private resubmitUncertain = false;
  /** The job graph: links, readiness, skipping descendants, for_each children (src/store/graph.ts). */
  readonly graph: GraphLinks;
  /** Context for a manifest sync of one job (src/store/sync.ts). */
  private readonly syncHost: SyncHost;

  private constructor(db: Database.Database, path: string) {
    this.db = db;
    this.path = path;
    const c = (this.c = new StoreConn(db, path));
    this.q = new StoreQueries(c);
    this.graph = new GraphLinks({
      db,
      runId: () => c.runId,
      generation: () => c.generation,
      nextSeq: () => ++c.seq,
      stmt: (sql) => c.stmt(sql),
      move: (id, from, to, patch) => this.guardedMove(id, from, to, patch),
      replaced: (id) => this.replacedResults.push(id),
      synced: (id, from, to, error) => this.syncMoves.push({ id, from, to, error }),
      resubmitUncertain: () => this.resubmitUncertain,
    });
    this.syncHost = {
      stmt: c.cached,
      runId: () => c.runId,
      generation: () => c.generation,
      nextSeq: () => ++c.seq,
      move: (id, from, to, patch) => this.syncMove(id, from, to, patch),
      rerunDescendants: (id) => this.graph.rerunDescendants(id),
      childrenInFlight: (id) => this.graph.childrenInFlight(id),
      resubmitUncertain: () => this.resubmitUncertain,
    };
  }

  /** Open (creating when needed) a state file for writing and take its lease. */
  static openForWrite(path: string, lease: LeaseOptions = {}): Store {
    const abs = resolve(path);
    mkdirSync(dirname(abs), { recursive: true });
    refuseLinkedState(abs);
    const store = new Store(openDatabase(abs), abs);
    store.lease = new Lease(store.db, lease);
    try {
      store.lease.acquire();
    } catch (err) {
      store.db.close();
      throw err;
    }
    try {
      // Only the lease holder changes the schema (a process refused by the lease leaves the file as it is).
      ensureJobIndexes(store.db);
    } catch (err) {
      store.close();
      throw new StateError(`state file ${abs} is not usable: ${err instanceof Error ? err.message : String(err)}`);
    }
    return store;
  }

  /**
   * Before a reader writes (marks: `genbatch mark`, the view): throws (exit 74) when the state's path is a symbolic
   * link, which run and prune refuse too. A reader may read through one.
   */
  refuseLinkedPath(): void {
    refuseLinkedState(this.path);
  }

  /** Open an existing state file to read (status, report). Takes no lease. */
  static openForRead(path: string): Store {
    return new Store(openDatabase(resolve(path), { mustExist: true }), resolve(path));
  }

  get leaseTakenOverFrom(): string | null {
    return this.lease?.takenOverFrom ?? null;
  }

  /** True when a run holds this state file's lease now (a reader's question: the view, status). */
  writerActive(): boolean {
    return writerActive(this.db);
  }

  get leaseLost(): boolean {
    return this.lease?.lost ?? false;
  }

  close(): void {
    if (!this.db.open) return;
    this.lease?.release();
    this.db.close();
    this.c.closeWal();
  }

  /**
   * Run fn in one transaction (synchronous=NORMAL: written to the WAL, not yet
   * synced). Pair with syncWal() to make it durable without blocking the event loop.
   */
  commitNormal<T>(fn: () => T): T {
    return this.c.tx(fn, true);
  }

  /** True when the state file is in WAL mode (then commitNormal + syncWal can replace durable). */
  get walMode(): boolean {
    return this.c.walMode;
  }

  /**
   * fsync the WAL on the thread pool: every commit made so far becomes as
   * durable as under synchronous=FULL. Only in WAL mode (see walMode).
   */
  syncWal(): Promise<void> {
    return this.c.syncWal();
  }

  /**
   * Run fn in one transaction committed with synchronous=FULL (fsynced before
   * returning). Used for the submit intent and the task id.
   */
  durable<T>(fn: () => T): T {
    return this.c.durable(fn);
  }

  // ---- sync from the manifest ----

  /**
   * Start the transaction that holds a whole manifest sync (committed only when every job is valid).
   * `resubmitUncertain` (--uncertain=resubmit): an uncertain job whose spec changed goes back to pending with the new spec.
   */
  beginSync(o: { resubmitUncertain?: boolean } = {}): void {
    this.resubmitUncertain = o.resubmitUncertain === true;
    this.db.exec('BEGIN IMMEDIATE');
    // The ids the manifest names (to find removed jobs afterwards); the store is read one job at a time.
    this.seen = new Set();
  }
  commitSync(): void {
    this.db.exec('COMMIT');
  }
  rollbackSync(): void {
    if (this.db.inTransaction) this.db.exec('ROLLBACK');
    this.seen = null;
    this.syncMoves = [];
    this.replacedResults = [];
  }

  /**
   * Record one manifest job. New: pending. Same spec: untouched. Changed spec:
   * a finished job goes back to pending with the new spec; a pending one takes
   * the new spec; one in flight keeps running the spec it was sent with.
   */
  syncJob(job: JobInput): SyncResult {
    this.seen?.add(job.id);
    return syncJob(this.syncHost, job);
  }

  /** A manifest job the sync leaves as it is without recording it (kept by --keep-changed): still in the manifest. */
  keepJob(id: string): void {
    this.seen?.add(id);
  }

  /**
   * Jobs no longer in the manifest: pending, failed and expired ones become
   * skipped (not run, not counted against the exit code). Done ones stay done;
   * in-flight and uncertain ones keep their state (a task may exist and cost
   * credits, so they are never forgotten silently). Returns how many.
   */
  skipRemoved(): number {
    const seen = this.seen;
    if (!seen) return 0;
    const children = this.graph.childrenOf(seen);
    const gone = removedJobs(this.c.cachedRaw, this.c.runId, seen, children);
    this.db.transaction(() => {
      for (const r of gone) this.syncMove(r.id, r.state, 'skipped', {});
    })();
    // The states a removed job keeps (a task may exist): submitting ones become uncertain right after the sync.
    const kept = this.c.cached(`SELECT id FROM jobs WHERE run_id = ? AND state IN ('submitting', 'submitted', 'downloading', 'uncertain')`).all(this.c.runId) as Array<{ id: string }>;
    this.removedInFlightIds = new Set(kept.map((r) => r.id).filter((id) => !seen.has(id) && !children.has(id)));
    // Every job no longer in the manifest, whatever its state: kept in the state, left out by the readers.
    const removed: string[] = [];
    for (const [id] of this.c.cachedRaw('SELECT id FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? ORDER BY seq').iterate(this.c.runId) as IterableIterator<[string]>) if (!seen.has(id) && !children.has(id)) removed.push(id);
    this.q.setMeta(removedMetaKey(this.c.runId), removed.length > 0 ? JSON.stringify(removed) : null);
    this.seen = null;
    return gone.length;
  }

  /**
   * Uncertain jobs that the manifest no longer names, as found by this run's sync (skipRemoved); null when
   * this run did not sync (its manifest matched the last sync: see src/engine/sync-key.ts).
   */
  removedInFlight(): ReadonlySet<string> | null {
    return this.removedInFlightIds;
  }

  /** A state change made by a manifest sync: through transition(), recorded for the engine's events (drainSyncMoves). */
  private syncMove(jobId: string, from: JobState, to: JobState, patch: JobPatch): void {
    this.transition(jobId, from, to, patch);
    this.syncMoves.push({ id: jobId, from, to, error: patch.last_error ?? null });
  }

  /** State changes made by syncJob, rerunDescendants and skipRemoved since the last call (the engine emits them as job events). */
  drainSyncMoves(): Array<{ id: string; from: JobState; to: JobState; error: string | null }> {
    const out = this.syncMoves;
    this.syncMoves = [];
    return out;
  }

  /** Jobs sent back to pending since the last call whose earlier result had files on disk (spec changed, made again, new sandbox). */
  drainReplacedResults(): string[] {
    const out = this.replacedResults;
    this.replacedResults = [];
    return out;
  }

  /** After a crash between intent and response: every `submitting` job becomes `uncertain` (a chat job: `pending`). Returns the uncertain ones. */
  recoverSubmitting(): string[] {
    if (this.q.noneIn('submitting')) return [];
    return resume.recoverSubmitting(this.c.cached, this.c.runId, (id, from, to, patch, also) => this.transition(id, from, to, patch, also));
  }

  /**
   * The service that held this run's tasks is gone (an earlier in-process
   * sandbox): submitted, downloading and uncertain jobs go back to pending,
   * their task ids, results and file rows cleared. Returns the jobs moved.
   */
  returnInFlight(reason: string): Array<{ id: string; from: JobState }> {
    return resume.returnInFlight(this.db, this.c.cached, this.c.runId, reason, (id, from, to, patch, also) => this.transition(id, from, to, patch, also));
  }

  /**
   * The earlier in-process sandbox is gone with the results job-graph references point at: the finished jobs that
   * pending jobs take results from (and their ancestors) are made again, with what was made from them. Returns the
   * jobs moved to pending here (the descendants' moves: drainSyncMoves).
   */
  remakeAncestors(reason: string): string[] {
    return this.db.transaction(() =>
      resume.remakeAncestors(this.c.cached, this.c.runId, reason, (id, from, to, patch, also) => this.transition(id, from, to, patch, also), (id) => this.graph.rerunDescendants(id)),
    )();
  }

  /**
   * `run --redo`: a failed or expired job (or a done one marked rejected) goes back to pending to be sent again with the spec it has. Its task
   * id, result and file rows are cleared (the engine moves its files on disk aside: previous.ts); `attempts`
   * keeps counting. Jobs skipped because of it come back to pending too (graph.drainRevived), unless another
   * parent of theirs still ended without results (then they are skipped again, naming it: graph.drainSkipped).
   */
  redo(jobId: string, from: 'failed' | 'expired' | 'done', note: string, spec?: string): void {
    const clear: JobPatch = { task_id: null, submitted_input: null, submitted_at: null, finished_at: null, expires_at: null, result: null, last_error: note };
    // --redo rejected: the spec may carry the new seed chosen for the submit (src/engine/select.ts).
    if (spec !== undefined) clear.spec = spec;
    this.transition(jobId, from, 'pending', clear, () => {
      this.c.stmt('DELETE FROM files WHERE run_id = ? AND job_id = ?').run(this.c.runId, jobId);
      // A done job (--redo rejected): what was made from its result is made again, as for a changed spec.
      if (from === 'done') this.graph.rerunDescendants(jobId);
      else this.graph.revive(jobId, from);
    });
  }

  // ---- transitions ----

  /**
   * Move a job from `from` to `to`, setting `patch`, in one transaction guarded
   * by `WHERE state = from`. `also` runs inside the same transaction, and so
   * does the job graph's part: a job that ends without results (failed,
   * expired, uncertain, skipped, exists) makes its pending descendants skipped.
   * Throws TransitionError when the change is not allowed or the job was not in `from`.
   */
  transition(jobId: string, from: JobState, to: JobState, patch: JobPatch = {}, also?: () => void): void {
    const run = () => {
      // The submit intent: the job records the invocation that sends it and its expected price then (the
      // pipeline's: a class price observed in this run; else the estimate), in the same UPDATE as the move.
      const sentBy = from === 'pending' && to === 'submitting' ? this.c.sendingInvocation : null;
      // A patch that sets estimated_credits too: stamped after the move, so COALESCE reads the new estimate.
      const apart = sentBy !== null && 'estimated_credits' in patch;
      this.guardedMove(jobId, from, to, patch, apart ? null : sentBy);
      if (apart) this.c.stmt('UPDATE jobs SET sent_by = ?, expected_credits = COALESCE(?, estimated_credits) WHERE run_id = ? AND id = ?').run(sentBy, patch.expected_credits ?? null, this.c.runId, jobId);
      if (typeof patch.last_error === 'string') this.q.recordError(jobId, patch.last_error);
      also?.();
      if (to === 'done') this.clearMarkOnResult(jobId);
      this.graph.afterMove(jobId, to, patch.last_error, from);
    };
    if (this.db.inTransaction) run();
    else this.c.tx(run, false);
  }

  /** A new result arrived: the job's current mark judged the one it replaced, so it is cleared (kept in its history). */
  private clearMarkOnResult(jobId: string): void {
    const mark = this.q.markOf(jobId);
    if (mark) this.q.addMark(jobId, null, `cleared: a new result replaced the one marked ${mark.state}`);
  }

  /** The guarded UPDATE of one job's state (no graph effects); the caller holds the transaction. */
  private guardedMove(jobId: string, from: JobState, to: JobState, given: JobPatch, sentBy: number | null = null): void {
    if (!TRANSITIONS[from].includes(to)) throw new TransitionError(`job ${jobId}: ${from} -> ${to} is not an allowed state change`);
    const patch = impliedPatch(to, given, nowIso);
    // The columns the patch names (`in`, so an explicit undefined sets NULL), in PATCH_COLUMNS order.
    let mask = 0;
    for (const key in patch) mask |= PATCH_BIT.get(key) ?? 0;
    // Stamping the sender sets expected_credits itself (COALESCE with the estimate), so not as a plain column too.
    if (sentBy !== null) mask &= ~EXPECTED_BIT;
    const values: unknown[] = [to, nowIso()];
    for (let i = 0; i < PATCH_COLUMNS.length; i++) if (mask & (1 << i)) values.push(patch[PATCH_COLUMNS[i]!] ?? null);
    if (patch.attemptsInc) {
      mask |= ATTEMPTS_BIT;
      values.push(patch.attemptsInc);
    }
    if (sentBy !== null) {
      mask |= SENT_BY_BIT;
      values.push(sentBy, patch.expected_credits ?? null);
    }
    values.push(this.c.runId, jobId, from);
    let update = this.moveStmts.get(mask);
    if (!update) {
      const sets = ['state = ?', 'updated_at = ?'];
      for (let i = 0; i < PATCH_COLUMNS.length; i++) if (mask & (1 << i)) sets.push(`"${PATCH_COLUMNS[i]!}" = ?`);
      if (mask & ATTEMPTS_BIT) sets.push('attempts = attempts + ?');
      if (mask & SENT_BY_BIT) sets.push('sent_by = ?', 'expected_credits = COALESCE(?, estimated_credits)');
      update = this.c.stmt(`UPDATE jobs SET ${sets.join(', ')} WHERE run_id = ? AND id = ? AND state = ?`);
      this.moveStmts.set(mask, update);
    }
    // A job sent again whose earlier result has files on disk: the engine moves them aside (src/engine/previous.ts).
    const hadFiles = to === 'pending' && from !== 'submitting' && this.c.stmt(`SELECT 1 FROM files WHERE run_id = ? AND job_id = ? AND state = 'done' LIMIT 1`).get(this.c.runId, jobId) !== undefined;
    const res = update.run(...values);
    if (res.changes !== 1) {
      const cur = this.c.stmt('SELECT state FROM jobs WHERE run_id = ? AND id = ?').get(this.c.runId, jobId) as { state: string } | undefined;
      throw new TransitionError(`job ${jobId}: expected state ${from} for ${from} -> ${to}, found ${cur ? cur.state : 'no such job'}`);
    }
    if (hadFiles) this.replacedResults.push(jobId);
  }

  // ---- rows read and written without a state change: passed to StoreQueries (queries.ts), where each is described ----

  // runs and their invocations
  openRun(...a: Parameters<Q['openRun']>): ReturnType<Q['openRun']> { return this.q.openRun(...a); }
  runs(...a: Parameters<Q['runs']>): ReturnType<Q['runs']> { return this.q.runs(...a); }
  findRun(...a: Parameters<Q['findRun']>): ReturnType<Q['findRun']> { return this.q.findRun(...a); }
  seeOutputAt(...a: Parameters<Q['seeOutputAt']>): ReturnType<Q['seeOutputAt']> { return this.q.seeOutputAt(...a); }
  useRun(...a: Parameters<Q['useRun']>): ReturnType<Q['useRun']> { return this.q.useRun(...a); }
  run(...a: Parameters<Q['run']>): ReturnType<Q['run']> { return this.q.run(...a); }
  setRunFields(...a: Parameters<Q['setRunFields']>): ReturnType<Q['setRunFields']> { return this.q.setRunFields(...a); }
  startInvocation(...a: Parameters<Q['startInvocation']>): ReturnType<Q['startInvocation']> { return this.q.startInvocation(...a); }
  finishInvocation(...a: Parameters<Q['finishInvocation']>): ReturnType<Q['finishInvocation']> { return this.q.finishInvocation(...a); }
  invocations(...a: Parameters<Q['invocations']>): ReturnType<Q['invocations']> { return this.q.invocations(...a); }
  jobsByInvocation(...a: Parameters<Q['jobsByInvocation']>): ReturnType<Q['jobsByInvocation']> { return this.q.jobsByInvocation(...a); }

  // earlier generations of result files, errors, review marks
  keepPrevious(...a: Parameters<Q['keepPrevious']>): ReturnType<Q['keepPrevious']> { return this.q.keepPrevious(...a); }
  previousFiles(...a: Parameters<Q['previousFiles']>): ReturnType<Q['previousFiles']> { return this.q.previousFiles(...a); }
  dropPrevious(...a: Parameters<Q['dropPrevious']>): ReturnType<Q['dropPrevious']> { return this.q.dropPrevious(...a); }
  dropFile(...a: Parameters<Q['dropFile']>): ReturnType<Q['dropFile']> { return this.q.dropFile(...a); }
  noteError(...a: Parameters<Q['noteError']>): ReturnType<Q['noteError']> { return this.q.noteError(...a); }
  jobErrors(...a: Parameters<Q['jobErrors']>): ReturnType<Q['jobErrors']> { return this.q.jobErrors(...a); }
  addMark(...a: Parameters<Q['addMark']>): ReturnType<Q['addMark']> { return this.q.addMark(...a); }
  markOf(...a: Parameters<Q['markOf']>): ReturnType<Q['markOf']> { return this.q.markOf(...a); }
  marks(...a: Parameters<Q['marks']>): ReturnType<Q['marks']> { return this.q.marks(...a); }
  markHistory(...a: Parameters<Q['markHistory']>): ReturnType<Q['markHistory']> { return this.q.markHistory(...a); }

  // job reads
  resultOf(...a: Parameters<Q['resultOf']>): ReturnType<Q['resultOf']> { return this.q.resultOf(...a); }
  getJob(...a: Parameters<Q['getJob']>): ReturnType<Q['getJob']> { return this.q.getJob(...a); }
  jobOfTask(...a: Parameters<Q['jobOfTask']>): ReturnType<Q['jobOfTask']> { return this.q.jobOfTask(...a); }
  nextPending(...a: Parameters<Q['nextPending']>): ReturnType<Q['nextPending']> { return this.q.nextPending(...a); }
  takenJobs(...a: Parameters<Q['takenJobs']>): ReturnType<Q['takenJobs']> { return this.q.takenJobs(...a); }
  jobsIn(...a: Parameters<Q['jobsIn']>): ReturnType<Q['jobsIn']> { return this.q.jobsIn(...a); }
  stateAndHash(...a: Parameters<Q['stateAndHash']>): ReturnType<Q['stateAndHash']> { return this.q.stateAndHash(...a); }
  permanentFailedIds(...a: Parameters<Q['permanentFailedIds']>): ReturnType<Q['permanentFailedIds']> { return this.q.permanentFailedIds(...a); }
  pendingCredits(...a: Parameters<Q['pendingCredits']>): ReturnType<Q['pendingCredits']> { return this.q.pendingCredits(...a); }
  jobIds(...a: Parameters<Q['jobIds']>): ReturnType<Q['jobIds']> { return this.q.jobIds(...a); }
  allJobs(...a: Parameters<Q['allJobs']>): ReturnType<Q['allJobs']> { return this.q.allJobs(...a); }

  // what the readers see (jobs no longer in the manifest left out), counts
  leaveOutRemoved(...a: Parameters<Q['leaveOutRemoved']>): ReturnType<Q['leaveOutRemoved']> { return this.q.leaveOutRemoved(...a); }
  removedIds(...a: Parameters<Q['removedIds']>): ReturnType<Q['removedIds']> { return this.q.removedIds(...a); }
  leftOutIds(...a: Parameters<Q['leftOutIds']>): ReturnType<Q['leftOutIds']> { return this.q.leftOutIds(...a); }
  summaryRows(...a: Parameters<Q['summaryRows']>): ReturnType<Q['summaryRows']> { return this.q.summaryRows(...a); }
  summaryRowsChangedSince(...a: Parameters<Q['summaryRowsChangedSince']>): ReturnType<Q['summaryRowsChangedSince']> { return this.q.summaryRowsChangedSince(...a); }
  summaryRowsAfter(...a: Parameters<Q['summaryRowsAfter']>): ReturnType<Q['summaryRowsAfter']> { return this.q.summaryRowsAfter(...a); }
  summaryRowsIn(...a: Parameters<Q['summaryRowsIn']>): ReturnType<Q['summaryRowsIn']> { return this.q.summaryRowsIn(...a); }
  lastChange(...a: Parameters<Q['lastChange']>): ReturnType<Q['lastChange']> { return this.q.lastChange(...a); }
  counts(...a: Parameters<Q['counts']>): ReturnType<Q['counts']> { return this.q.counts(...a); }
  filesDone(...a: Parameters<Q['filesDone']>): ReturnType<Q['filesDone']> { return this.q.filesDone(...a); }
  fileTotals(...a: Parameters<Q['fileTotals']>): ReturnType<Q['fileTotals']> { return this.q.fileTotals(...a); }
  estimate(...a: Parameters<Q['estimate']>): ReturnType<Q['estimate']> { return this.q.estimate(...a); }
  chatTotals(...a: Parameters<Q['chatTotals']>): ReturnType<Q['chatTotals']> { return this.q.chatTotals(...a); }
  pendingWithOwnCallback(...a: Parameters<Q['pendingWithOwnCallback']>): ReturnType<Q['pendingWithOwnCallback']> { return this.q.pendingWithOwnCallback(...a); }
  pendingEstimate(...a: Parameters<Q['pendingEstimate']>): ReturnType<Q['pendingEstimate']> { return this.q.pendingEstimate(...a); }

  // files, uploads, meta
  addFiles(...a: Parameters<Q['addFiles']>): ReturnType<Q['addFiles']> { return this.q.addFiles(...a); }
  fileDone(...a: Parameters<Q['fileDone']>): ReturnType<Q['fileDone']> { return this.q.fileDone(...a); }
  filesOf(...a: Parameters<Q['filesOf']>): ReturnType<Q['filesOf']> { return this.q.filesOf(...a); }
  findUpload(...a: Parameters<Q['findUpload']>): ReturnType<Q['findUpload']> { return this.q.findUpload(...a); }
  recordUpload(...a: Parameters<Q['recordUpload']>): ReturnType<Q['recordUpload']> { return this.q.recordUpload(...a); }
  getMeta(...a: Parameters<Q['getMeta']>): ReturnType<Q['getMeta']> { return this.q.getMeta(...a); }
  setMeta(...a: Parameters<Q['setMeta']>): ReturnType<Q['setMeta']> { return this.q.setMeta(...a); }
  integrityCheck(...a: Parameters<Q['integrityCheck']>): ReturnType<Q['integrityCheck']> { return this.q.integrityCheck(...a); }

  /** The id of the run in use (openRun/useRun). */
  get currentRunId(): number {
    return this.c.runId;
  }

  /** Throw when the lease was lost (another process took over the file). */
  assertLease(): void {
    if (this.leaseLost) throw new StateError('another process took over the state file; stopping');
  }
}

/**
 * A state file is never written through a link (one put in the output folder would take the state outside it), and
 * SQLite makes the journal beside the link's target, where the WAL's fsync (WalSync) does not look: a job's answer was lost.
 */
function refuseLinkedState(abs: string): void {
  if (lstatSync(abs, { throwIfNoEntry: false })?.isSymbolicLink()) {
    throw new GenbatchError('GB_UNSAFE_PATH', `${abs} is a symbolic link; genbatch writes its state only into a real file (remove the link, or name the file itself with --state)`, EXIT.io);
  }
}
