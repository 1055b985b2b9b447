import { AmbiguousSubmitError, ApiError, GenbatchError, NetworkError, UnsafeResultError } from '../errors.js';
import { findModel } from '../models/index.js';
import { nowIso, type JobPatch, type JobRow, type JobState, type Store } from '../store/index.js';
import type { EngineEvent, StopReason } from './events.js';
import { runChatJob } from './chat.js';
import { fetchJob } from './fetch.js';
import { ParentOutputs, expandForEach, resolveInput, type CreditLimit } from './graph.js';
import { GroupCommit } from './group-commit.js';
import { Uploader } from './uploads.js';
import type { DownloadPort, ServicePort, TaskView } from './ports.js';
import { MinHeap } from '../lib/heap.js';
import { extractResults, getAtPath, setAtPath } from './results.js';
import type { StoredSpec } from './spec.js';

/**
 * The work loop. One pass of `tick()` starts whatever has capacity:
 *   submits   pending jobs read from the store in manifest order, at most
 *             `concurrency` POSTs in flight and `maxActive` tasks being waited on;
 *   polls     each waited-on task at its own due time (first not before the
 *             model's typical minimum, then every 2-5 s with jitter), kept in a
 *             min-heap by due time; the client caps status reads per second;
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
  /** The callback URL of a job (with its id in the query), or null when callbacks are off. */
  callbackUrlFor: ((jobId: string) => string) | null;
  /** The service's base URL: uploads are reused only on the service that holds them. */
  baseUrl: string;
  /** Uploads younger than this are reused (72 h minus a margin). */
  uploadMaxAgeMs: number;
  random?: () => number;
  /** Jobs made uncertain by a crash, found at this start: with callbacks on, the run waits for their late callbacks too. */
  recoveredUncertain?: readonly string[];
  /** --max-credits / manifest budget: for_each children counted at run time are checked against it (src/engine/graph.ts). */
  creditLimit?: CreditLimit | null;
}

interface Waiting {
  taskId: string;
  model: string;
  endpoint: 'status' | 'music';
  dueAt: number;
  failures: number;
}

const GENERATED_VALIDITY_MS = 24 * 3600 * 1000;
/** How often a job whose upload failed transiently (client retries used up) is queued again in the same run. */
const UPLOAD_REQUEUES = 3;
/** How long a run with callbacks waits, at the end, for late callbacks of its uncertain jobs. */
const CALLBACK_GRACE_MS = 120_000;

export class Pipeline {
  private readonly waiting = new Map<string, Waiting>();
  private submitsInFlight = 0;
  private pollsInFlight = 0;
  private readonly downloading = new Set<string>();
  private buffer: JobRow[] = [];
  private cursor = 0;
  private pendingExhausted = false;
  private downloadsLoaded = false;
  private readonly downloadHeap = new MinHeap<{ at: number; id: string }>();
  private readonly due = new MinHeap<{ at: number; id: string }>();
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  private wakeUp: (() => void) | null = null;
  /** Jobs that became uncertain in this run: with callbacks on, a late callback may still adopt them. */
  private readonly uncertainHere = new Set<string>();
  private graceUntil = 0;
  stopReason: StopReason | null = null;
  /** The run has job-graph links: readiness, references and for_each children apply. */
  private graphOn = false;
  /** Jobs handed to submitJob and not finished with it (a rescan must not hand them out again). */
  private readonly claimed = new Set<string>();
  private readonly parents: ParentOutputs;
  /** Jobs sent back to the queue in this run after a transient upload failure, and how often. */
  private readonly uploadRetries = new Map<string, number>();
  statusRequests = 0;
  /** POSTs sent in this run (the balance is read again afterwards only when > 0). */
  submitsSent = 0;

  private readonly group: GroupCommit;
  private readonly uploader: Uploader;

  constructor(
    private readonly store: Store,
    private readonly service: ServicePort,
    private readonly download: DownloadPort,
    private readonly opts: PipelineOptions,
  ) {
    this.group = new GroupCommit(store);
    this.parents = new ParentOutputs(store);
    if (opts.callbackUrlFor) for (const id of opts.recoveredUncertain ?? []) this.uncertainHere.add(id);
    this.uploader = new Uploader(store, service, { baseUrl: opts.baseUrl, maxAgeMs: opts.uploadMaxAgeMs, signal: opts.signal, emit: opts.emit });
  }

  private get rand(): number {
    return (this.opts.random ?? Math.random)();
  }

  private scaled(ms: number): number {
    return ms * this.opts.timeScale;
  }

  private wake = (): void => {
    const w = this.wakeUp;
    this.wakeUp = null;
    w?.();
  };

  /** One timer for the loop: armed for the earliest due time asked for. */
  private armTimer(at: number): void {
    if (!Number.isFinite(at) || (this.timer && this.timerAt <= at)) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.wake();
    }, Math.max(0, at - Date.now()));
  }

  private schedule(id: string, w: Waiting, at: number): void {
    w.dueAt = at;
    this.due.push({ at, id });
  }

  private async moveDurable(id: string, from: JobState, to: JobState, patch: JobPatch): Promise<void> {
    await this.group.commit(() => this.store.transition(id, from, to, patch));
    this.opts.emit({ type: 'job', id, from, to, task_id: patch.task_id ?? null, error: patch.last_error ?? null });
    this.emitGraphSkips();
  }

  // ---- job graph (src/engine/graph.ts, src/store/graph.ts) ----

  /** Descendants skipped by the store because a parent ended without results. */
  private emitGraphSkips(): void {
    for (const s of this.store.graph.drainSkipped()) this.opts.emit({ type: 'job', id: s.id, from: 'pending', to: 'skipped', task_id: null, error: s.reason });
  }

  /** `id` became done: jobs waiting for it may be ready now, so pending jobs are read again from the first of them. */
  private rescanPending(id: string): void {
    if (!this.graphOn) return;
    const first = this.store.graph.firstPendingChild(id);
    if (first === null) return;
    // Rows read but not handed out yet are read again too.
    this.cursor = Math.min(this.cursor, first - 1, (this.buffer[0]?.seq ?? Infinity) - 1);
    this.buffer = [];
    this.pendingExhausted = false;
  }

  /** for_each jobs whose children would go over the credit limit: left pending, not tried again in this run. */
  private readonly heldByLimit = new Set<string>();

  /**
   * Graph work for a pending row about to be submitted; true when it was
   * handled here: skipped since it was read, or a for_each job (its children are made now).
   */
  private graphStep(row: JobRow): boolean {
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
      if (r.made.length > 0) this.opts.emit({ type: 'children', id: row.id, ids: r.made });
      this.opts.emit({ type: 'job', id: row.id, from: 'pending', to: 'done', task_id: null, error: null });
    }
    return true;
  }

  /** The row with its references filled (and the input checked again), or null when the job failed. */
  private withRefs(row: JobRow): JobRow | null {
    const spec = JSON.parse(row.spec) as StoredSpec;
    const r = resolveInput(this.parents, row, spec);
    if ('error' in r) {
      this.move(row.id, 'pending', 'failed', { last_error: r.error });
      return null;
    }
    return r.input === spec.input ? row : { ...row, spec: JSON.stringify({ ...spec, input: r.input }) };
  }

  private stop(reason: StopReason): void {
    if (this.stopReason) return;
    this.stopReason = reason;
    this.opts.emit({ type: 'stopping', reason });
  }

  private move(id: string, from: JobState, to: JobState, patch: Parameters<Store['transition']>[3] = {}, also?: () => void): void {
    this.store.transition(id, from, to, patch, also);
    this.opts.emit({ type: 'job', id, from, to, task_id: patch.task_id ?? null, error: patch.last_error ?? null });
    this.emitGraphSkips();
  }

  async run(): Promise<void> {
    this.graphOn = this.store.graph.any();
    // Resume: tasks already at the service are polled again (spread over one poll interval).
    for (const row of this.store.jobsIn('submitted')) {
      if (!row.task_id) continue;
      const spec = findModel(row.model);
      const w: Waiting = { taskId: row.task_id, model: row.model, endpoint: spec?.resultEndpoint ?? 'status', dueAt: 0, failures: 0 };
      this.waiting.set(row.id, w);
      this.schedule(row.id, w, Date.now() + this.rand * this.scaled(2000));
    }
    const onAbort = () => {
      this.stop('signal');
      this.wake();
    };
    this.opts.signal.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        if (this.store.leaseLost) this.stop('lease-lost');
        const stopping = this.opts.signal.aborted || this.stopReason === 'lease-lost';
        let nextDue = Infinity;
        if (!stopping) {
          this.fillSubmits();
          nextDue = Math.min(this.fillPolls(), this.fillDownloads());
        }
        const busy = this.submitsInFlight + this.pollsInFlight + this.downloading.size;
        if (busy === 0) {
          if (stopping) break;
          const submitsDone = this.pendingExhausted || this.stopReason !== null;
          if (submitsDone && this.waiting.size === 0 && this.downloadHeap.size === 0) {
            // With callbacks on, wait a while for late callbacks of this run's uncertain jobs.
            if (!this.opts.callbackUrlFor || this.uncertainHere.size === 0 || this.stopReason) break;
            if (this.graceUntil === 0) this.graceUntil = Date.now() + this.scaled(CALLBACK_GRACE_MS);
            if (Date.now() >= this.graceUntil) break;
            nextDue = Math.min(nextDue, this.graceUntil);
          }
        }
        this.armTimer(nextDue);
        await new Promise<void>((resolve) => {
          this.wakeUp = resolve;
        });
      }
    } finally {
      if (this.timer) clearTimeout(this.timer);
      this.timer = null;
      this.opts.signal.removeEventListener('abort', onAbort);
    }
  }

  // ---- callbacks ----

  /**
   * A completion callback for `job`: never changes a state by itself. A job
   * being waited on with this task is polled now (one status read confirms);
   * an uncertain job without a task id adopts the task (the job id in the
   * callback URL proves it came from our submit), then is polled.
   */
  onCallback(note: { job: string; taskId: string; status: string }): void {
    const w = this.waiting.get(note.job);
    if (w) {
      if (w.taskId === note.taskId && w.dueAt !== Infinity && w.dueAt > Date.now()) {
        this.schedule(note.job, w, Date.now());
        this.wake();
      }
      return;
    }
    const row = this.store.getJob(note.job);
    if (!row || row.state !== 'uncertain' || row.task_id !== null || this.opts.signal.aborted) return;
    void this.moveDurable(note.job, 'uncertain', 'submitted', { task_id: note.taskId, last_error: 'task adopted from a late completion callback' })
      .then(() => {
        this.uncertainHere.delete(note.job);
        const model = findModel(row.model);
        const adopted: Waiting = { taskId: note.taskId, model: row.model, endpoint: model?.resultEndpoint ?? 'status', dueAt: 0, failures: 0 };
        this.waiting.set(note.job, adopted);
        this.schedule(note.job, adopted, Date.now());
        this.wake();
      })
      .catch((err: unknown) => this.opts.emit({ type: 'warning', message: `callback for job ${note.job}: ${errorText(err)}` }));
  }

  // ---- submits ----

  private fillSubmits(): void {
    while (!this.stopReason && !this.pendingExhausted && this.submitsInFlight < this.opts.concurrency && this.waiting.size + this.submitsInFlight < this.opts.maxActive) {
      if (this.buffer.length === 0) {
        this.buffer = this.store.nextPending(this.cursor, 64);
        if (this.buffer.length === 0) {
          this.pendingExhausted = true;
          return;
        }
        this.cursor = this.buffer[this.buffer.length - 1]!.seq;
      }
      const row = this.buffer.shift()!;
      if (this.graphOn && (this.claimed.has(row.id) || this.graphStep(row))) continue;
      this.claimed.add(row.id);
      this.submitsInFlight++;
      void this.submitJob(row)
        .catch((err: unknown) => this.opts.emit({ type: 'warning', message: `job ${row.id}: ${errorText(err)}` }))
        .finally(() => {
          this.submitsInFlight--;
          this.claimed.delete(row.id);
          if (row.kind === 'chat') this.rescanPending(row.id);
          this.wake();
        });
    }
  }

  private async submitJob(queued: JobRow): Promise<void> {
    const row = this.graphOn ? this.withRefs(queued) : queued;
    if (!row) return;
    if (row.kind === 'chat') {
      // A chat call: intent, call, answer written, done (src/engine/chat.ts); it counts as a request sent.
      this.submitsSent++;
      return runChatJob(row, {
        store: this.store,
        chat: this.service.chat?.bind(this.service),
        outDir: this.opts.outDir,
        signal: this.opts.signal,
        emit: this.opts.emit,
        commit: (fn) => this.group.commit(fn),
        stop: (reason) => this.stop(reason),
        sanitizeName: (name) => this.download.sanitizeName(name),
      });
    }
    const spec = JSON.parse(row.spec) as StoredSpec;
    const input = structuredClone(spec.input);
    try {
      for (const ref of spec.refs) {
        const value = ref.data || ref.remote ? getAtPath(input, ref.path) : ref.file;
        if (typeof value !== 'string') throw new GenbatchError('GB_INPUT_CHANGED', `no image at ${ref.path}`);
        setAtPath(input, ref.path, await this.uploader.url(value, ref.sha256, ref.remote ? 'url' : ref.data ? 'data' : 'file'));
      }
    } catch (err) {
      if (this.opts.signal.aborted) return;
      if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429 && err.status !== 402) {
        this.move(row.id, 'pending', 'failed', { last_error: `upload refused: ${err.message}` });
      } else if ((err instanceof ApiError || err instanceof NetworkError) && (this.uploadRetries.get(row.id) ?? 0) < UPLOAD_REQUEUES) {
        // The client's retries were used up on a transient error: the job comes back in this run (at most UPLOAD_REQUEUES times).
        this.uploadRetries.set(row.id, (this.uploadRetries.get(row.id) ?? 0) + 1);
        this.store.noteError(row.id, `upload failed, tried again in this run: ${errorText(err)}`);
        this.buffer.push(queued);
        this.pendingExhausted = false;
      } else {
        this.store.noteError(row.id, `upload failed: ${errorText(err)}`);
        this.opts.emit({ type: 'warning', message: `job ${row.id}: upload failed, left pending: ${errorText(err)}` });
      }
      return;
    }
    if (this.stopReason || this.opts.signal.aborted) return;
    const body: { model: string; input: Record<string, unknown>; callback_url?: string } = { model: spec.model, input };
    if (this.opts.callbackUrlFor) body.callback_url = this.opts.callbackUrlFor(row.id);
    else if (spec.callback_url) body.callback_url = spec.callback_url;
    // The intent is fsynced before the POST: a crash after this point leaves `submitting`, which a rerun turns into `uncertain`.
    await this.moveDurable(row.id, 'pending', 'submitting', { attemptsInc: 1, submitted_input: JSON.stringify(input), submitted_at: nowIso(), last_error: null });
    this.opts.emit({ type: 'sending', id: row.id, estimated_credits: row.estimated_credits });
    let taskId: string;
    try {
      this.submitsSent++;
      taskId = (await this.service.submit(body, this.opts.signal)).task_id;
    } catch (err) {
      this.submitFailed(row.id, err);
      return;
    }
    await this.moveDurable(row.id, 'submitting', 'submitted', { task_id: taskId });
    const model = findModel(spec.model);
    // First poll not before the typical minimum; with callbacks on, not before the typical maximum.
    const first = (this.opts.callbackUrlFor ? (model?.typicalSeconds[1] ?? 60) : (model?.typicalSeconds[0] ?? 15)) * 1000;
    const w: Waiting = { taskId, model: spec.model, endpoint: model?.resultEndpoint ?? 'status', dueAt: 0, failures: 0 };
    this.waiting.set(row.id, w);
    this.schedule(row.id, w, Date.now() + this.scaled(first));
  }

  private submitFailed(id: string, err: unknown): void {
    if (this.opts.signal.aborted && !(err instanceof AmbiguousSubmitError)) {
      // Stopped before the request was sent (during a backoff or a wait for capacity): nothing was created.
      // An abort after sending comes as AmbiguousSubmitError (the client decides from what it sent).
      this.move(id, 'submitting', 'pending', { last_error: 'the run was stopped before this submit was sent' });
    } else if (err instanceof AmbiguousSubmitError) {
      this.move(id, 'submitting', 'uncertain', { last_error: err.message });
      this.uncertainHere.add(id);
    } else if (err instanceof ApiError && err.status === 409) {
      // What the job asks for already exists (a music video or persona for that track, ...): an outcome, not a retry.
      this.move(id, 'submitting', 'exists', { last_error: err.message });
    } else if (err instanceof ApiError && err.status === 402) {
      this.move(id, 'submitting', 'pending', { last_error: err.message });
      this.stop('insufficient-credits');
    } else if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429) {
      this.move(id, 'submitting', 'failed', { last_error: err.message });
    } else if (err instanceof ApiError || (err instanceof NetworkError && !err.sent)) {
      // Retries used up on an answer that proves nothing was created: pending for a later run.
      this.move(id, 'submitting', 'pending', { last_error: err.message });
    } else {
      // Anything else (an unexpected error after the request may have left): never guess.
      this.move(id, 'submitting', 'uncertain', { last_error: errorText(err) });
      this.uncertainHere.add(id);
    }
  }

  // ---- polls ----

  /** Start due polls; returns when the next one is due (ms epoch). */
  private fillPolls(): number {
    const now = Date.now();
    const cap = Math.max(4, this.opts.concurrency * 2);
    while (this.pollsInFlight < cap) {
      const top = this.due.peek();
      if (!top) return Infinity;
      const w = this.waiting.get(top.id);
      if (!w || w.dueAt !== top.at) {
        this.due.pop(); // stale entry
        continue;
      }
      if (top.at > now) return top.at;
      this.due.pop();
      w.dueAt = Infinity;
      this.pollsInFlight++;
      const id = top.id;
      void this.poll(id, w)
        .catch((err: unknown) => this.opts.emit({ type: 'warning', message: `job ${id}: ${errorText(err)}` }))
        .finally(() => {
          this.pollsInFlight--;
          this.wake();
        });
    }
    return Infinity; // at the cap: a finishing poll wakes the loop
  }

  /** 2-5 s with jitter; with callbacks on, a slow fallback poll of 20-40 s. */
  private nextPollDelay(): number {
    return this.opts.callbackUrlFor ? this.scaled(20_000 + this.rand * 20_000) : this.scaled(2000 + this.rand * 3000);
  }

  private async poll(id: string, w: Waiting): Promise<void> {
    let task: TaskView;
    try {
      this.statusRequests++;
      task = w.endpoint === 'music' ? await this.service.musicDetail(w.taskId, this.opts.signal) : await this.service.status(w.taskId, this.opts.signal);
    } catch (err) {
      if (this.opts.signal.aborted) return;
      if (err instanceof ApiError && (err.status === 404 || err.status === 403)) {
        this.waiting.delete(id);
        this.move(id, 'submitted', 'failed', { last_error: `status of task ${w.taskId}: ${err.message}` });
        return;
      }
      w.failures++;
      this.schedule(id, w, Date.now() + Math.min(this.scaled(60_000), this.nextPollDelay() * 2 ** Math.min(w.failures, 5)));
      this.opts.emit({ type: 'warning', message: `job ${id}: status read failed (${errorText(err)}); will try again` });
      return;
    }
    w.failures = 0;
    if (task.status === 'finished') {
      this.waiting.delete(id);
      const workflow = w.model;
      let extracted;
      try {
        extracted = extractResults(task, w.endpoint, workflow);
      } catch (err) {
        this.move(id, 'submitted', 'failed', { last_error: `result not usable: ${errorText(err)}`, result: JSON.stringify(task) });
        return;
      }
      const expires = Date.now() + this.scaled(GENERATED_VALIDITY_MS);
      this.move(id, 'submitted', 'downloading', { result: JSON.stringify(task), finished_at: nowIso(), expires_at: expires }, () =>
        this.store.addFiles(id, [
          ...extracted.downloads.map((d) => ({ idx: d.idx, name: d.name, url: d.url, type: d.type, content_type: d.content_type, expected_size: d.expected_size, expires_at: expires })),
          ...extracted.texts.map((t) => ({ idx: t.idx, name: t.name, url: null, type: 'text', content_type: 'text/plain', expected_size: null, expires_at: null })),
        ]),
      );
      this.downloadHeap.push({ at: expires, id });
    } else if (task.status === 'failed') {
      this.waiting.delete(id);
      this.move(id, 'submitted', 'failed', { last_error: task.error_message ?? 'task failed (no message)', result: JSON.stringify(task), finished_at: nowIso() });
    } else {
      this.opts.emit({ type: 'progress', id, task_id: w.taskId, status: task.status, progress: task.progress ?? null });
      this.schedule(id, w, Date.now() + this.nextPollDelay());
    }
  }

  // ---- downloads ----

  /**
   * Start downloads, soonest-expiring first. Jobs that were `downloading` when
   * the run started are read from the store once; jobs that finish during the
   * run are queued in memory as they arrive (no query per download).
   */
  private fillDownloads(): number {
    if (!this.downloadsLoaded) {
      this.downloadsLoaded = true;
      for (const row of this.store.jobsIn('downloading')) this.downloadHeap.push({ at: row.expires_at ?? 0, id: row.id });
    }
    // Downloads wait on the disk (fsync) more than on the network: twice the submit slots.
    while (this.downloading.size < this.opts.concurrency * 2) {
      const next = this.downloadHeap.pop();
      if (!next) break;
      const row = this.store.getJob(next.id);
      if (!row || row.state !== 'downloading') continue;
      this.downloading.add(row.id);
      void this.downloadJob(row)
        .catch((err: unknown) => this.opts.emit({ type: 'warning', message: `job ${row.id}: ${errorText(err)}` }))
        .finally(() => {
          this.downloading.delete(row.id);
          this.wake();
        });
    }
    return Infinity;
  }

  private async downloadJob(row: JobRow): Promise<void> {
    try {
      const finished = await fetchJob(row, { store: this.store, download: this.download, outDir: this.opts.outDir, signal: this.opts.signal, emit: this.opts.emit });
      // The files are recorded in the same transaction as the state change (one per job).
      if (finished) {
        this.move(row.id, 'downloading', 'done', {}, finished);
        this.rescanPending(row.id);
      }
    } catch (err) {
      if (this.opts.signal.aborted) return;
      if (this.download.isGone(err)) {
        this.move(row.id, 'downloading', 'expired', { last_error: `results no longer available: ${errorText(err)}` });
      } else if (err instanceof UnsafeResultError) {
        this.move(row.id, 'downloading', 'failed', { last_error: err.message });
      } else {
        // The client's retry layer already retried; the job stays `downloading` for the next run.
        this.store.noteError(row.id, `download failed: ${errorText(err)}`);
        this.opts.emit({ type: 'warning', message: `job ${row.id}: download failed (${errorText(err)}); left for the next run` });
      }
    }
  }
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
