import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { StateError, TransitionError } from '../errors.js';
import { GraphLinks } from './graph.js';
import { Lease, type LeaseOptions } from './lease.js';
import { openDatabase } from './schema.js';
import { WalSync } from './wal-sync.js';
import { FINAL_STATES, JOB_STATES, TRANSITIONS, type JobState } from './states.js';
import { PATCH_COLUMNS, type FileRow, type JobInput, type JobPatch, type JobRow, type KnownJob, type RunRow, type SummaryRow, type SyncResult } from './types.js';

export type { FileRow, JobInput, JobPatch, JobRow, RunRow, SummaryRow, SyncResult } from './types.js';

/**
 * The state file: runs, jobs, files, uploads and the writer lease.
 * A job's state changes only through transition(). The API key is never stored.
 */

export const nowIso = (): string => new Date().toISOString();

export class Store {
  readonly db: Database.Database;
  readonly path: string;
  private lease: Lease | null = null;
  private runId = 0;
  private generation = 0;
  private seq = 0;
  private wal: WalSync | null | undefined;
  private readonly stmts = new Map<string, Database.Statement>();
  /** During a sync: the ids the manifest named. */
  private seen: Set<string> | null = null;
  private syncMoves: Array<{ id: string; from: JobState; to: JobState; error: string | null }> = [];
  private replacedResults: string[] = [];
  /** The job graph: links, readiness, skipping descendants, for_each children (src/store/graph.ts). */
  readonly graph: GraphLinks;

  private constructor(db: Database.Database, path: string) {
    this.db = db;
    this.path = path;
    this.graph = new GraphLinks({
      db,
      runId: () => this.runId,
      generation: () => this.generation,
      nextSeq: () => ++this.seq,
      stmt: (sql) => this.stmt(sql),
      move: (id, from, to, patch) => this.guardedMove(id, from, to, patch),
    });
  }

  /** Open (creating when needed) a state file for writing and take its lease. */
  static openForWrite(path: string, lease: LeaseOptions = {}): Store {
    const abs = resolve(path);
    mkdirSync(dirname(abs), { recursive: true });
    const store = new Store(openDatabase(abs), abs);
    store.lease = new Lease(store.db, lease);
    try {
      store.lease.acquire();
    } catch (err) {
      store.db.close();
      throw err;
    }
    return store;
  }

  /** Open an existing state file to read (status, report). Takes no lease. */
  static openForRead(path: string): Store {
    return new Store(openDatabase(resolve(path), { mustExist: true }), resolve(path));
  }

  get leaseTakenOverFrom(): string | null {
    return this.lease?.takenOverFrom ?? null;
  }

  get leaseLost(): boolean {
    return this.lease?.lost ?? false;
  }

  close(): void {
    if (!this.db.open) return;
    this.lease?.release();
    this.db.close();
    this.wal?.close();
  }

  private stmt(sql: string): Database.Statement {
    let s = this.stmts.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.stmts.set(sql, s);
    }
    return s;
  }

  /**
   * Run fn in one transaction (synchronous=NORMAL: written to the WAL, not yet
   * synced). Pair with syncWal() to make it durable without blocking the event loop.
   */
  commitNormal<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  /** True when the state file is in WAL mode (then commitNormal + syncWal can replace durable). */
  get walMode(): boolean {
    if (this.wal === undefined) {
      const mode = String(this.db.pragma('journal_mode', { simple: true })).toLowerCase();
      this.wal = mode === 'wal' ? new WalSync(this.path + '-wal') : null;
    }
    return this.wal !== null;
  }

  /**
   * fsync the WAL on the thread pool: every commit made so far becomes as
   * durable as under synchronous=FULL. Only in WAL mode (see walMode).
   */
  async syncWal(): Promise<void> {
    if (!this.walMode || !this.wal) throw new StateError('syncWal: the state file is not in WAL mode');
    await this.wal.sync();
  }

  /**
   * Run fn in one transaction committed with synchronous=FULL (fsynced before
   * returning). Used for the submit intent and the task id.
   */
  durable<T>(fn: () => T): T {
    this.db.pragma('synchronous = FULL');
    try {
      return this.db.transaction(fn).immediate();
    } finally {
      this.db.pragma('synchronous = NORMAL');
    }
  }

  // ---- runs ----

  /** The run of this manifest (absolute path), created when new; starts a new sync generation. */
  openRun(manifest: string, outDir: string, baseUrl: string, sandbox: boolean, userPrices: boolean): RunRow {
    const abs = resolve(manifest);
    this.db.transaction(() => {
      this.stmt('INSERT INTO runs (manifest, out_dir) VALUES (?, ?) ON CONFLICT(manifest) DO NOTHING').run(abs, outDir);
      this.stmt('UPDATE runs SET out_dir = ?, base_url = ?, sandbox = ?, user_prices = ?, generation = generation + 1, started_at = ?, finished_at = NULL WHERE manifest = ?').run(
        outDir,
        baseUrl,
        sandbox ? 1 : 0,
        userPrices ? 1 : 0,
        nowIso(),
        abs,
      );
    })();
    const run = this.stmt('SELECT * FROM runs WHERE manifest = ?').get(abs) as RunRow;
    this.useRun(run);

    const max = this.stmt('SELECT MAX(seq) AS m FROM jobs WHERE run_id = ?').get(run.id) as { m: number | null };
    this.seq = max.m ?? 0;
    return run;
  }

  /** Every run in this state file (status/report without a manifest). */
  runs(): RunRow[] {
    return this.stmt('SELECT * FROM runs ORDER BY id').all() as RunRow[];
  }

  /** The run of this manifest, without starting a new generation (status, report). */
  findRun(manifest: string): RunRow | undefined {
    return this.stmt('SELECT * FROM runs WHERE manifest = ?').get(resolve(manifest)) as RunRow | undefined;
  }

  useRun(run: RunRow): void {
    this.runId = run.id;
    this.generation = run.generation;
  }

  run(): RunRow {
    return this.stmt('SELECT * FROM runs WHERE id = ?').get(this.runId) as RunRow;
  }

  setRunFields(fields: { balance_before?: number | null; balance_after?: number | null; finished_at?: string | null }): void {
    for (const [k, v] of Object.entries(fields)) {
      if (!['balance_before', 'balance_after', 'finished_at'].includes(k)) continue;
      this.stmt(`UPDATE runs SET ${k} = ? WHERE id = ?`).run(v ?? null, this.runId);
    }
  }

  // ---- sync from the manifest ----

  /** Start the transaction that holds a whole manifest sync (committed only when every job is valid). */
  beginSync(): void {
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
    const row = this.stmt('SELECT state, spec_hash, "where" AS w, estimated_credits AS c FROM jobs WHERE run_id = ? AND id = ?').get(this.runId, job.id) as KnownJob | undefined;
    if (row && row.spec_hash === job.specHash && row.state !== 'skipped' && row.w === job.where && row.c === job.estimatedCredits) return 'unchanged';
    const now = nowIso();
    if (!row) {
      this.stmt(
        'INSERT INTO jobs (run_id, id, seq, model, kind, "where", spec_hash, spec, state, created_at, updated_at, estimated_credits, generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      ).run(this.runId, job.id, ++this.seq, job.model, job.kind, job.where, job.specHash, job.spec, 'pending', now, now, job.estimatedCredits, this.generation);
      return 'new';
    }
    if (row.spec_hash === job.specHash) {
      if (row.state === 'skipped') {
        this.syncMove(job.id, 'skipped', 'pending', { where: job.where, estimated_credits: job.estimatedCredits, generation: this.generation });
        return 'changed';
      }
      if (row.w !== job.where || row.c !== job.estimatedCredits) {
        this.stmt('UPDATE jobs SET "where" = ?, estimated_credits = ? WHERE run_id = ? AND id = ?').run(job.where, job.estimatedCredits, this.runId, job.id);
      }
      return 'unchanged';
    }
    const finished = FINAL_STATES.includes(row.state);
    if (finished || row.state === 'pending') {
      const patch: JobPatch = {
        spec_hash: job.specHash,
        spec: job.spec,
        model: job.model,
        kind: job.kind,
        where: job.where,
        estimated_credits: job.estimatedCredits,
        generation: this.generation,
        task_id: null,
        submitted_input: null,
        submitted_at: null,
        finished_at: null,
        expires_at: null,
        result: null,
        last_error: null,
      };
      if (finished) {
        this.syncMove(job.id, row.state, 'pending', patch);
      } else {
        // Still pending: it takes the new spec (no state change), guarded by the state it is in.
        const sets = PATCH_COLUMNS.filter((c) => c in patch).map((c) => `"${c}" = ?`);
        const res = this.stmt(`UPDATE jobs SET ${sets.join(', ')}, updated_at = ? WHERE run_id = ? AND id = ? AND state = 'pending'`).run(
          ...PATCH_COLUMNS.filter((c) => c in patch).map((c) => patch[c] ?? null),
          now,
          this.runId,
          job.id,
        );
        if (res.changes !== 1) throw new TransitionError(`job ${job.id}: expected state pending for a spec update`);
      }
      this.stmt('DELETE FROM files WHERE run_id = ? AND job_id = ?').run(this.runId, job.id);
      // Job graph: what was made from its old results is made again.
      if (finished) this.graph.rerunDescendants(job.id);
      return finished ? 'changed' : 'updated';
    }
    // In flight (submitting, submitted, downloading, uncertain): it finishes the spec it was sent with.
    return 'unchanged';
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
    // Every state that may become skipped (TRANSITIONS), except done: a removed job's results stay.
    const from = JOB_STATES.filter((st) => st !== 'done' && TRANSITIONS[st].includes('skipped'));
    const gone = (
      this.stmt(`SELECT id, state FROM jobs WHERE run_id = ? AND state IN (${from.map(() => '?').join(', ')})`).all(this.runId, ...from) as { id: string; state: JobState }[]
    ).filter((r) => !seen.has(r.id) && !children.has(r.id));
    this.db.transaction(() => {
      for (const r of gone) this.syncMove(r.id, r.state, 'skipped', {});
    })();
    this.seen = null;
    return gone.length;
  }

  /** A state change made by a manifest sync: through transition(), recorded for the engine's events (drainSyncMoves). */
  private syncMove(jobId: string, from: JobState, to: JobState, patch: JobPatch): void {
    this.transition(jobId, from, to, patch);
    this.syncMoves.push({ id: jobId, from, to, error: patch.last_error ?? null });
  }

  /** State changes made by syncJob and skipRemoved since the last call (the engine emits them as job events). */
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
    const rows = this.stmt(`SELECT id, kind FROM jobs WHERE run_id = ? AND state = 'submitting'`).all(this.runId) as { id: string; kind: string }[];
    const ids: string[] = [];
    for (const r of rows) {
      // A chat call has no task id: nothing may exist to find later, so the call is simply made again.
      if (r.kind === 'chat') this.transition(r.id, 'submitting', 'pending', { last_error: 'the run stopped during the chat call; the call is made again' });
      else {
        this.transition(r.id, 'submitting', 'uncertain', { last_error: 'the run stopped after the submit was sent and before its answer arrived; the task may exist' });
        ids.push(r.id);
      }
    }
    return ids;
  }

  /**
   * The service that held this run's tasks is gone (an earlier in-process
   * sandbox): submitted, downloading and uncertain jobs go back to pending,
   * their task ids, results and file rows cleared. Returns the jobs moved.
   */
  returnInFlight(reason: string): Array<{ id: string; from: JobState }> {
    const rows = this.stmt(`SELECT id, state FROM jobs WHERE run_id = ? AND state IN ('submitted', 'downloading', 'uncertain') ORDER BY seq`).all(this.runId) as { id: string; state: JobState }[];
    const clear: JobPatch = { task_id: null, result: null, submitted_input: null, submitted_at: null, finished_at: null, expires_at: null, last_error: reason };
    this.db.transaction(() => {
      for (const r of rows) this.transition(r.id, r.state, 'pending', clear, () => this.stmt('DELETE FROM files WHERE run_id = ? AND job_id = ?').run(this.runId, r.id));
    })();
    return rows.map((r) => ({ id: r.id, from: r.state }));
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
      this.guardedMove(jobId, from, to, patch);
      also?.();
      this.graph.afterMove(jobId, to, patch.last_error);
    };
    if (this.db.inTransaction) run();
    else this.db.transaction(run)();
  }

  /** The guarded UPDATE of one job's state (no graph effects); the caller holds the transaction. */
  private guardedMove(jobId: string, from: JobState, to: JobState, patch: JobPatch): void {
    if (!TRANSITIONS[from].includes(to)) throw new TransitionError(`job ${jobId}: ${from} -> ${to} is not an allowed state change`);
    const sets = ['state = ?', 'updated_at = ?'];
    const values: unknown[] = [to, nowIso()];
    for (const col of PATCH_COLUMNS) {
      if (col in patch) {
        sets.push(`"${col}" = ?`);
        values.push(patch[col] ?? null);
      }
    }
    if (patch.attemptsInc) {
      sets.push('attempts = attempts + ?');
      values.push(patch.attemptsInc);
    }
    // A job sent again whose earlier result has files on disk: the engine moves them aside (src/engine/previous.ts).
    const hadFiles = to === 'pending' && from !== 'submitting' && this.stmt(`SELECT 1 FROM files WHERE run_id = ? AND job_id = ? AND state = 'done' LIMIT 1`).get(this.runId, jobId) !== undefined;
    const sql = `UPDATE jobs SET ${sets.join(', ')} WHERE run_id = ? AND id = ? AND state = ?`;
    const res = this.stmt(sql).run(...values, this.runId, jobId, from);
    if (res.changes !== 1) {
      const cur = this.stmt('SELECT state FROM jobs WHERE run_id = ? AND id = ?').get(this.runId, jobId) as { state: string } | undefined;
      throw new TransitionError(`job ${jobId}: expected state ${from} for ${from} -> ${to}, found ${cur ? cur.state : 'no such job'}`);
    }
    if (hadFiles) this.replacedResults.push(jobId);
  }

  /** Set last_error without changing the state. */
  noteError(jobId: string, message: string): void {
    this.stmt('UPDATE jobs SET last_error = ?, updated_at = ? WHERE run_id = ? AND id = ?').run(message, nowIso(), this.runId, jobId);
  }

  // ---- reads ----

  /** The task result JSON last read for a job, or null. */
  resultOf(jobId: string): string | null {
    const r = this.stmt('SELECT result FROM jobs WHERE run_id = ? AND id = ?').get(this.runId, jobId) as { result: string | null } | undefined;
    return r?.result ?? null;
  }

  getJob(jobId: string): JobRow | undefined {
    return this.stmt('SELECT * FROM jobs WHERE run_id = ? AND id = ?').get(this.runId, jobId) as JobRow | undefined;
  }

  /**
   * Up to `limit` ready pending jobs after sequence number `afterSeq`, in
   * manifest order: a job with graph parents is ready when every parent is done.
   */
  nextPending(afterSeq: number, limit: number): JobRow[] {
    return this.stmt(
      `SELECT * FROM jobs j WHERE run_id = ? AND state = 'pending' AND seq > ?
         AND NOT EXISTS (SELECT 1 FROM job_links l JOIN jobs p ON p.run_id = l.run_id AND p.id = l.parent_id WHERE l.run_id = j.run_id AND l.job_id = j.id AND l.kind != 'child' AND p.state != 'done')
       ORDER BY seq LIMIT ?`,
    ).all(this.runId, afterSeq, limit) as JobRow[];
  }

  /** Jobs in one state, in manifest order (iterated lazily). */
  *jobsIn(state: JobState): IterableIterator<JobRow> {
    yield* this.db.prepare(`SELECT * FROM jobs WHERE run_id = ? AND state = ? ORDER BY seq`).iterate(this.runId, state) as IterableIterator<JobRow>;
  }

  /** Every job of the run, in manifest order. */
  *allJobs(): IterableIterator<JobRow> {
    yield* this.db.prepare(`SELECT * FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? ORDER BY seq`).iterate(this.runId) as IterableIterator<JobRow>;
  }

  /** Every job of the run, in manifest order, without the large spec and input columns (reports, status). */
  *summaryRows(): IterableIterator<SummaryRow> {
    yield* this.db
      .prepare(
        `SELECT id, model, kind, "where", state, task_id, attempts, submitted_at, finished_at, last_error, estimated_credits FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? ORDER BY seq`,
      )
      .iterate(this.runId) as IterableIterator<SummaryRow>;
  }

  counts(): Record<JobState, number> {
    const out = { pending: 0, submitting: 0, submitted: 0, downloading: 0, done: 0, failed: 0, uncertain: 0, expired: 0, skipped: 0, exists: 0 } as Record<JobState, number>;
    for (const r of this.stmt('SELECT state, COUNT(*) AS n FROM jobs WHERE run_id = ? GROUP BY state').all(this.runId) as { state: JobState; n: number }[]) out[r.state] = r.n;
    return out;
  }

  estimate(): { known: number; unknown: number } {
    const r = this.stmt(
      `SELECT COALESCE(SUM(estimated_credits), 0) AS known, SUM(CASE WHEN estimated_credits IS NULL THEN 1 ELSE 0 END) AS unknown FROM jobs WHERE run_id = ? AND state != 'skipped' AND NOT (kind = 'fanout' AND state = 'done')`,
    ).get(this.runId) as { known: number; unknown: number | null };
    return { known: r.known, unknown: r.unknown ?? 0 };
  }

  /** Pending jobs whose manifest entry names its own callback_url. */
  pendingWithOwnCallback(): number {
    const r = this.stmt(`SELECT COUNT(*) AS n FROM jobs WHERE run_id = ? AND state = 'pending' AND json_extract(spec, '$.callback_url') IS NOT NULL`).get(this.runId) as { n: number };
    return r.n;
  }

  /** Estimate of the work this run will submit (pending jobs only). */
  pendingEstimate(): { known: number; unknown: number } {
    const r = this.stmt(
      `SELECT COALESCE(SUM(estimated_credits), 0) AS known, SUM(CASE WHEN estimated_credits IS NULL THEN 1 ELSE 0 END) AS unknown FROM jobs WHERE run_id = ? AND state = 'pending'`,
    ).get(this.runId) as { known: number; unknown: number | null };
    return { known: r.known, unknown: r.unknown ?? 0 };
  }

  // ---- files ----

  addFiles(jobId: string, files: Omit<FileRow, 'job_id' | 'path' | 'size' | 'sha256' | 'state'>[]): void {
    const ins = this.stmt(
      'INSERT OR REPLACE INTO files (run_id, job_id, idx, name, url, type, content_type, expected_size, expires_at, state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
    );
    for (const f of files) ins.run(this.runId, jobId, f.idx, f.name, f.url, f.type, f.content_type, f.expected_size, f.expires_at, 'pending');
  }

  fileDone(jobId: string, idx: number, got: { path: string; size: number; sha256: string; content_type: string | null }): void {
    this.stmt(`UPDATE files SET path = ?, size = ?, sha256 = ?, content_type = COALESCE(?, content_type), state = 'done' WHERE run_id = ? AND job_id = ? AND idx = ?`).run(
      got.path,
      got.size,
      got.sha256,
      got.content_type,
      this.runId,
      jobId,
      idx,
    );
  }

  filesOf(jobId: string): FileRow[] {
    return this.stmt('SELECT job_id, idx, name, url, type, content_type, expected_size, path, size, sha256, expires_at, state FROM files WHERE run_id = ? AND job_id = ? ORDER BY idx').all(
      this.runId,
      jobId,
    ) as FileRow[];
  }

  // ---- uploads (shared by every run in this file) ----

  /** A previous upload of this content to this service (base URL) still younger than maxAgeMs. */
  findUpload(baseUrl: string, sha256: string, maxAgeMs: number): string | null {
    const r = this.stmt('SELECT file_url, uploaded_at FROM uploads WHERE base_url = ? AND sha256 = ?').get(baseUrl, sha256) as { file_url: string; uploaded_at: number } | undefined;
    if (!r || Date.now() - r.uploaded_at > maxAgeMs) return null;
    return r.file_url;
  }

  recordUpload(baseUrl: string, sha256: string, fileUrl: string): void {
    this.stmt('INSERT INTO uploads (base_url, sha256, file_url, uploaded_at) VALUES (?, ?, ?, ?) ON CONFLICT(base_url, sha256) DO UPDATE SET file_url = excluded.file_url, uploaded_at = excluded.uploaded_at').run(
      baseUrl,
      sha256,
      fileUrl,
      Date.now(),
    );
  }

  // ---- small named values (meta table) ----

  /** A value stored under `key` (e.g. what the last manifest sync depended on), or null. */
  getMeta(key: string): string | null {
    const r = this.stmt('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined;
    return r?.value ?? null;
  }

  /** Store `value` under `key`; null removes it. */
  setMeta(key: string, value: string | null): void {
    if (value === null) this.stmt('DELETE FROM meta WHERE key = ?').run(key);
    else this.stmt('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value').run(key, value);
  }

  /** The id of the run in use (openRun/useRun). */
  get currentRunId(): number {
    return this.runId;
  }

  integrityCheck(): string {
    return String(this.db.pragma('integrity_check', { simple: true }));
  }

  /** Throw when the lease was lost (another process took over the file). */
  assertLease(): void {
    if (this.leaseLost) throw new StateError('another process took over the state file; stopping');
  }
}
