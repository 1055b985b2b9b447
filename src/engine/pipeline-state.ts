import { findModel } from '../models/index.js';
import type { JobPatch, JobRow, JobState, Store } from '../store/index.js';
import type { EngineEvent, StopReason } from './events.js';
import { ParentOutputs, expandForEach, resolveInput, type CreditLimit } from './graph.js';
import { GroupCommit } from '../store/group-commit.js';
import { Uploader } from './uploads.js';
import type { DownloadPort, ServicePort } from './ports.js';
import { MinHeap } from '../lib/heap.js';
import type { StoredSpec } from './spec.js';

/**
 * The work loop. One pass of `tick()` starts whatever has capacity:
 *   submits   pending jobs read from the store in manifest order, at most
 *             `concurrency` POSTs in flight and `maxActive` tasks being waited on;
 *   polls     each waited-on task from its own due time (first not before the
 *             model's typical minimum, then every 2-5 s with jitter), kept in a
 *             min-heap by due time; under the status-read cap (`statusRate`), each
 *             read goes to the due task most likely finished (poll-order.ts);
 *   downloads jobs whose task finished, soonest-expiring first.
 * Every state change goes through store.transition. All durations are
 * multiplied by `timeScale` (1 against the real service).
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
  /** --max-credits / manifest budget: for_each children counted at run time are checked against it (src/engine/graph.ts). */
  creditLimit?: CreditLimit | null;
  /** --only / --limit: the pending jobs this run sends (the children a chosen for_each job makes are added); null: all. */
  selected?: ReadonlySet<string> | null;
  /** Status reads per second of wall time, at most (--status-rate / --time-scale); default 10 / timeScale. */
  statusRate?: number;
}

export interface Waiting {
  taskId: string;
  model: string;
  endpoint: 'status' | 'music';
  /** Not read before this time (ms epoch); Infinity while a read is in flight. */
  dueAt: number;
  failures: number;
  /** When the task was sent (ms epoch). */
  sentAt: number;
  /** Time from sentAt to the last read that found the task unfinished (0: not read yet). */
  runningAt: number;
  /** The model's typical [min, max] time in ms, time-scaled: what orders reads (poll-order.ts). */
  typicalMs: [number, number];
  /** A completion callback named this task: it is read before any other. */
  notified: boolean;
}

/** The state the pipeline parts share, and the small helpers they all use (timer, moves, stop, job graph). */
export class PipelineState {
  protected readonly waiting = new Map<string, Waiting>();
  protected submitsInFlight = 0;
  protected pollsInFlight = 0;
  protected readonly downloading = new Set<string>();
  protected buffer: JobRow[] = [];
  protected cursor = 0;
  protected pendingExhausted = false;
  protected downloadsLoaded = false;
  protected readonly downloadHeap = new MinHeap<{ at: number; id: string }>();
  protected readonly due = new MinHeap<{ at: number; id: string }>();
  protected timer: NodeJS.Timeout | null = null;
  protected timerAt = Infinity;
  protected wakeUp: (() => void) | null = null;
  /** Jobs that became uncertain in this run: with callbacks on, a late callback may still adopt them. */
  protected readonly uncertainHere = new Set<string>();
  protected graceUntil = 0;
  stopReason: StopReason | null = null;
  /** The run has job-graph links: readiness, references and for_each children apply. */
  protected graphOn = false;
  /** Jobs handed to submitJob and not finished with it (a rescan must not hand them out again). */
  protected readonly claimed = new Set<string>();
  protected readonly parents: ParentOutputs;
  /** The pending jobs this run may send (--only, --limit; see src/engine/select.ts), or null for all. */
  protected readonly selected: Set<string> | null;
  /** Chosen jobs handed to submitJob so far (each once; see fillSubmits). */
  protected handedOut = 0;
  /** Jobs sent back to the queue in this run after a transient upload failure, and how often. */
  protected readonly uploadRetries = new Map<string, number>();
  /** Jobs whose download failed on a transient error in this run, waiting to be tried again: id -> when. */
  protected readonly downloadAgain = new Map<string, number>();
  /** How often each job's download was tried again in this run. */
  protected readonly downloadRetries = new Map<string, number>();
  statusRequests = 0;
  /** POSTs sent in this run (the balance is read again afterwards only when > 0). */
  submitsSent = 0;

  protected readonly group: GroupCommit;
  protected readonly uploader: Uploader;

  constructor(
    protected readonly store: Store,
    protected readonly service: ServicePort,
    protected readonly download: DownloadPort,
    protected readonly opts: PipelineOptions,
  ) {
    this.group = new GroupCommit(store);
    this.selected = opts.selected ? new Set(opts.selected) : null;
    this.parents = new ParentOutputs(store);
    if (opts.callbackUrlFor) for (const id of opts.recoveredUncertain ?? []) this.uncertainHere.add(id);
    this.uploader = new Uploader(store, service, { baseUrl: opts.baseUrl, maxAgeMs: opts.uploadMaxAgeMs, signal: opts.signal, emit: opts.emit });
  }

  protected get rand(): number {
    return (this.opts.random ?? Math.random)();
  }

  protected scaled(ms: number): number {
    return ms * this.opts.timeScale;
  }

  protected wake = (): void => {
    const w = this.wakeUp;
    this.wakeUp = null;
    w?.();
  };

  /** One timer for the loop: armed for the earliest due time asked for. */
  protected armTimer(at: number): void {
    if (!Number.isFinite(at) || (this.timer && this.timerAt <= at)) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.wake();
    }, Math.max(0, at - Date.now()));
  }

  /** Wait on a task sent at `sentAt` (ms epoch): first read at `firstAt`, or by default not before its model's typical minimum (with callbacks on, its typical maximum). */
  protected waitOn(id: string, taskId: string, model: string, sentAt: number, firstAt?: number): Waiting {
    const spec = findModel(model);
    const [min, max] = spec?.typicalSeconds ?? [15, 60];
    const typicalMs: [number, number] = [this.scaled(min * 1000), this.scaled(max * 1000)];
    const w: Waiting = { taskId, model, endpoint: spec?.resultEndpoint ?? 'status', dueAt: 0, failures: 0, sentAt, runningAt: 0, typicalMs, notified: false };
    this.waiting.set(id, w);
    this.schedule(id, w, firstAt ?? sentAt + (this.opts.callbackUrlFor ? typicalMs[1] : typicalMs[0]));
    return w;
  }

  protected schedule(id: string, w: Waiting, at: number): void {
    w.dueAt = at;
    this.due.push({ at, id });
  }

  protected async moveDurable(id: string, from: JobState, to: JobState, patch: JobPatch): Promise<void> {
    await this.group.commit(() => this.store.transition(id, from, to, patch));
    this.opts.emit({ type: 'job', id, from, to, task_id: patch.task_id ?? null, error: patch.last_error ?? null });
    this.emitGraphSkips();
  }

  // ---- job graph (src/engine/graph.ts, src/store/graph.ts) ----

  /** Descendants skipped by the store because a parent ended without results. */
  protected emitGraphSkips(): void {
    // Brought back first: a job brought back and skipped again (another parent failed) ends skipped.
    for (const id of this.store.graph.drainRevived()) this.opts.emit({ type: 'job', id, from: 'skipped', to: 'pending', task_id: null, error: null });
    for (const s of this.store.graph.drainSkipped()) this.opts.emit({ type: 'job', id: s.id, from: 'pending', to: 'skipped', task_id: null, error: s.reason });
  }

  /** `id` became done: jobs waiting for it may be ready now, so pending jobs are read again from the first of them. */
  protected rescanPending(id: string): void {
    if (!this.graphOn) return;
    const first = this.store.graph.firstPendingChild(id);
    if (first === null) return;
    // Rows read but not handed out yet are read again too.
    this.cursor = Math.min(this.cursor, first - 1, (this.buffer[0]?.seq ?? Infinity) - 1);
    this.buffer = [];
    this.pendingExhausted = false;
  }

  /** for_each jobs whose children would go over the credit limit: left pending, not tried again in this run. */
  protected readonly heldByLimit = new Set<string>();

  /**
   * Graph work for a pending row about to be submitted; true when it was
   * handled here: skipped since it was read, or a for_each job (its children are made now).
   */
  protected graphStep(row: JobRow): boolean {
    const cur = this.store.getJob(row.id);
    if (!cur || cur.state !== 'pending') return true;
    if (row.kind !== 'fanout') return false;
    if (this.heldByLimit.has(row.id)) return true;
    const r = expandForEach(this.store, this.parents, cur, this.opts.creditLimit ?? null);
    if ('held' in r) {
      this.heldByLimit.add(row.id);
      this.opts.emit({ type: 'warning', message: r.held });
    } else if ('error' in r) this.move(row.id, 'pending', 'failed', { last_error: r.error });
    else {
      // A chosen for_each job: its children are sent in this run too.
      if (this.selected?.has(row.id)) for (let i = 0; i < r.count; i++) this.selected.add(`${row.id}.${i}`);
      if (r.made.length > 0) this.opts.emit({ type: 'children', id: row.id, ids: r.made });
      this.opts.emit({ type: 'job', id: row.id, from: 'pending', to: 'done', task_id: null, error: null });
    }
    return true;
  }

  /** The row with its references filled (and the input checked again), or null when the job failed. */
  protected withRefs(row: JobRow): JobRow | null {
    const spec = JSON.parse(row.spec) as StoredSpec;
    const r = resolveInput(this.parents, row, spec);
    if ('error' in r) {
      this.move(row.id, 'pending', 'failed', { last_error: r.error });
      return null;
    }
    return r.input === spec.input ? row : { ...row, spec: JSON.stringify({ ...spec, input: r.input }) };
  }

  protected stop(reason: StopReason): void {
    if (this.stopReason) return;
    this.stopReason = reason;
    this.opts.emit({ type: 'stopping', reason });
  }

  protected move(id: string, from: JobState, to: JobState, patch: Parameters<Store['transition']>[3] = {}, also?: () => void): void {
    this.store.transition(id, from, to, patch, also);
    this.opts.emit({ type: 'job', id, from, to, task_id: patch.task_id ?? null, error: patch.last_error ?? null });
    this.emitGraphSkips();
  }
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
