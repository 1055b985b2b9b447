import { findModel } from '../../models/index.js';
import type { CallbackNote } from './receiver.js';
import { errorText, type StageContext } from './context.js';
import type { Polls } from './polls.js';

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
export function sentTime(submittedAt: string | null, fallback: number): number {
  const at = submittedAt === null ? NaN : Date.parse(submittedAt);
  return Number.isFinite(at) ? at : fallback;
}

/**
 * Completion callbacks (`--listen`): a callback for a job waited on goes to Polls (its task read next,
 * one read; only that answer is acted on); one for an `uncertain` job adopts the task it
 * names; one that came while the job was still `submitting` is kept until that submit ends. The
 * uncertain jobs of this run (and those found at its start that may still call back) keep the run
 * waiting a while at its end (graceEnd).
 */
export class Callbacks {
  /**
   * Callbacks that came while their job was still `submitting` (a task can finish, and its
   * callback arrive, before the submit's answer): kept until that submit ends, so a lost
   * answer (uncertain) adopts the task the callback named instead of leaving the job uncertain.
   */
  private readonly early = new Map<string, Set<string>>();
  /** Jobs that became uncertain in this run (or were found so at its start): a late callback may still adopt them. */
  private readonly uncertainHere = new Set<string>();
  /** Adoptions and lookups in flight: the run does not end before they are done. */
  private working = 0;
  private ignoredCount = 0;

  constructor(
    private readonly c: StageContext,
    private readonly polls: Pick<Polls, 'notify' | 'readNow' | 'waitOn'>,
    /** The job is in a submit of this run: its submitEnded is still to come. */
    private readonly inSubmit: (id: string) => boolean,
  ) {
    if (c.opts.callbackUrlFor) for (const id of c.opts.recoveredUncertain ?? []) this.uncertainHere.add(id);
  }

  get busy(): number {
    return this.working;
  }

  /** The run should wait for late callbacks at its end (callbacks on, uncertain jobs of this run left). */
  get waitForLate(): boolean {
    return this.c.opts.callbackUrlFor !== null && this.uncertainHere.size > 0;
  }

  /** Job `id` became uncertain in this run. */
  uncertain(id: string): void {
    if (this.c.opts.callbackUrlFor) this.uncertainHere.add(id);
  }

  /** Callbacks ignored: they named a task that is not the job's recorded one, an earlier attempt, or no job of this run. */
  get ignored(): number {
    return this.ignoredCount;
  }

  /**
   * A completion callback for `note.job`: a hint, never a source. A job waited on with this task is read at once
   * (Polls.notify: one read, whose answer alone is acted on); an uncertain job without a task id adopts the task (the
   * job id and attempt in the callback URL prove it came from our latest submit), then is read; a job still
   * `submitting` keeps the note for the end of its submit. A callback naming another task than the job's recorded
   * one, an earlier attempt, or an unknown job is ignored and counted. Duplicates and late deliveries find the job
   * no longer waited on and change nothing.
   */
  onCallback(note: CallbackNote): void {
    const heard = this.polls.notify(note.job, note.taskId);
    if (heard === 'read') return;
    if (heard === 'other-task') return this.ignore();
    this.track(note.job, async () => {
      const row = await this.c.store.getJob(note.job);
      if (this.c.opts.signal.aborted) return;
      if (!row) return this.ignore();
      // The job came to be waited on during the read above.
      if (this.polls.notify(note.job, note.taskId) === 'read') return;
      if (row.state === 'submitted' && row.task_id === note.taskId && this.inSubmit(note.job)) {
        // Its submit's answer is written and the WAL's fsync not yet done (the job is waited on only after it): the
        // note is kept for the end of that submit, which reads the task then, as for a job still `submitting` (below).
        this.early.set(note.job, (this.early.get(note.job) ?? new Set()).add(note.taskId));
        return;
      }
      if (row.state === 'submitted' && row.task_id === note.taskId) {
        // Waited on by another worker (PostgreSQL, receivers behind one public URL): this one takes it over
        // and reads it now; the other's writes about it are refused from then on.
        const taken = await this.c.store.adoptWaiting(note.job, note.taskId);
        if (taken && this.polls.notify(note.job, note.taskId) === 'not-waited') {
          const w = this.polls.waitOn(note.job, note.taskId, taken.model, sentTime(taken.submitted_at, Date.now()), Date.now());
          w.notified = true;
        }
        return;
      }
      if (row.task_id !== null) {
        if (row.task_id !== note.taskId) this.ignore();
        return;
      }
      // A callback of an earlier submit of this job (its URL names another attempt) names a task made for
      // an earlier spec or attempt: it never adopts. URLs without an attempt (older genbatch) still do.
      if (note.attempt !== null && note.attempt !== row.attempts) return this.ignore();
      // Every task id named while the submit is out is kept: a second callback (forged, or of another task) must not
      // push out the one of the task the submit is answered with.
      if (row.state === 'submitting') this.early.set(note.job, (this.early.get(note.job) ?? new Set()).add(note.taskId));
      else if (row.state === 'uncertain') await this.adopt(note.job, note.taskId, row.model);
    });
  }

  /** The submit of job `id` ended: a callback that came before it names the task now waited on (read now; another task: ignored), or adopts it when the job became uncertain. */
  submitEnded(id: string): void {
    const taskIds = this.early.get(id);
    if (taskIds === undefined) return;
    this.early.delete(id);
    // The task the submit was answered with is read now; the others are ignored (counted).
    for (const taskId of taskIds) if (!this.polls.readNow(id, taskId)) this.ignore();
    this.track(id, async () => {
      const row = await this.c.store.getJob(id);
      // An uncertain job (no answer) adopts a task only when the callbacks named one alone: two are a forgery's sign.
      if (row && row.state === 'uncertain' && !this.c.opts.signal.aborted && taskIds.size === 1) await this.adopt(id, [...taskIds][0]!, row.model);
    });
  }

  /**
   * The end of the wait for late callbacks: 120 s (x time scale) from now, or later when an uncertain
   * job's task may still be running (sent less than its model's typical maximum time ago).
   */
  async graceEnd(): Promise<number> {
    let end = Date.now() + this.c.scaled(CALLBACK_GRACE_MS);
    for (const id of this.uncertainHere) {
      const row = await this.c.store.getJob(id);
      const deadline = row ? callbackDeadline(row.submitted_at, row.model, this.c.opts.timeScale) : null;
      if (deadline !== null && deadline > end) end = deadline;
    }
    return end;
  }

  private async adopt(job: string, taskId: string, model: string): Promise<void> {
    // A task another job of the run records is never adopted: the status read proves only that the task exists and
    // ended on the account, not that it is this job's (a forged callback on a leaked URL could name any task).
    if ((await this.c.store.jobOfTask(taskId, job)) !== null) {
      this.ignore();
      return;
    }
    if (!(await this.c.move(job, 'uncertain', 'submitted', { task_id: taskId, last_error: 'task adopted from a late completion callback' }, { durable: true }))) return;
    this.uncertainHere.delete(job);
    const row = await this.c.store.getJob(job);
    const adopted = this.polls.waitOn(job, taskId, model, sentTime(row?.submitted_at ?? null, Date.now()), Date.now());
    adopted.notified = true;
    adopted.adopted = true;
  }

  /** The task job `id` adopted is not this account's (its status read said 404 or 403): the callback is ignored, the job uncertain again. */
  disowned(id: string): void {
    this.ignore();
    this.uncertain(id);
  }

  private ignore(): void {
    this.ignoredCount++;
  }

  /** Run fn counted as busy; its failure is a warning about the job. */
  private track(job: string, fn: () => Promise<void>): void {
    this.working++;
    fn()
      .catch((err: unknown) => this.c.opts.emit({ type: 'warning', message: `callback for job ${job}: ${errorText(err)}` }))
      .finally(() => {
        this.working--;
        this.c.wake();
      });
  }
}
