import { AmbiguousSubmitError, ApiError, GenbatchError, NetworkError } from '../errors.js';
import { nowIso, type JobRow } from '../store/index.js';
import { runChatJob } from './chat.js';
import { PipelinePolls } from './pipeline-polls.js';
import { errorText } from './pipeline-state.js';
import { getAtPath, setAtPath } from './results.js';
import type { StoredSpec } from './spec.js';

/** How often a job whose upload failed transiently (client retries used up) is queued again in the same run. */
const UPLOAD_REQUEUES = 3;

/** Submits: pending jobs read from the store in manifest order, uploads, the POST and its outcome. */
export class PipelineSubmits extends PipelinePolls {
  // ---- submits ----

  protected fillSubmits(): void {
    while (!this.stopReason && !this.pendingExhausted && this.submitsInFlight < this.opts.concurrency && this.waiting.size + this.submitsInFlight < this.opts.maxActive) {
      if (this.buffer.length === 0) {
        // --only / --limit without a job graph: once every chosen job was handed out, the rest is not read.
        if (this.selected && !this.graphOn && this.handedOut >= this.selected.size) {
          this.pendingExhausted = true;
          return;
        }
        this.buffer = this.store.nextPending(this.cursor, 64);
        if (this.buffer.length === 0) {
          this.pendingExhausted = true;
          return;
        }
        this.cursor = this.buffer[this.buffer.length - 1]!.seq;
      }
      const row = this.buffer.shift()!;
      // Not chosen by --only / --limit: left pending for a later run.
      if (this.selected && !this.selected.has(row.id)) continue;
      if (this.graphOn && (this.claimed.has(row.id) || this.graphStep(row))) continue;
      if (this.selected && !this.uploadRetries.has(row.id)) this.handedOut++;
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

  protected async submitJob(queued: JobRow): Promise<void> {
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
        syncDir: (dir) => this.download.syncDir(dir),
        bucket: this.download.bucket,
      });
    }
    const spec = JSON.parse(row.spec) as StoredSpec;
    const input = structuredClone(spec.input);
    if (spec.seed !== undefined) input.seed = spec.seed;
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
    // The attempt this submit is (the intent below adds 1 to the stored count).
    if (this.opts.callbackUrlFor) body.callback_url = this.opts.callbackUrlFor(row.id, row.attempts + 1);
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
    const sentAt = Date.now();
    await this.moveDurable(row.id, 'submitting', 'submitted', { task_id: taskId });
    this.waitOn(row.id, taskId, spec.model, sentAt);
  }

  protected submitFailed(id: string, err: unknown): void {
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
}
