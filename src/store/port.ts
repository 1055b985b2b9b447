import type { ChildInput } from './graph.js';
import type { JobState } from './states.js';
import type { FileRow, JobPatch, JobRow, TakenJob } from './types.js';

/**
 * WorkStore: the one asynchronous interface through which the engine's work loop
 * (src/engine/pipeline*.ts and what it calls) reads and changes a run's jobs. Two
 * backends implement it: SqliteWorkStore (sqlite-work.ts, over the synchronous Store:
 * one writer, which holds the state file's lease) and PgWorkStore (src/store/pg/: any
 * number of workers, each job claimed under a lease).
 *
 * Leases. A job this worker claimed (claimPending), took over (takeOver) or adopted
 * (a transition from `uncertain`) is held under a lease: owner and epoch, renewed by
 * heartbeat(). Every write about a job is guarded by that lease: a write from a worker
 * that lost it (paused past its expiry, then taken over by another) changes nothing and
 * answers `false` / `{ moved: false }`. The pipeline then forgets the job and goes on:
 * a lost lease is never an error of the run. With SQLite the lease is the state file's
 * (one writer), so every write holds.
 *
 * Errors. A state change that is not allowed (TRANSITIONS), or a job not in the `from`
 * state, throws TransitionError, as Store.transition does. Failures of the backend
 * (disk, connection) reject with the backend's error.
 */
export interface WorkStore {
  /**
   * The id of this worker (hostname:pid:random), recorded on each file row it writes;
   * null with SQLite (one writer: the file rows record none).
   */
  readonly worker: string | null;

  /** True once this worker lost the right to write anything (SQLite: another process took over the state file). The pipeline then stops. */
  readonly leaseLost: boolean;

  /** How often the pipeline calls heartbeat(), in ms; null: never (SQLite, or a store beating on its own: beatInBackground). */
  readonly heartbeatMs: number | null;

  /** How often the pipeline calls takeOver() again after the start, in ms; null: only at the start (SQLite). */
  readonly takeOverMs: number | null;

  /** True when the run has job-graph links (readiness, references, for_each children apply). */
  hasGraph(): Promise<boolean>;

  /**
   * Claim up to `n` pending jobs that are ready (every graph parent done), in manifest
   * order (`seq`), and not held by this worker already. Each returned job is held by
   * this worker (its lease set with the database's clock) until it leaves `pending`
   * or is given back with release(). Jobs not in `only` (when given), and jobs in `skip`
   * (those this worker gave up on), are neither claimed nor returned. Fewer than `n` (or none) when no more are ready now; a
   * job becomes ready when its last parent becomes `done` (a later call returns it).
   *
   * Budget: with a credit cap (--max-credits, the manifest budget), each claimed job's
   * estimated credits are reserved against the cap atomically; a job that would go over
   * it is not claimed, and `overBudget` is true. The reservation is returned when the job
   * moves without being charged (to `pending`, or to `failed`/`skipped`/`done` from `pending`,
   * or from `submitting` to `failed`/`exists`), or by release(). SQLite: no reservation
   * (the cap is checked before the run starts), overBudget is always false.
   */
  claimPending(n: number, opts?: { only?: ReadonlySet<string> | null; skip?: ReadonlySet<string> }): Promise<Claim>;

  /**
   * Give back pending jobs this worker claimed and will not send in this run (stopped
   * first, left for a later run; or, after a job became done, claimed again so manifest order
   * holds): they stay `pending`, unleased, their reserved credits returned; any worker may claim
   * them again. Ids no longer pending, or not held by this worker, are passed over.
   */
  release(ids: readonly string[]): Promise<void>;

  /**
   * Jobs whose task is already at the service and that no live worker holds, now held
   * by this worker: `submitted` ones to be read again, `downloading` ones to be fetched.
   * A job left in `submitting` by a dead worker is moved to `uncertain` here (never sent
   * again blindly), listed in `moves` (with what the job graph did because of it).
   * SQLite: the first call returns every `submitted` and `downloading` job of the run
   * (the resume of a stopped run; `submitting` ones were made uncertain before the run
   * began), later calls return nothing. PostgreSQL: the jobs whose lease expired; the
   * pipeline calls it again every takeOverMs, so jobs may be handed over mid-run; never the `skip` ids
   * (jobs this pipeline gave up on).
   */
  takeOver(skip?: readonly string[]): Promise<TakenOver>;

  /**
   * A completion callback reached this worker for job `id`, `submitted` with task `taskId` and waited on by
   * another worker (its receiver is behind the same public URL): this worker takes the job's lease (the
   * other's writes about it are refused from then on, and it drops the job) and returns it, to be read at
   * once. Null when the job is not so (another state or task, or already this worker's). SQLite: always
   * null (one process waits on every submitted job).
   */
  adoptWaiting(id: string, taskId: string): Promise<TakenJob | null>;

  /**
   * Let go of every lease this worker holds, after its pipeline stopped for lost leases: they end now,
   * so takeOver (of any worker, this one's next pass included) hands its jobs over by the usual rules
   * (`submitting` -> `uncertain`; `submitted`/`downloading` taken over; `pending` claimable). Without it the
   * next heartbeat would renew leases of jobs no pipeline waits on any more. With `ids`: only those (jobs
   * this pass gave up on: left for later, which any other worker may take over). SQLite: nothing to do.
   */
  dropLeases(ids?: readonly string[]): Promise<void>;

  /** Renew the leases of every job this worker holds (PostgreSQL; SQLite: nothing to do). */
  heartbeat(): Promise<void>;

  /**
   * Beat from now on on a timer and a connection of the store's own, not behind the pipeline's loop (which may
   * wait seconds on a busy database or service while the worker is alive). Returns the stop (PostgreSQL).
   */
  beatInBackground?(): () => Promise<void>;

  /** The job as stored now, or undefined when the run has no such job. */
  getJob(id: string): Promise<JobRow | undefined>;

  /**
   * A job of this run other than `except` that records task `taskId`, or null. Read when a callback would
   * adopt a task for an uncertain job (rare): a task another job holds is never adopted (a forged callback).
   */
  jobOfTask(taskId: string, except: string): Promise<string | null>;

  /**
   * Move job `id` from `from` to `to`, setting `patch`, in one transaction guarded by
   * `state = from` and this worker's lease, with the file rows of `o` and the job graph's
   * part (a job that ends without results skips its pending descendants; one that leaves
   * `uncertain` with results brings back the ones skipped for it). Resolves with the
   * other jobs the graph moved (`side`, in order), or `{ moved: false }` when this worker
   * no longer holds the job's lease (nothing changed). A move from `pending` needs the
   * job claimed; a move from `uncertain` (a callback adopting the task) takes the job for
   * this worker; a move to `pending` gives the job back, as release() does. With `o.durable` it resolves only once the change survives a crash
   * (SQLite: fsynced, grouped with others of the same moment; PostgreSQL: committed):
   * the intent `pending -> submitting` is written so before the POST.
   * Throws TransitionError when the change is not allowed or the job is not in `from`.
   */
  transition(id: string, from: JobState, to: JobState, patch?: JobPatch, o?: MoveOptions): Promise<Moved>;

  /** Record an error of the job's current attempt without changing its state (kept in its history). */
  noteError(id: string, message: string): Promise<void>;

  /** The job's file rows, by idx. */
  filesOf(id: string): Promise<FileRow[]>;

  /**
   * The jobs as stored now, each with its file rows (by idx), read together (one statement with PostgreSQL),
   * by id; an id the run does not have is absent.
   */
  jobsWithFiles(ids: readonly string[]): Promise<Map<string, JobWithFiles>>;

  /**
   * Record files on disk (or in the bucket) without a state change: a job stopped or failed
   * midway keeps what it fetched. Each row records this worker. False when the lease was lost.
   */
  recordFiles(id: string, got: readonly FileGot[]): Promise<boolean>;

  /** The jobs `id` waits for (its graph parents, with those inherited from its for_each job). */
  parentsOf(id: string): Promise<string[]>;

  /**
   * The for_each job `templateId` (claimed, pending) made its children: insert the new
   * ones (pending, after every job in manifest order), link them, and move it
   * `pending -> done`, in one transaction. Resolves with the ids of the children that
   * were new, or null when the lease was lost (nothing changed).
   */
  expand(templateId: string, children: readonly ChildInput[], note: string): Promise<string[] | null>;

  /** The run's estimated credits: the sum over jobs with a known price, and how many have none. */
  estimate(): Promise<{ known: number; unknown: number }>;

  /** A small named value of the state (the meta table, shared by every run of the state), or null. */
  getMeta(key: string): Promise<string | null>;

  /**
   * Set a small named value of the state, or remove it with null (e.g. the notes of objects put in a bucket
   * before their files are recorded: src/engine/fetch-bucket.ts on branch s3a).
   */
  setMeta(key: string, value: string | null): Promise<void>;

  /** An earlier upload of this content (sha256) to this service (base URL) younger than maxAgeMs: its URL, or null. */
  findUpload(baseUrl: string, sha256: string, maxAgeMs: number): Promise<string | null>;

  /** Remember an upload for reuse (by any run and, with PostgreSQL, any worker). */
  recordUpload(baseUrl: string, sha256: string, fileUrl: string): Promise<void>;

  /**
   * Wait for a slot of the upload window (5 per minute per key), held from now until the
   * returned function is called with the request's outcome (once, success or not); a slot
   * is free again a window after its release. A 429 outcome starts a cool-down (its
   * Retry-After, at least a window) during which no slot is given. Called for every try
   * of an upload. SQLite: resolves at once (the client's own UploadLimiter keeps the limit
   * for the one process). PostgreSQL: the slots are rows shared by every worker of the key.
   * Rejects with the signal's reason on abort.
   */
  acquireUploadSlot(signal?: AbortSignal): Promise<ReleaseUploadSlot>;

  /**
   * Wait for a permit to read one task's status (the cap on status reads per second).
   * SQLite: resolves at once (the pipeline's and the client's buckets keep the cap).
   * PostgreSQL: a token bucket row shared by every worker of the key.
   * Rejects with the signal's reason on abort.
   */
  acquireStatusRead(signal?: AbortSignal): Promise<void>;
}

/** A job as stored now and its file rows (by idx), read together. */
export interface JobWithFiles {
  job: JobRow;
  files: FileRow[];
}

/** What claimPending handed to this worker. */
export interface Claim {
  jobs: JobRow[];
  /** A ready job was left unclaimed because its estimated credits would go over the cap. */
  overBudget: boolean;
}

/** What takeOver handed to this worker. */
export interface TakenOver {
  /** Jobs with what resuming them needs (a full JobRow does too). */
  submitted: TakenJob[];
  downloading: TakenJob[];
  /** Changes takeOver made (`submitting -> uncertain` of dead workers' jobs, and their graph effects). */
  moves: SideMove[];
}

/** A state change the store made besides the one asked for (the job graph), reported for the run's events. */
export interface SideMove {
  id: string;
  from: JobState;
  to: JobState;
  error: string | null;
}

/** The outcome of transition(). */
export type Moved = { moved: true; side: SideMove[] } | { moved: false };

/** A file row to add (the job's results, before they are fetched). */
export type NewFile = Omit<FileRow, 'job_id' | 'path' | 'size' | 'sha256' | 'state'>;

/** A file of a job now on disk (or in the bucket): its row becomes `done` with these. */
export interface FileGot {
  idx: number;
  path: string;
  size: number;
  sha256: string;
  content_type: string | null;
}

/** What a transition writes besides the job row, in the same transaction. */
export interface MoveOptions {
  /** Resolve only once the change is durable (see transition). */
  durable?: boolean;
  /** File rows to add (results found by a status read or a chat answer). */
  addFiles?: readonly NewFile[];
  /** File rows now done (after addFiles when both are given). */
  filesDone?: readonly FileGot[];
}

/** How an upload request ended, for the shared upload window. */
export interface UploadOutcome {
  /** The service answered 429. */
  rateLimited: boolean;
  /** Its Retry-After in ms, when it gave one. */
  retryAfterMs: number | null;
}

/** Ends a held upload slot (call once). */
export type ReleaseUploadSlot = (outcome: UploadOutcome) => Promise<void>;

/**
 * The ledger of a credit cap on what is charged (src/engine/cap.ts): spent (balance drops since the run began)
 * and reserved (expected prices of jobs sent, not yet seen charged). LocalLedger (src/engine/cap.ts) for a SQLite
 * state; PgLedger (src/store/pg/budget.ts): the run's budget row, shared by every worker.
 */
export interface CapLedger {
  /**
   * Reserve `credits` for job `id` when spent + reserved + credits <= cap (`unknown`: the price is not known, so
   * `credits` is 0 and the job fits while spent + reserved < cap). Returns whether it did, with the totals.
   */
  reserve(id: string, credits: number, unknown: boolean): Promise<CapTotals & { ok: boolean }>;
  /** Give back the reservation of a job that was not sent after all (nothing can have been charged). */
  unreserve(id: string): Promise<void>;
  /** The jobs whose reservations a reading begun now may end: `own` (this process's), and for a shared ledger, jobs of other workers that ended. */
  releasable(own: readonly string[]): Promise<string[]>;
  /** A balance reading: spent grows by the drop since the last reading (the first one only sets the base); the `release` jobs' reservations end. */
  settle(reading: number, release: readonly string[]): Promise<CapTotals>;
  /** The worker is done with the ledger: what it holds for later sends goes back (a shared ledger's batches). */
  close?(): Promise<void>;
}

export interface CapTotals {
  spent: number;
  reserved: number;
}

