import type { JobPatch, JobState, MoveOptions, WorkStore } from '../../store/index.js';
import type { EngineEvent, StopReason } from '../events.js';
import type { CreditCap } from './cap.js';
import type { CreditLimit } from '../submit/graph.js';

/**
 * The work loop (pipeline.ts) and its stages: Submits (submits.ts), Polls
 * (polls.ts), Downloads (downloads.ts) and Callbacks (callbacks.ts).
 *   submits   pending jobs claimed from the store in manifest order, at most
 *             `concurrency` POSTs in flight and `maxActive` tasks being waited on;
 *   polls     each waited-on task from its own due time (first not before the
 *             model's typical minimum, then every 2-5 s with jitter), kept in a
 *             min-heap by due time; under the status-read cap (`statusRate`), each
 *             read goes to the due task most likely finished (poll-order.ts);
 *   downloads jobs whose task finished, soonest-expiring first;
 *   callbacks completion callbacks: a task read without a status read, or adopted.
 * Each stage keeps its own state and gets from the others only the few calls it needs.
 * Every state change goes through WorkStore.transition (StageContext.move). All durations
 * are multiplied by `timeScale` (1 against the real service).
 */
export interface PipelineOptions {
  outDir: string;
  concurrency: number;
  maxActive: number;
  timeScale: number;
  signal: AbortSignal;
  emit: (e: EngineEvent) => void;
  /** The callback URL of a job's submit (its id and attempt number in the query), or null when callbacks are off. */
  callbackUrlFor: ((jobId: string, attempt: number) => string) | null;
  /** The service's base URL: uploads are reused only on the service that holds them. */
  baseUrl: string;
  /** Uploads younger than this are reused (72 h minus a margin). */
  uploadMaxAgeMs: number;
  random?: () => number;
  /**
   * Uncertain jobs found at this start whose task may still call back (made uncertain by a crash just now, or
   * sent less than their model's typical maximum time ago): with callbacks on, the run waits for those too.
   */
  recoveredUncertain?: readonly string[];
  /** --max-credits / manifest budget: for_each children counted at run time are checked against it (src/engine/submit/graph.ts). */
  creditLimit?: CreditLimit | null;
  /**
   * The credit cap on what is charged (src/engine/pipeline/cap.ts): each job is sent only when its expected price fits;
   * null or absent: no cap (nothing of it on the hot path).
   */
  cap?: CreditCap | null;
  /** --only / --limit: the pending jobs this run sends (the children a chosen for_each job makes are added); null: all. */
  selected?: ReadonlySet<string> | null;
  /** Status reads per second of wall time, at most (--status-rate / --time-scale); default 10 / timeScale. */
  statusRate?: number;
  /**
   * Asked when this worker has nothing left in hand (nothing to send, wait on or download): true keeps the run
   * going (pending jobs are claimed and orphaned ones taken over again every `idleMs`), false ends it. Absent:
   * the run ends then (`genbatch run`). For a worker on a shared run (`genbatch work`), where jobs may still come
   * its way: made ready by other workers, or left by a dead one.
   */
  keepWaiting?: () => Promise<boolean>;
  /** With keepWaiting: the pause between two looks for work, in ms (default 1000). */
  idleMs?: number;
}

/** What the coordinator gives every stage: the store, the run's options and a few shared acts. */
export interface StageContext {
  readonly store: WorkStore;
  readonly opts: PipelineOptions;
  /** Why the run stops sending (the first reason given), or null while it goes on. */
  readonly stopReason: StopReason | null;
  /** The run has job-graph links: readiness, references and for_each children apply. */
  readonly graphOn: boolean;
  /**
   * Move a job through the store, then emit its event and those of the jobs the job graph moved with it.
   * False when this worker lost the job's lease (nothing changed): the caller drops the job.
   */
  move(id: string, from: JobState, to: JobState, patch?: JobPatch, o?: MoveOptions): Promise<boolean>;
  /** Send nothing new from now on (the first reason is kept and emitted). */
  stop(reason: StopReason): void;
  /** Run the loop again (capacity freed, work queued). */
  wake(): void;
  /** `ms` x the time scale. */
  scaled(ms: number): number;
  /** A random number in [0, 1) (jitter). */
  rand(): number;
  /** A warning about one job. */
  warn(id: string, err: unknown): void;
  /**
   * This run stops working on job `id`, left in its state for a later run (its status reads or downloads
   * kept failing): with leases per job its lease ends, so another worker may take it over, and this run's
   * takeOver skips it (givenUp).
   */
  giveUp(id: string): Promise<void>;
  /** The jobs given up in this run. */
  readonly givenUp: ReadonlySet<string>;
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
