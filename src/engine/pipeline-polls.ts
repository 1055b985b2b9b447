import { decide } from '../client/index.js';
import { ApiError, UnusableAnswerError } from '../errors.js';
import { nowIso } from '../store/index.js';
import { PipelineDownloads } from './pipeline-downloads.js';
import { errorText, type Waiting } from './pipeline-state.js';
import type { TaskView } from './ports.js';
import { extractResults } from './results.js';

const GENERATED_VALIDITY_MS = 24 * 3600 * 1000;
/**
 * Status reads that fail in a row, the last one not transient (an answer that is not the contract's
 * shape, too large or nested too deep, a 400 or 401): then the job is no longer waited on in this run and
 * stays `submitted` for the next one. Transient failures (429, 5xx, network) are tried again for as long as
 * the run lasts. Once its task is older than its results can live (24 h after submit), such a job is `failed`.
 */
const POLL_GIVE_UP = 5;

/** Polls: each waited-on task read at its own due time, kept in a min-heap by due time. */
export class PipelinePolls extends PipelineDownloads {
  // ---- polls ----

  /** Start due polls; returns when the next one is due (ms epoch). */
  protected fillPolls(): number {
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
  protected nextPollDelay(): number {
    return this.opts.callbackUrlFor ? this.scaled(20_000 + this.rand * 20_000) : this.scaled(2000 + this.rand * 3000);
  }

  /** The job's task was sent longer ago than its results can live (24 h x time scale). */
  private pastResults(id: string): boolean {
    const sent = Date.parse(this.store.getJob(id)?.submitted_at ?? '');
    return Number.isFinite(sent) && Date.now() - sent > this.scaled(GENERATED_VALIDITY_MS);
  }

  protected async poll(id: string, w: Waiting): Promise<void> {
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
      if (w.failures >= POLL_GIVE_UP && this.pastResults(id)) {
        this.waiting.delete(id);
        this.move(id, 'submitted', 'failed', { last_error: `no usable status of task ${w.taskId} within the 24 h its results live after submit: ${errorText(err)}` });
        return;
      }
      if (w.failures >= POLL_GIVE_UP && (decide(err, 'GET') === 'fail' || err instanceof UnusableAnswerError)) {
        this.waiting.delete(id);
        this.store.noteError(id, `status read failed ${w.failures} times: ${errorText(err)}`);
        this.opts.emit({ type: 'warning', message: `job ${id}: status read failed ${w.failures} times in a row (${errorText(err)}); left submitted for the next run` });
        return;
      }
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
}
