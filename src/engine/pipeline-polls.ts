import { decide, TokenBucket } from '../client/index.js';
import { ApiError, DeadlineError, UnusableAnswerError } from '../errors.js';
import { nowIso } from '../store/index.js';
import { PipelineDownloads } from './pipeline-downloads.js';
import { errorText, type Waiting } from './pipeline-state.js';
import type { TaskView } from './ports.js';
import { chanceFinished } from './poll-order.js';
import { extractResults } from './results.js';

const GENERATED_VALIDITY_MS = 24 * 3600 * 1000;
/**
 * Status reads that fail in a row, the last one not transient (an answer that is not the API's
 * shape, too large or nested too deep, a 400 or 401) or cut at the request deadline (a server that
 * keeps every read open): then the job is no longer waited on in this run and
 * stays `submitted` for the next one. Transient failures (429, 5xx, network) are tried again for as long as
 * the run lasts. Once its task is older than its results can live (24 h after submit), such a job is `failed`.
 */
const POLL_GIVE_UP = 5;

/**
 * Polls. Waited-on tasks sit in a min-heap by due time; once due they are ready, and each status read
 * (at most `statusRate` per second, a token bucket) goes to the ready task most likely finished by now
 * (poll-order.ts), so under a tight cap the reads are spent where results are.
 */
export class PipelinePolls extends PipelineDownloads {
  /** Due tasks waiting for a status read, in the order they became due. */
  private readonly ready = new Map<string, Waiting>();
  /** Due tasks a callback named: read before any other. */
  private readonly urgent = new Map<string, Waiting>();
  private readonly reads = new TokenBucket(this.opts.statusRate ?? 10 / this.opts.timeScale);
  /** A token taken for the next read (from a wait on the bucket), not yet used. */
  private tokenHeld = false;
  private tokenWait = false;

  // ---- polls ----

  /** Start the reads the cap allows now; returns when the next task is due (ms epoch). */
  protected fillPolls(): number {
    const now = Date.now();
    for (let top = this.due.peek(); top && top.at <= now; top = this.due.peek()) {
      this.due.pop();
      const w = this.waiting.get(top.id);
      if (w && w.dueAt === top.at) (w.notified ? this.urgent : this.ready).set(top.id, w); // else a stale entry
    }
    const cap = Math.max(4, this.opts.concurrency * 2);
    while (this.ready.size + this.urgent.size > 0 && this.pollsInFlight < cap) {
      if (!this.tokenHeld) {
        if (!this.reads.tryTake()) {
          this.waitForToken();
          break;
        }
        this.tokenHeld = true;
      }
      const id = this.mostLikelyFinished(now);
      if (id === null) break; // only stale entries were left: the token is kept for the next read
      this.tokenHeld = false;
      const w = this.waiting.get(id)!;
      this.ready.delete(id);
      this.urgent.delete(id);
      w.dueAt = Infinity;
      this.pollsInFlight++;
      void this.poll(id, w)
        .catch((err: unknown) => this.opts.emit({ type: 'warning', message: `job ${id}: ${errorText(err)}` }))
        .finally(() => {
          this.pollsInFlight--;
          this.wake();
        });
    }
    return this.due.peek()?.at ?? Infinity;
  }

  /**
   * The due task to read next: one a callback named, else the one most likely finished; ties go to the one
   * due longest, so the scan stops at the first task surely finished.
   */
  private mostLikelyFinished(now: number): string | null {
    for (const [id, w] of this.urgent) {
      if (this.waiting.get(id) === w && w.dueAt !== Infinity) return id;
      this.urgent.delete(id); // stale
    }
    let best: string | null = null;
    let bestScore = -1;
    for (const [id, w] of this.ready) {
      if (this.waiting.get(id) !== w || w.dueAt === Infinity) {
        this.ready.delete(id); // stale
        continue;
      }
      const score = chanceFinished(now - w.sentAt, w.runningAt, w.typicalMs);
      if (score > bestScore) {
        best = id;
        bestScore = score;
        if (score >= 1) break;
      }
    }
    return best;
  }

  /** No token now: take the next one when it comes, and run the loop then. */
  private waitForToken(): void {
    if (this.tokenWait) return;
    this.tokenWait = true;
    this.reads.take(this.opts.signal).then(
      () => {
        this.tokenWait = false;
        this.tokenHeld = true;
        this.wake();
      },
      () => {
        this.tokenWait = false;
      },
    );
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
    const readAt = Date.now();
    w.notified = false;
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
      if (w.failures >= POLL_GIVE_UP && (decide(err, 'GET') === 'fail' || err instanceof UnusableAnswerError || err instanceof DeadlineError)) {
        this.waiting.delete(id);
        this.store.noteError(id, `status read failed ${w.failures} times: ${errorText(err)}`);
        this.opts.emit({ type: 'warning', message: `job ${id}: status read failed ${w.failures} times in a row (${errorText(err)}); left submitted for the next run` });
        return;
      }
      this.schedule(id, w, Date.now() + Math.min(this.scaled(60_000), this.nextPollDelay() * 2 ** Math.min(w.failures, 5)));
      this.opts.emit({ type: 'warning', message: `job ${id}: status read failed (${errorText(err)}); will try again` });
      return;
    }
    if (this.waiting.get(id) !== w) return; // settled meanwhile
    w.failures = 0;
    if (task.status === 'finished' || task.status === 'failed') this.settle(id, w, task);
    else {
      w.runningAt = readAt - w.sentAt;
      this.opts.emit({ type: 'progress', id, task_id: w.taskId, status: task.status, progress: task.progress ?? null });
      // A callback that came during this read may have come after the service answered: read again at once.
      this.schedule(id, w, w.notified ? Date.now() : Date.now() + this.nextPollDelay());
    }
  }

  /** The task of a waited-on job ended (a status read, or a completion callback carrying the task): record it. */
  protected settle(id: string, w: Waiting, task: TaskView): void {
    this.waiting.delete(id);
    this.ready.delete(id);
    this.urgent.delete(id);
    if (task.status === 'failed') {
      this.move(id, 'submitted', 'failed', { last_error: task.error_message ?? 'task failed (no message)', result: JSON.stringify(task), finished_at: nowIso() });
      return;
    }
    let extracted;
    try {
      extracted = extractResults(task, w.endpoint, w.model);
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
  }
}
