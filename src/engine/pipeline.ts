import { findModel } from '../models/index.js';
import type { JobRow } from '../store/index.js';
import type { CallbackNote } from './callbacks.js';
import { PipelineSubmits } from './pipeline-submits.js';
import { errorText } from './pipeline-state.js';

export { errorText } from './pipeline-state.js';
export type { PipelineOptions } from './pipeline-state.js';

/** How long a run with callbacks waits, at the end, for late callbacks of its uncertain jobs (at least). */
const CALLBACK_GRACE_MS = 120_000;
/** The service's callback retries (after 1, 2 and 4 s): the time a finished task may still call back. */
const CALLBACK_RETRIES_MS = 10_000;

/**
 * When a task sent at `submittedAt` (ISO) for `model` has surely finished and called back: its
 * model's typical maximum time plus the callback retries (x time scale); null when unknown.
 */
export function callbackDeadline(submittedAt: string | null, model: string, timeScale: number): number | null {
  const at = submittedAt === null ? NaN : Date.parse(submittedAt);
  if (!Number.isFinite(at)) return null;
  return at + ((findModel(model)?.typicalSeconds[1] ?? 300) * 1000 + CALLBACK_RETRIES_MS) * timeScale;
}

/** When a stored job was sent (its `submitted_at`), or `fallback` when unknown. */
function sentTime(submittedAt: string | null, fallback: number): number {
  const at = submittedAt === null ? NaN : Date.parse(submittedAt);
  return Number.isFinite(at) ? at : fallback;
}

/** The coordinator: the work loop and callbacks; the parts are in pipeline-state.ts, pipeline-submits.ts, pipeline-polls.ts, pipeline-downloads.ts. */
export class Pipeline extends PipelineSubmits {
  async run(): Promise<void> {
    this.graphOn = this.store.graph.any();
    // Resume: tasks already at the service are read again from now (or, when sent more recently, from their model's
    // typical minimum, also with callbacks on: a callback may have come while no run listened); the status-read cap
    // spaces the reads, the ones most likely finished first.
    const now = Date.now();
    for (const row of this.store.jobsIn('submitted')) {
      if (!row.task_id) continue;
      const sentAt = sentTime(row.submitted_at, now);
      const w = this.waitOn(row.id, row.task_id, row.model, sentAt);
      if (this.opts.callbackUrlFor) this.schedule(row.id, w, Math.max(now, sentAt + w.typicalMs[0]));
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
        const busy = this.submitsInFlight + this.pollsInFlight + this.downloading.size + this.adopting;
        if (busy === 0) {
          if (stopping) break;
          const submitsDone = this.pendingExhausted || this.stopReason !== null;
          if (submitsDone && this.waiting.size === 0 && this.downloadHeap.size === 0 && this.downloadAgain.size === 0) {
            // With callbacks on, wait a while for late callbacks of this run's uncertain jobs.
            if (!this.opts.callbackUrlFor || this.uncertainHere.size === 0 || this.stopReason) break;
            if (this.graceUntil === 0) this.graceUntil = this.graceEnd();
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
   * The end of the wait for late callbacks: 120 s (x time scale) from now, or later when an uncertain
   * job's task may still be running (sent less than its model's typical maximum time ago).
   */
  private graceEnd(): number {
    let end = Date.now() + this.scaled(CALLBACK_GRACE_MS);
    for (const id of this.uncertainHere) {
      const row = this.store.getJob(id);
      const deadline = row ? callbackDeadline(row.submitted_at, row.model, this.opts.timeScale) : null;
      if (deadline !== null && deadline > end) end = deadline;
    }
    return end;
  }

  /**
   * Callbacks that came while their job was still `submitting` (a task can finish, and its
   * callback arrive, before the submit's answer): kept until that submit ends, so a lost
   * answer (uncertain) adopts the task the callback named instead of leaving the job uncertain.
   */
  private readonly early = new Map<string, string>();

  /**
   * A completion callback for `job`. A job being waited on with this task takes the
   * ended task the callback carries (status endpoint tasks: the body has the status
   * answer's shape), or, for music tasks (whose callbacks also come at earlier stages)
   * and bodies without a usable task, is read next, before any other (one status read
   * confirms); an uncertain job without a task id adopts the task (the job id and attempt in the
   * callback URL prove it came from our latest submit), then is read; a job still
   * `submitting` keeps the note for the end of its submit. Duplicates and late deliveries
   * find the job no longer waited on and change nothing.
   */
  onCallback(note: CallbackNote): void {
    const w = this.waiting.get(note.job);
    if (w) {
      if (w.taskId !== note.taskId) return;
      if (note.task && w.endpoint === 'status' && w.dueAt !== Infinity) {
        // The callback carries the ended task, as a status read would answer: no read is spent on it.
        this.settle(note.job, w, note.task);
        this.wake();
        return;
      }
      w.notified = true;
      if (w.dueAt !== Infinity) this.schedule(note.job, w, Date.now()); // read next (one read confirms)
      this.wake();
      return;
    }
    const row = this.store.getJob(note.job);
    if (!row || row.task_id !== null || this.opts.signal.aborted) return;
    // A callback of an earlier submit of this job (its URL names another attempt) names a task made for
    // an earlier spec or attempt: it never adopts. URLs without an attempt (older genbatch) still do.
    if (note.attempt !== null && note.attempt !== row.attempts) return;
    if (row.state === 'submitting') this.early.set(note.job, note.taskId);
    else if (row.state === 'uncertain') this.adopt(note.job, note.taskId, row.model);
  }

  protected override async submitJob(queued: JobRow): Promise<void> {
    await super.submitJob(queued);
    // The submit answered: a callback that came before it names the task now waited on, so it is read now.
    const taskId = this.early.get(queued.id);
    this.early.delete(queued.id);
    const w = this.waiting.get(queued.id);
    if (w && w.taskId === taskId && w.dueAt !== Infinity) {
      w.notified = true;
      this.schedule(queued.id, w, Date.now());
      this.wake();
    }
  }

  protected override submitFailed(id: string, err: unknown): void {
    super.submitFailed(id, err);
    const taskId = this.early.get(id);
    this.early.delete(id);
    const row = taskId === undefined ? undefined : this.store.getJob(id);
    if (row && taskId !== undefined && row.state === 'uncertain' && !this.opts.signal.aborted) this.adopt(id, taskId, row.model);
  }

  /** Adoptions whose commit is in flight: the run does not end before they are waited on. */
  private adopting = 0;

  private adopt(job: string, taskId: string, model: string): void {
    this.adopting++;
    void this.moveDurable(job, 'uncertain', 'submitted', { task_id: taskId, last_error: 'task adopted from a late completion callback' })
      .then(() => {
        this.uncertainHere.delete(job);
        const adopted = this.waitOn(job, taskId, model, sentTime(this.store.getJob(job)?.submitted_at ?? null, Date.now()), Date.now());
        adopted.notified = true;
      })
      .catch((err: unknown) => this.opts.emit({ type: 'warning', message: `callback for job ${job}: ${errorText(err)}` }))
      .finally(() => {
        this.adopting--;
        this.wake();
      });
  }
}
