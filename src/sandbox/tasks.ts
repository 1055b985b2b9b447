import type { ModelSpec } from '../models/index.js';
import type { Account } from './accounts.js';
import type { Blob, FileEntry } from './files.js';
import { Rng } from './rng.js';

/**
 * Tasks and their lifecycle. A task's whole future is drawn at submission
 * (queue time, run time, failure, output count) from a per-task seeded Rng;
 * its state at any moment is computed from the clock, so no timer runs per task.
 *
 *   not_started --(startAt)--> running (progress 0..99 rising) --(endAt)--> finished (100) | failed
 */

/** A finished task's result, built by genericResult (results.ts) or an extension. */
export interface TaskResult {
  /** The `files` array sent in status, detail and callback bodies. */
  files: FileEntry[] | Array<Record<string, unknown>>;
  /** Every downloadable file of the task, served at FileStore.url(). */
  blobs: Blob[];
}

export type TaskState = 'not_started' | 'running' | 'finished' | 'failed';

export interface TaskRecord {
  readonly id: string;
  readonly seq: number;
  readonly account: Account;
  readonly spec: ModelSpec;
  /** The validated input, defaults applied. */
  readonly input: Record<string, unknown>;
  readonly callbackUrl: string | null;
  /** Virtual epoch ms. */
  readonly createdAt: number;
  readonly startAt: number;
  /** When the task finishes, or fails. */
  readonly endAt: number;
  /** When the run would finish had it not failed (progress is measured against it). */
  readonly runEndAt: number;
  /** Set when the task will fail. */
  errorMessage: string | null;
  /** Seed of every draw that belongs to this task (durations, file bytes). */
  readonly seed: number;
  /** Credits deducted at submission. */
  readonly charged: number;
  /** Outputs asked for (n, variations) and outputs that will be delivered (fewer with partialRate). */
  readonly asked: number;
  delivered: number;
  /** Result, built once on first read after the task finished. */
  result: TaskResult | null;
  callbackAttempts: number;
  callbackDelivered: boolean;
  /** Free slot for extensions (music results, staged callbacks); the core never reads it. */
  ext: Record<string, unknown> | null;
}

export interface TaskPlan {
  startAt: number;
  endAt: number;
  runEndAt: number;
  fails: boolean;
  delivered: number;
}

/** Models whose submit answers `running` (no queue phase); every other model answers `not_started`. */
export function startsRunning(spec: ModelSpec): boolean {
  return spec.family === 'dream-v5.0-flash';
}

/**
 * Draw a task's future. Total duration is uniform in spec.typicalSeconds x timeScale;
 * up to 15% of it is spent queued (none for models that start running).
 */
export function planTask(
  spec: ModelSpec,
  asked: number,
  now: number,
  rng: Rng,
  o: { timeScale: number; failureRate: number; partialRate: number },
): TaskPlan {
  const [lo, hi] = spec.typicalSeconds;
  const totalMs = rng.range(lo, hi) * 1000 * o.timeScale;
  const queueShare = startsRunning(spec) ? 0 : rng.range(0, 0.15);
  const fails = rng.next() < o.failureRate;
  // A failing task stops somewhere in its run.
  const runShare = fails ? rng.range(0.1, 1) : 1;
  const startAt = now + totalMs * queueShare;
  const runEndAt = now + totalMs;
  const endAt = startAt + (runEndAt - startAt) * runShare;
  const partial = asked > 1 && rng.next() < o.partialRate;
  const delivered = partial ? rng.int(1, asked - 1) : asked;
  return { startAt, endAt, runEndAt, fails, delivered };
}

export function stateAt(t: TaskRecord, now: number): TaskState {
  if (now >= t.endAt) return t.errorMessage === null ? 'finished' : 'failed';
  if (now >= t.startAt) return 'running';
  return 'not_started';
}

/** 0 while queued, rising linearly while running (at most 99), 100 when finished; a failed task keeps what it had reached. */
export function progressAt(t: TaskRecord, now: number): number {
  if (now < t.startAt) return 0;
  if (now >= t.endAt && t.errorMessage === null) return 100;
  const span = t.runEndAt - t.startAt;
  if (span <= 0) return 0;
  const p = Math.floor(((Math.min(now, t.endAt) - t.startAt) / span) * 100);
  return Math.max(0, Math.min(99, p));
}

export class TaskStore {
  private readonly byId = new Map<string, TaskRecord>();
  private seq = 0;

  nextSeq(): number {
    return ++this.seq;
  }

  add(t: TaskRecord): void {
    this.byId.set(t.id, t);
  }

  get(id: string): TaskRecord | undefined {
    return this.byId.get(id);
  }

  get size(): number {
    return this.byId.size;
  }

  values(): IterableIterator<TaskRecord> {
    return this.byId.values();
  }
}
