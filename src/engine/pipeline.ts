import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { basename, join, relative } from 'node:path';
import { AmbiguousSubmitError, ApiError, GenbatchError, NetworkError, UnsafeResultError } from '../errors.js';
import { findModel } from '../models/index.js';
import { nowIso, type JobRow, type JobState, type Store } from '../store/index.js';
import type { EngineEvent, StopReason } from './events.js';
import { writeFileAtomic } from './files.js';
import type { DownloadPort, ServicePort, TaskView } from './ports.js';
import { extractResults, setAtPath, sha256Hex } from './results.js';
import type { StoredSpec } from './spec.js';

/**
 * The work loop. One pass of `tick()` starts whatever has capacity:
 *   submits   pending jobs read from the store in manifest order, at most
 *             `concurrency` POSTs in flight and `maxActive` tasks being waited on;
 *   polls     each waited-on task at its own due time (first not before the
 *             model's typical minimum, then every 2-5 s with jitter), at most
 *             `statusPerSecond` status reads per second;
 *   downloads jobs whose task finished, soonest-expiring first.
 * Every state change goes through store.transition. All durations are
 * multiplied by `timeScale` (1 against the real service).
 */
export interface PipelineOptions {
  outDir: string;
  concurrency: number;
  maxActive: number;
  timeScale: number;
  statusPerSecond: number;
  signal: AbortSignal;
  emit: (e: EngineEvent) => void;
  /** Callback URL for submits (the job id is added as a query parameter), or null. */
  callbackUrl: string | null;
  /** Uploads younger than this are reused (72 h minus a margin). */
  uploadMaxAgeMs: number;
  random?: () => number;
}

interface Waiting {
  taskId: string;
  model: string;
  endpoint: 'status' | 'music';
  dueAt: number;
  failures: number;
}

const GENERATED_VALIDITY_MS = 24 * 3600 * 1000;

export class Pipeline {
  private readonly waiting = new Map<string, Waiting>();
  private submitsInFlight = 0;
  private pollsInFlight = 0;
  private readonly downloading = new Set<string>();
  /** Jobs whose download failed after the client's retries: left `downloading` for the next run. */
  private readonly downloadGaveUp = new Set<string>();
  private buffer: JobRow[] = [];
  private cursor = 0;
  private pendingExhausted = false;
  private downloadsDirty = true;
  private downloadsEmpty = false;
  private lastPollAt = 0;
  private wakeUp: (() => void) | null = null;
  private readonly uploadsInFlight = new Map<string, Promise<string>>();
  stopReason: StopReason | null = null;
  statusRequests = 0;

  constructor(
    private readonly store: Store,
    private readonly service: ServicePort,
    private readonly download: DownloadPort,
    private readonly opts: PipelineOptions,
  ) {}

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

  private stop(reason: StopReason): void {
    if (this.stopReason) return;
    this.stopReason = reason;
    this.opts.emit({ type: 'stopping', reason });
  }

  private move(id: string, from: JobState, to: JobState, patch: Parameters<Store['transition']>[3] = {}, also?: () => void, durable = false): void {
    const apply = () => this.store.transition(id, from, to, patch, also);
    if (durable) this.store.durable(apply);
    else apply();
    this.opts.emit({ type: 'job', id, from, to, task_id: patch.task_id ?? null, error: patch.last_error ?? null });
  }

  async run(): Promise<void> {
    // Resume: tasks already at the service are polled again (spread over one poll interval).
    for (const row of this.store.jobsIn('submitted')) {
      if (!row.task_id) continue;
      const spec = findModel(row.model);
      this.waiting.set(row.id, { taskId: row.task_id, model: row.model, endpoint: spec?.resultEndpoint ?? 'status', dueAt: Date.now() + this.rand * this.scaled(2000), failures: 0 });
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
          if (submitsDone && this.waiting.size === 0 && this.downloadsEmpty && !this.downloadsDirty) break;
        }
        await new Promise<void>((resolve) => {
          this.wakeUp = resolve;
          if (Number.isFinite(nextDue)) setTimeout(this.wake, Math.max(1, nextDue - Date.now()));
        });
      }
    } finally {
      this.opts.signal.removeEventListener('abort', onAbort);
    }
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
      this.submitsInFlight++;
      void this.submitJob(row)
        .catch((err: unknown) => this.opts.emit({ type: 'warning', message: `job ${row.id}: ${errorText(err)}` }))
        .finally(() => {
          this.submitsInFlight--;
          this.wake();
        });
    }
  }

  private async submitJob(row: JobRow): Promise<void> {
    const spec = JSON.parse(row.spec) as StoredSpec;
    const input = structuredClone(spec.input);
    try {
      for (const ref of spec.refs) setAtPath(input, ref.path, await this.uploadRef(ref.file, ref.sha256));
    } catch (err) {
      if (this.opts.signal.aborted) return;
      if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429 && err.status !== 402) {
        this.move(row.id, 'pending', 'failed', { last_error: `upload refused: ${err.message}` });
      } else {
        this.store.noteError(row.id, `upload failed: ${errorText(err)}`);
        this.opts.emit({ type: 'warning', message: `job ${row.id}: upload failed, left pending: ${errorText(err)}` });
      }
      return;
    }
    if (this.stopReason || this.opts.signal.aborted) return;
    const body: { model: string; input: Record<string, unknown>; callback_url?: string } = { model: spec.model, input };
    if (this.opts.callbackUrl) body.callback_url = withJobId(this.opts.callbackUrl, row.id);
    else if (spec.callback_url) body.callback_url = spec.callback_url;
    // The intent is fsynced before the POST: a crash after this point leaves `submitting`, which a rerun turns into `uncertain`.
    this.move(row.id, 'pending', 'submitting', { attemptsInc: 1, submitted_input: JSON.stringify(input), submitted_at: nowIso(), last_error: null }, undefined, true);
    let taskId: string;
    try {
      taskId = (await this.service.submit(body)).task_id;
    } catch (err) {
      this.submitFailed(row.id, err);
      return;
    }
    this.move(row.id, 'submitting', 'submitted', { task_id: taskId }, undefined, true);
    const model = findModel(spec.model);
    const first = (model?.typicalSeconds[0] ?? 15) * 1000;
    this.waiting.set(row.id, { taskId, model: spec.model, endpoint: model?.resultEndpoint ?? 'status', dueAt: Date.now() + this.scaled(first), failures: 0 });
  }

  private submitFailed(id: string, err: unknown): void {
    if (err instanceof AmbiguousSubmitError) {
      this.move(id, 'submitting', 'uncertain', { last_error: err.message });
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
    }
  }

  private uploadRef(file: string, sha: string): Promise<string> {
    const known = this.store.findUpload(sha, this.opts.uploadMaxAgeMs);
    if (known) {
      this.opts.emit({ type: 'upload', file, sha256: sha, url: known, reused: true });
      return Promise.resolve(known);
    }
    let p = this.uploadsInFlight.get(sha);
    if (!p) {
      p = (async () => {
        // The content may have changed since validation: upload only bytes whose hash we recorded.
        const now = await hashFile(file);
        if (now !== sha) throw new GenbatchError('GB_INPUT_CHANGED', `${file} changed since the manifest was checked; rerun`);
        const res = await this.service.uploadStream(file, { fileName: basename(file), signal: this.opts.signal });
        this.store.recordUpload(sha, res.file_url);
        this.opts.emit({ type: 'upload', file, sha256: sha, url: res.file_url, reused: false });
        return res.file_url;
      })().finally(() => this.uploadsInFlight.delete(sha));
      this.uploadsInFlight.set(sha, p);
    }
    return p;
  }

  // ---- polls ----

  /** Start due polls; returns when the next one is due (ms epoch). */
  private fillPolls(): number {
    const now = Date.now();
    const gap = 1000 / this.opts.statusPerSecond;
    const cap = Math.max(4, this.opts.concurrency * 2);
    let next = Infinity;
    for (const [id, w] of this.waiting) {
      if (w.dueAt === Infinity) continue; // in flight
      if (w.dueAt > now || this.pollsInFlight >= cap) {
        next = Math.min(next, Math.max(w.dueAt, now + 1));
        continue;
      }
      if (now - this.lastPollAt < gap) {
        next = Math.min(next, this.lastPollAt + gap);
        break;
      }
      this.lastPollAt = now;
      w.dueAt = Infinity;
      this.pollsInFlight++;
      void this.poll(id, w)
        .catch((err: unknown) => this.opts.emit({ type: 'warning', message: `job ${id}: ${errorText(err)}` }))
        .finally(() => {
          this.pollsInFlight--;
          this.wake();
        });
    }
    return next;
  }

  private nextPollDelay(): number {
    return this.scaled(2000 + this.rand * 3000);
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
      w.dueAt = Date.now() + Math.min(this.scaled(60_000), this.nextPollDelay() * 2 ** Math.min(w.failures, 5));
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
      this.downloadsDirty = true;
    } else if (task.status === 'failed') {
      this.waiting.delete(id);
      this.move(id, 'submitted', 'failed', { last_error: task.error_message ?? 'task failed (no message)', result: JSON.stringify(task), finished_at: nowIso() });
    } else {
      this.opts.emit({ type: 'progress', id, task_id: w.taskId, status: task.status, progress: task.progress ?? null });
      w.dueAt = Date.now() + this.nextPollDelay();
    }
  }

  // ---- downloads ----

  private fillDownloads(): number {
    const free = this.opts.concurrency - this.downloading.size;
    if (free <= 0 || !this.downloadsDirty) return Infinity;
    const blocked = new Set<string>([...this.downloading, ...this.downloadGaveUp]);
    const rows = this.store.downloadQueue(free, blocked);
    this.downloadsDirty = false;
    this.downloadsEmpty = rows.length === 0 && this.downloading.size === 0;
    for (const row of rows) {
      this.downloading.add(row.id);
      void this.downloadJob(row)
        .catch((err: unknown) => this.opts.emit({ type: 'warning', message: `job ${row.id}: ${errorText(err)}` }))
        .finally(() => {
          this.downloading.delete(row.id);
          this.downloadsDirty = true;
          this.wake();
        });
    }
    return Infinity;
  }

  private jobDir(id: string): string {
    return join(this.opts.outDir, this.download.sanitizeName(id));
  }

  private async downloadJob(row: JobRow): Promise<void> {
    const jobDir = this.jobDir(row.id);
    const task = JSON.parse(row.result ?? '{}') as TaskView;
    const model = findModel(row.model);
    let texts: Map<number, string> | null = null;
    try {
      for (const f of this.store.filesOf(row.id)) {
        if (f.state === 'done') continue;
        if (this.opts.signal.aborted) return;
        if (f.url === null) {
          texts ??= new Map(extractResults(task, model?.resultEndpoint ?? 'status', row.model).texts.map((t) => [t.idx, t.text]));
          const text = texts.get(f.idx) ?? '';
          const name = this.download.sanitizeName(f.name);
          writeFileAtomic(join(jobDir, name), text);
          this.store.fileDone(row.id, f.idx, { path: relative(this.opts.outDir, join(jobDir, name)), size: Buffer.byteLength(text), sha256: sha256Hex(text), content_type: 'text/plain' });
          continue;
        }
        const got = await this.download.downloadFile({ url: f.url, dir: jobDir, name: f.name, expectedSize: f.expected_size ?? undefined, signal: this.opts.signal });
        const rel = relative(this.opts.outDir, got.path);
        this.store.fileDone(row.id, f.idx, { path: rel, size: got.size, sha256: got.sha256, content_type: got.contentType });
        this.opts.emit({ type: 'file', id: row.id, path: rel, size: got.size, sha256: got.sha256 });
      }
    } catch (err) {
      if (this.opts.signal.aborted) return;
      if (this.download.isGone(err)) {
        this.move(row.id, 'downloading', 'expired', { last_error: `results no longer available: ${errorText(err)}` });
      } else if (err instanceof UnsafeResultError) {
        this.move(row.id, 'downloading', 'failed', { last_error: err.message });
      } else {
        // The client's retry layer already retried; the job stays `downloading` for the next run.
        this.downloadGaveUp.add(row.id);
        this.store.noteError(row.id, `download failed: ${errorText(err)}`);
        this.opts.emit({ type: 'warning', message: `job ${row.id}: download failed (${errorText(err)}); left for the next run` });
      }
      return;
    }
    const files = this.store.filesOf(row.id);
    const result = {
      job_id: row.id,
      task_id: row.task_id,
      model: row.model,
      input: row.submitted_input ? (JSON.parse(row.submitted_input) as unknown) : null,
      finished_at: row.finished_at,
      files: files.map((f) => ({ name: f.name, path: f.path, size: f.size, sha256: f.sha256, type: f.type, content_type: f.content_type, url: f.url })),
    };
    writeFileAtomic(join(jobDir, 'result.json'), JSON.stringify(result, null, 2) + '\n');
    this.move(row.id, 'downloading', 'done', {});
  }
}

export function withJobId(callbackUrl: string, jobId: string): string {
  const u = new URL(callbackUrl);
  u.searchParams.set('job', jobId);
  return u.toString();
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export function hashFile(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const h = createHash('sha256');
    createReadStream(file)
      .on('data', (c) => h.update(c))
      .on('error', reject)
      .on('end', () => resolve(h.digest('hex')));
  });
}
