import type { JobPatch, JobState, MoveOptions, WorkStore } from '../../store/index.js';
import type { CallbackNote } from './receiver.js';
import type { StopReason } from '../events.js';
import { Callbacks, sentTime } from './callbacks.js';
import { errorText, type PipelineOptions, type StageContext } from './context.js';
import { Downloads } from './downloads.js';
import { Polls } from './polls.js';
import { Submits } from './submits.js';
import type { DownloadPort, ServicePort } from '../ports.js';

export { callbackDeadline } from './callbacks.js';
export { errorText } from './context.js';
export type { PipelineOptions } from './context.js';

/**
 * The work loop (the stages and what each does: context.ts). One pass starts whatever has
 * capacity (submits, then status reads, then downloads), renews this worker's leases and takes
 * over orphaned jobs when due (stores that need it: PostgreSQL), then sleeps until a stage wakes
 * it or the next due time. The run ends when nothing is in flight and nothing is left to send,
 * wait on or download (with callbacks on, after a grace for late callbacks of uncertain jobs).
 */
export class Pipeline {
  private readonly ctx: Context;
  private readonly submits: Submits;
  private readonly polls: Polls;
  private readonly downloads: Downloads;
  private readonly callbacks: Callbacks;
  private graceUntil = 0;
  /** With opts.keepWaiting: when this idle worker looks for work next (0: not idle). */
  private idleUntil = 0;
  private beatAt = Infinity;
  private takeOverAt = Infinity;

  constructor(
    private readonly store: WorkStore,
    service: ServicePort,
    download: DownloadPort,
    private readonly opts: PipelineOptions,
  ) {
    const ctx = (this.ctx = new Context(store, opts));
    if (opts.cap) opts.cap.wake = ctx.wake;
    this.downloads = new Downloads(ctx, download, () => this.submits.finished());
    this.polls = new Polls(ctx, service, this.downloads, (id) => this.callbacks.disowned(id));
    this.callbacks = new Callbacks(ctx, this.polls, (id) => this.submits.inSubmit(id));
    this.submits = new Submits(ctx, service, download, () => this.polls.size, {
      sent: (id, taskId, model, sentAt) => this.polls.waitOn(id, taskId, model, sentAt),
      uncertain: (id) => this.callbacks.uncertain(id),
      ended: (id) => this.callbacks.submitEnded(id),
    });
  }

  /** Why the run stopped sending, or null. */
  get stopReason(): StopReason | null {
    return this.ctx.stopReason;
  }

  /** Status reads sent in this run. */
  get statusRequests(): number {
    return this.polls.statusRequests;
  }

  /** Completion callbacks ignored: another task than the job's recorded one, an earlier attempt, or no job of this run. */
  get callbacksIgnored(): number {
    return this.callbacks.ignored;
  }

  /** POSTs sent in this run (the balance is read again afterwards only when > 0). */
  /** for_each jobs left pending because their children would go over the credit limit (exit 5, like a cap). */
  get heldByLimit(): ReadonlySet<string> {
    return this.submits.heldByLimit;
  }

  /** The last claim took no pending job because each would go over the credit limit (--max-credits, the budget). */
  get heldByBudget(): boolean {
    return this.submits.heldByBudget;
  }

  /** Jobs this run gave up on (left for a later run: see StageContext.giveUp). */
  get givenUp(): ReadonlySet<string> {
    return this.ctx.givenUp;
  }

  get submitsSent(): number {
    return this.submits.submitsSent;
  }

  /** A completion callback (see Callbacks.onCallback); one that comes before the run took over its jobs is handled once it has. */
  onCallback(note: CallbackNote): void {
    if (this.early) this.early.push(note);
    else this.callbacks.onCallback(note);
  }

  /** Callbacks that came before run() took over the jobs it resumes, in order of arrival; null after. */
  private early: CallbackNote[] | null = [];

  async run(): Promise<void> {
    const { ctx, store, opts } = this;
    ctx.graphOn = await store.hasGraph();
    await this.takeOver();
    for (const note of this.early ?? []) this.callbacks.onCallback(note);
    this.early = null;
    const now = Date.now();
    if (store.heartbeatMs !== null) this.beatAt = now + store.heartbeatMs;
    if (store.takeOverMs !== null) this.takeOverAt = now + store.takeOverMs;
    const onAbort = () => {
      ctx.stop('signal');
      ctx.wake();
    };
    opts.signal.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        if (store.leaseLost) ctx.stop('lease-lost');
        const stopping = opts.signal.aborted || ctx.stopReason === 'lease-lost';
        let nextDue = Infinity;
        if (!stopping) {
          await this.submits.fill();
          nextDue = Math.min(this.polls.fill(), await this.downloads.fill(), await this.leases());
          if (opts.cap) nextDue = Math.min(nextDue, opts.cap.tick(Date.now()));
        }
        const busy = this.submits.busy + this.polls.busy + this.downloads.busy + this.callbacks.busy + (opts.cap?.busy ?? 0);
        if (busy === 0) {
          if (stopping) break;
          if (this.submits.done && this.polls.size === 0 && this.downloads.queued === 0) {
            if (opts.keepWaiting && !ctx.stopReason) {
              // A worker on a shared run: look for work again a while later, as long as the caller wants.
              if (this.idleUntil === 0) this.idleUntil = Date.now() + (opts.idleMs ?? 1000);
              else if (Date.now() >= this.idleUntil) {
                this.idleUntil = 0;
                if (!(await opts.keepWaiting())) break;
                await this.takeOver();
                this.submits.lookAgain();
                continue;
              }
              nextDue = Math.min(nextDue, this.idleUntil);
            } else {
              // With callbacks on, wait a while for late callbacks of this run's uncertain jobs.
              if (!this.callbacks.waitForLate || ctx.stopReason) break;
              if (this.graceUntil === 0) this.graceUntil = await this.callbacks.graceEnd();
              if (Date.now() >= this.graceUntil) break;
              nextDue = Math.min(nextDue, this.graceUntil);
            }
          }
        }
        await ctx.sleep(nextDue);
      }
    } finally {
      ctx.clearTimer();
      opts.signal.removeEventListener('abort', onAbort);
      await this.submits.close();
    }
  }

  /**
   * Jobs whose task is at the service and that this worker now holds (at the start: the ones a stopped
   * run left; later, with PostgreSQL, a dead worker's): submitted ones are waited on, downloading ones queued.
   */
  private async takeOver(): Promise<void> {
    const t = await this.store.takeOver([...this.ctx.givenUp]);
    for (const m of t.moves) {
      this.opts.emit({ type: 'job', id: m.id, from: m.from, to: m.to, task_id: null, error: m.error });
      if (m.to === 'uncertain') this.callbacks.uncertain(m.id);
    }
    const now = Date.now();
    for (const row of t.submitted) {
      if (!row.task_id) continue;
      this.opts.cap?.adopt(row.id);
      this.polls.resume(row.id, row.task_id, row.model, sentTime(row.submitted_at, now));
    }
    for (const row of t.downloading) await this.downloads.takeOver(row.id, row.expires_at);
  }

  /** Heartbeat and take over when due (stores with leases per job); returns when next due (ms epoch). */
  private async leases(): Promise<number> {
    const now = Date.now();
    const { heartbeatMs, takeOverMs } = this.store;
    try {
      if (heartbeatMs !== null && now >= this.beatAt) {
        this.beatAt = now + heartbeatMs;
        await this.store.heartbeat();
      }
      if (takeOverMs !== null && now >= this.takeOverAt) {
        this.takeOverAt = now + takeOverMs;
        await this.takeOver();
      }
    } catch (err) {
      this.opts.emit({ type: 'warning', message: `the store's leases: ${errorText(err)}; tried again` });
    }
    return Math.min(this.beatAt, this.takeOverAt);
  }
}

/** StageContext of one run, and the loop's sleep: woken by a stage, or by one timer at the earliest due time asked for. */
class Context implements StageContext {
  stopReason: StopReason | null = null;
  graphOn = false;
  private wakeUp: (() => void) | null = null;
  /** A wake came while the loop was not asleep: its next sleep returns at once. */
  private woken = false;
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;

  constructor(
    readonly store: WorkStore,
    readonly opts: PipelineOptions,
  ) {}

  async move(id: string, from: JobState, to: JobState, patch: JobPatch = {}, o?: MoveOptions): Promise<boolean> {
    const r = await this.store.transition(id, from, to, patch, o);
    if (!r.moved) {
      this.opts.emit({ type: 'warning', message: `job ${id}: another worker holds it now (this worker's lease ran out); left to that worker` });
      // Not this process's to wait for any more (its reservation ends with a later reading of any worker).
      this.opts.cap?.forget(id);
      return false;
    }
    this.opts.emit({ type: 'job', id, from, to, task_id: patch.task_id ?? null, error: patch.last_error ?? null });
    this.opts.cap?.moved(id, from, to);
    for (const m of r.side) this.opts.emit({ type: 'job', id: m.id, from: m.from, to: m.to, task_id: null, error: m.error });
    return true;
  }

  stop(reason: StopReason): void {
    if (this.stopReason) return;
    this.stopReason = reason;
    this.opts.emit({ type: 'stopping', reason });
  }

  wake = (): void => {
    const w = this.wakeUp;
    this.wakeUp = null;
    if (w) w();
    else this.woken = true;
  };

  scaled(ms: number): number {
    return ms * this.opts.timeScale;
  }

  rand(): number {
    return (this.opts.random ?? Math.random)();
  }

  warn(id: string, err: unknown): void {
    this.opts.emit({ type: 'warning', message: `job ${id}: ${errorText(err)}` });
  }

  readonly givenUp = new Set<string>();

  async giveUp(id: string): Promise<void> {
    this.givenUp.add(id);
    this.opts.cap?.forget(id);
    await this.store.dropLeases([id]);
  }

  /** Until a wake, or until `at` (ms epoch). */
  async sleep(at: number): Promise<void> {
    if (this.woken) {
      this.woken = false;
      return;
    }
    this.armTimer(at);
    await new Promise<void>((resolve) => {
      this.wakeUp = resolve;
    });
    this.woken = false;
  }

  clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerAt = Infinity;
  }

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
}
