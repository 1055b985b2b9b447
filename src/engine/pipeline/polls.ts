import { decide, TokenBucket } from '../../client/index.js';
import { ApiError, DeadlineError, UnusableAnswerError, serverText } from '../../errors.js';
import { MinHeap } from '../../lib/heap.js';
import { findModel } from '../../models/index.js';
import { nowIso } from '../../store/index.js';
import { errorText, type StageContext } from './context.js';
import type { ServicePort, TaskView } from '../ports.js';
import { isRefusedTask } from '../submit/permanent.js';
import { chanceFinished } from './poll-order.js';
import { extractResults } from '../results.js';

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
 * The total time a job's status reads may spend cut at the request deadline (a status endpoint that drips or
 * holds every answer open), counted from read start to the error, until a usable answer: 5 min (x time scale).
 * Past it the job ends `failed` with the reason. The read that crosses it ends first, and each read is cut at
 * most 3 times (retry.ts), so the whole is at most 5 min + 3 request deadlines and their backoff (about 8 min at
 * the default 60 s), where before each read was cut 8 times and 5 such reads left the job `submitted` (~40 min).
 */
export const DEADLINE_CUTS_MS = 5 * 60_000;

/** A task being waited on. */
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
  /** Time (ms) its status reads spent cut at the request deadline since the last usable answer. */
  cutMs: number;
  /** Adopted from a completion callback and not yet read: the callback may be a forgery naming any task. */
  adopted?: boolean;
}

/**
 * Polls: the tasks this run waits on. They sit in a min-heap by due time; once due they are ready,
 * and each status read (at most `statusRate` per second, a token bucket, and a permit of the store)
 * goes to the ready task most likely finished by now (poll-order.ts), so under a tight cap the reads
 * are spent where results are. A task that ended is recorded (`submitted -> downloading`, its file
 * rows with it) and handed to `downloads`.
 */
/** A due task waiting longer than this for a status-read token: the rate holds the run (see noteRateHold). */
const RATE_HOLD_MS = 2000;

export class Polls {
  private readonly waiting = new Map<string, Waiting>();
  private readonly due = new MinHeap<{ at: number; id: string }>();
  /** Due tasks waiting for a status read, in the order they became due. */
  private readonly ready = new Map<string, Waiting>();
  /** Due tasks a callback named: read before any other. */
  private readonly urgent = new Map<string, Waiting>();
  private readonly reads: TokenBucket;
  /** A token taken for the next read (from a wait on the bucket), not yet used. */
  private tokenHeld = false;
  private tokenWait = false;
  /** The status-read rate holds the run now (a `wait` event said so). */
  private rateHold = false;
  private inFlight = 0;
  /** Status reads sent in this run. */
  statusRequests = 0;

  constructor(
    private readonly c: StageContext,
    private readonly service: ServicePort,
    private readonly downloads: { add(id: string, expiresAt: number | null): void },
    /** An adopted task the service does not know for this account: its job is uncertain again (Callbacks.disowned). */
    private readonly disowned: (id: string) => void = () => undefined,
  ) {
    this.reads = new TokenBucket(c.opts.statusRate ?? 10 / c.opts.timeScale);
  }

  /** Tasks waited on. */
  get size(): number {
    return this.waiting.size;
  }

  /** Reads in flight (an ended task is recorded before its read counts as done). */
  get busy(): number {
    return this.inFlight;
  }

  /** Wait on a task sent at `sentAt` (ms epoch): first read at `firstAt`, or by default not before its model's typical minimum (with callbacks on, its typical maximum). */
  waitOn(id: string, taskId: string, model: string, sentAt: number, firstAt?: number): Waiting {
    const spec = findModel(model);
    const [min, max] = spec?.typicalSeconds ?? [15, 60];
    const typicalMs: [number, number] = [this.c.scaled(min * 1000), this.c.scaled(max * 1000)];
    const w: Waiting = { taskId, model, endpoint: spec?.resultEndpoint ?? 'status', dueAt: 0, failures: 0, sentAt, runningAt: 0, typicalMs, notified: false, cutMs: 0 };
    this.waiting.set(id, w);
    this.schedule(id, w, firstAt ?? sentAt + (this.c.opts.callbackUrlFor ? typicalMs[1] : typicalMs[0]));
    return w;
  }

  /**
   * A task already at the service when this run took its job over (a resumed run, a dead worker's job): read
   * again from now or, when sent more recently, from its model's typical minimum, also with callbacks on (a
   * callback may have come while no run listened); the status-read cap spaces the reads, the ones most likely
   * finished first.
   */
  resume(id: string, taskId: string, model: string, sentAt: number): void {
    if (this.waiting.has(id)) return;
    const w = this.waitOn(id, taskId, model, sentAt);
    if (this.c.opts.callbackUrlFor) this.schedule(id, w, Math.max(Date.now(), sentAt + w.typicalMs[0]));
  }

  /**
   * A completion callback for job `id` naming `taskId`. A callback is a hint: the task is read next, before any
   * other (one read, whose answer alone is acted on; a read in flight is followed by another when it found the
   * task still running). 'read' when the job waits on that task, 'other-task' when it waits on another (the
   * callback is ignored), 'not-waited' when the job is not waited on here.
   */
  notify(id: string, taskId: string): 'read' | 'other-task' | 'not-waited' {
    const w = this.waiting.get(id);
    if (!w) return 'not-waited';
    if (w.taskId !== taskId) return 'other-task';
    w.notified = true;
    if (w.dueAt !== Infinity) this.schedule(id, w, Date.now()); // read next (one read confirms)
    this.c.wake();
    return 'read';
  }

  /** Read job `id` next when it waits on `taskId` (a callback for it came before its submit answered); false when it waits on another task. */
  readNow(id: string, taskId: string): boolean {
    const w = this.waiting.get(id);
    if (!w) return true;
    if (w.taskId !== taskId) return false;
    if (w.dueAt === Infinity) return true;
    w.notified = true;
    this.schedule(id, w, Date.now());
    this.c.wake();
    return true;
  }

  /** Start the reads the cap allows now; returns when the next task is due (ms epoch). */
  fill(): number {
    const now = Date.now();
    for (let top = this.due.peek(); top && top.at <= now; top = this.due.peek()) {
      this.due.pop();
      const w = this.waiting.get(top.id);
      if (w && w.dueAt === top.at) (w.notified ? this.urgent : this.ready).set(top.id, w); // else a stale entry
    }
    const cap = Math.max(4, this.c.opts.concurrency * 2);
    while (this.ready.size + this.urgent.size > 0 && this.inFlight < cap) {
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
      this.inFlight++;
      void this.poll(id, w)
        .catch((err: unknown) => this.c.warn(id, err))
        .finally(() => {
          this.inFlight--;
          this.c.wake();
        });
    }
    this.noteRateHold(now);
    return this.due.peek()?.at ?? Infinity;
  }

  /**
   * The status-read rate holds the run when the task due longest has waited more than RATE_HOLD_MS for a token:
   * a `wait` event then (the progress says `waiting for the status-read rate: ...`), and one with queued 0 once
   * no due task waits on it. The hold is judged on the oldest wait, so reads paced a token apart do not flicker.
   */
  private noteRateHold(now: number): void {
    const oldest = this.ready.values().next().value as Waiting | undefined;
    const waited = oldest && oldest.dueAt !== Infinity ? now - oldest.dueAt : 0;
    const hold = this.tokenWait && waited > RATE_HOLD_MS;
    if (hold === this.rateHold || (!hold && this.tokenWait && waited > RATE_HOLD_MS / 2)) return;
    this.rateHold = hold;
    const perS = (this.c.opts.statusRate ?? 10 / this.c.opts.timeScale) * this.c.opts.timeScale; // as --status-rate gives it: of the service's time
    this.c.opts.emit({ type: 'wait', what: 'status-rate', rule: `${+perS.toPrecision(3)} a second`, queued: hold ? this.ready.size + this.urgent.size : 0, next_in_ms: null });
  }

  private schedule(id: string, w: Waiting, at: number): void {
    w.dueAt = at;
    this.due.push({ at, id });
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
    this.reads.take(this.c.opts.signal).then(
      () => {
        this.tokenWait = false;
        this.tokenHeld = true;
        this.c.wake();
      },
      () => {
        this.tokenWait = false;
      },
    );
  }

  /** 2-5 s with jitter; with callbacks on, a slow fallback poll of 20-40 s. */
  private nextPollDelay(): number {
    return this.c.opts.callbackUrlFor ? this.c.scaled(20_000 + this.c.rand() * 20_000) : this.c.scaled(2000 + this.c.rand() * 3000);
  }

  /** The job's task was sent longer ago than its results can live (24 h x time scale). */
  private async pastResults(id: string): Promise<boolean> {
    const sent = Date.parse((await this.c.store.getJob(id))?.submitted_at ?? '');
    return Number.isFinite(sent) && Date.now() - sent > this.c.scaled(GENERATED_VALIDITY_MS);
  }

  private async poll(id: string, w: Waiting): Promise<void> {
    const { opts, store } = this.c;
    let task: TaskView;
    const readAt = Date.now();
    w.notified = false;
    try {
      await store.acquireStatusRead(opts.signal);
      this.statusRequests++;
      task = w.endpoint === 'music' ? await this.service.musicDetail(w.taskId, opts.signal) : await this.service.status(w.taskId, opts.signal);
    } catch (err) {
      if (opts.signal.aborted) return;
      if (err instanceof ApiError && (err.status === 404 || err.status === 403) && w.adopted === true) {
        // Only a forged callback names a task the service does not know for us: the job's own task (made, charged)
        // may still call back, so the job stays uncertain instead of failing (a rerun would send it again).
        this.waiting.delete(id);
        const why = `a completion callback named task ${w.taskId}, which is not this account's (status: ${err.message}); not adopted`;
        if (await this.c.move(id, 'submitted', 'uncertain', { task_id: null, last_error: why })) this.disowned(id);
        return;
      }
      if (err instanceof ApiError && (err.status === 404 || err.status === 403)) {
        this.waiting.delete(id);
        await this.c.move(id, 'submitted', 'failed', { last_error: `status of task ${w.taskId}: ${err.message}` });
        return;
      }
      w.failures++;
      if (err instanceof DeadlineError) w.cutMs += Date.now() - readAt;
      if (w.cutMs >= this.c.scaled(DEADLINE_CUTS_MS)) {
        this.waiting.delete(id);
        const total = `${+(w.cutMs / 1000).toFixed(1)} s`;
        await this.c.move(id, 'submitted', 'failed', { last_error: `status reads of task ${w.taskId} were cut at the request deadline for ${total} in all (the bound is ${+(this.c.scaled(DEADLINE_CUTS_MS) / 1000).toFixed(3)} s): ${errorText(err)}` });
        return;
      }
      if (w.failures >= POLL_GIVE_UP && (await this.pastResults(id))) {
        this.waiting.delete(id);
        await this.c.move(id, 'submitted', 'failed', { last_error: `no usable status of task ${w.taskId} within the 24 h its results live after submit: ${errorText(err)}` });
        return;
      }
      if (w.failures >= POLL_GIVE_UP && (decide(err, 'GET') === 'fail' || err instanceof UnusableAnswerError || err instanceof DeadlineError)) {
        this.waiting.delete(id);
        await store.noteError(id, `status read failed ${w.failures} times: ${errorText(err)}`);
        await this.c.giveUp(id);
        opts.emit({ type: 'warning', message: `job ${id}: status read failed ${w.failures} times in a row (${errorText(err)}); left submitted for the next run` });
        return;
      }
      this.schedule(id, w, Date.now() + Math.min(this.c.scaled(60_000), this.nextPollDelay() * 2 ** Math.min(w.failures, 5)));
      opts.emit({ type: 'warning', message: `job ${id}: status read failed (${errorText(err)}); will try again` });
      return;
    }
    if (this.waiting.get(id) !== w) return; // settled meanwhile
    w.adopted = false;
    w.failures = 0;
    w.cutMs = 0;
    if (task.status === 'finished' || task.status === 'failed') await this.settle(id, w, task);
    else {
      w.runningAt = readAt - w.sentAt;
      opts.emit({ type: 'progress', id, task_id: w.taskId, status: task.status, progress: task.progress ?? null });
      // A callback that came during this read may have come after the service answered: read again at once.
      this.schedule(id, w, w.notified ? Date.now() : Date.now() + this.nextPollDelay());
    }
  }

  /** The task of a waited-on job ended (its status read said so): record it. */
  private async settle(id: string, w: Waiting, task: TaskView): Promise<void> {
    this.waiting.delete(id);
    this.ready.delete(id);
    this.urgent.delete(id);
    if (task.status === 'failed') {
      await this.c.move(id, 'submitted', 'failed', { last_error: task.error_message === null ? 'task failed (no message)' : serverText(task.error_message), result: JSON.stringify(task), finished_at: nowIso(), permanent: isRefusedTask(task.error_message) ? 1 : 0 });
      return;
    }
    let extracted;
    try {
      extracted = extractResults(task, w.endpoint, w.model);
    } catch (err) {
      await this.c.move(id, 'submitted', 'failed', { last_error: `result not usable: ${errorText(err)}`, result: JSON.stringify(task) });
      return;
    }
    const expires = Date.now() + this.c.scaled(GENERATED_VALIDITY_MS);
    const files = [
      ...extracted.downloads.map((d) => ({ idx: d.idx, name: d.name, url: d.url, type: d.type, content_type: d.content_type, expected_size: d.expected_size, expires_at: expires })),
      ...extracted.texts.map((t) => ({ idx: t.idx, name: t.name, url: null, type: 'text', content_type: 'text/plain', expected_size: null, expires_at: null })),
    ];
    if (await this.c.move(id, 'submitted', 'downloading', { result: JSON.stringify(task), finished_at: nowIso(), expires_at: expires }, { addFiles: files })) this.downloads.add(id, expires);
  }
}
