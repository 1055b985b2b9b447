import { AmbiguousSubmitError, ApiError, GenbatchError, NetworkError } from '../../errors.js';
import { nowIso, type JobRow } from '../../store/index.js';
import { runChatJob } from '../submit/chat.js';
import { ParentOutputs, expandForEach, resolveInput } from '../submit/graph.js';
import { errorText, type StageContext } from './context.js';
import type { DownloadPort, ServicePort } from '../ports.js';
import { getAtPath, setAtPath } from '../results.js';
import type { StoredSpec } from '../spec.js';
import { isRefusal } from '../submit/permanent.js';
import { Uploader } from '../submit/uploads.js';

/** How often a job whose upload failed transiently (client retries used up) is queued again in the same run. */
const UPLOAD_REQUEUES = 3;
/**
 * Pending jobs claimed from the store at a time, at most: as many as may be sent at once (--concurrency), so a
 * worker on a shared run holds little more than it sends (with the claim ahead, about twice that), and others get
 * the rest.
 */
const CLAIM_MAX = 64;

/** What Submits tells the other stages. */
export interface SubmitHooks {
  /** The task of job `id` was created (its id committed): wait on it. */
  sent(id: string, taskId: string, model: string, sentAt: number): void;
  /** Job `id` became `uncertain` in this run. */
  uncertain(id: string): void;
  /** The submit of job `id` ended, whatever its outcome. */
  ended(id: string): void;
}

/**
 * Submits: pending jobs claimed from the store in manifest order (graph steps: for_each jobs make
 * their children, references are filled), their images uploaded, the intent committed, the POST
 * and its outcome. At most `concurrency` submits hold a slot at once (from the intent to the POST's answer: the
 * task id is committed after the slot is free) and `maxActive` tasks waited on (`waitedOn()`, counted with the
 * submits in hand).
 */
export class Submits {
  /** Claimed jobs not yet handed to submit(), in manifest order. */
  private buffer: JobRow[] = [];
  /** The store had no more ready pending jobs at the last claim. */
  private exhausted = false;
  /** A job became done: jobs waiting for it may be ready, so the next claim starts from the first of them. */
  // Stryker disable next-line BooleanLiteral: true at the start only makes the first claim give back its buffer, which is empty then.
  private rescan = false;
  /** Submits holding a slot (--concurrency): from the intent to the POST's answer. */
  private inFlight = 0;
  /** A claim made ahead (before the buffer runs dry), while it runs. */
  private claiming: Promise<void> | null = null;
  /** What that claim threw: thrown by the next fill(), as a claim made there would have. */
  private claimError: unknown = null;
  /** Why the credit cap holds the next submit now (told as a wait event), or null. */
  private capWait: string | null = null;
  /** Jobs handed to submit() and not finished with it (a later claim must not hand them out again). */
  private readonly inHand = new Set<string>();
  /** Jobs claimed in this run and still pending in its hands (given back to the store at the end). */
  private readonly unsent = new Set<string>();
  /** The pending jobs this run may send (--only, --limit; see src/engine/prepare/select.ts), or null for all. */
  private readonly selected: Set<string> | null;
  /** Chosen jobs handed to submit() so far (each once). */
  private handedOut = 0;
  /** Jobs sent back to the queue in this run after a transient upload failure, and how often. */
  private readonly uploadRetries = new Map<string, number>();
  /** for_each jobs whose children would go over the credit limit: left pending, not tried again in this run. */
  readonly heldByLimit = new Set<string>();
  private overBudgetSaid = false;
  /** The last claim found pending jobs and took none: each would go over the credit limit. */
  heldByBudget = false;
  private readonly parents: ParentOutputs;
  private readonly uploader: Uploader;
  /** POSTs (and chat calls) sent in this run. */
  submitsSent = 0;

  constructor(
    private readonly c: StageContext,
    private readonly service: ServicePort,
    private readonly download: DownloadPort,
    private readonly waitedOn: () => number,
    private readonly hooks: SubmitHooks,
  ) {
    this.selected = c.opts.selected ? new Set(c.opts.selected) : null;
    this.parents = new ParentOutputs(c.store);
    const o = c.opts;
    this.uploader = new Uploader(c.store, service, { baseUrl: o.baseUrl, maxAgeMs: o.uploadMaxAgeMs, signal: o.signal, emit: o.emit });
  }

  /** Job `id` is in a submit of this run (its hooks.ended is still to come). */
  inSubmit(id: string): boolean {
    return this.inHand.has(id);
  }

  /** Submits in hand (a slot's, or committing the task id after it) and a claim running. */
  get busy(): number {
    return this.inHand.size + (this.claiming ? 1 : 0);
  }

  /** Nothing more will be sent in this run (no ready pending job left, or stopped). */
  get done(): boolean {
    return (this.exhausted && this.buffer.length === 0) || this.c.stopReason !== null;
  }

  /** Claim again at the next fill (other workers may have made jobs ready). */
  lookAgain(): void {
    if (!this.c.stopReason) this.exhausted = false;
  }

  /** Job `id` of this run became done: jobs waiting for it may be ready now. */
  finished(): void {
    if (!this.c.graphOn) return;
    this.rescan = true;
    this.exhausted = false;
  }

  /** Start the submits capacity allows. */
  async fill(): Promise<void> {
    const { opts } = this.c;
    this.throwClaimError();
    while (!this.c.stopReason && this.inFlight < opts.concurrency && this.waitedOn() + this.inHand.size < opts.maxActive) {
      if (this.buffer.length === 0 || this.rescan) {
        if (this.claiming) {
          await this.claiming;
          this.throwClaimError();
        } else if (this.exhausted && !this.rescan) return;
        else await this.claim();
        continue;
      }
      const row = this.buffer.shift()!;
      if (this.c.graphOn && (this.inHand.has(row.id) || (await this.graphStep(row)))) continue;
      if (opts.cap) {
        // Under a credit cap: sent only when its expected price fits (else it waits for readings, or the run stops sending).
        const admit = await opts.cap.admit(row);
        // A wait for the cap is said once as it begins and once as it ends (the progress line names it).
        const reason = admit === 'wait' ? opts.cap.waitReason(row) : null;
        if (reason !== this.capWait) {
          opts.emit({ type: 'wait', what: 'credit-cap', rule: reason ?? this.capWait!, queued: reason === null ? 0 : 1, next_in_ms: null });
          this.capWait = reason;
        }
        if (admit !== 'go') {
          this.buffer.unshift(row);
          if (admit === 'stop') this.c.stop('credit-cap');
          return;
        }
      }
      if (this.selected && !this.uploadRetries.has(row.id)) this.handedOut++;
      this.claimAhead();
      this.inHand.add(row.id);
      this.inFlight++;
      let slot = true;
      // The slot is given back once the POST is answered: the next submit's intent and POST need not wait for
      // this one's task id to reach the disk (a durable commit, tens of ms where fsync is slow).
      const freeSlot = (): void => {
        if (!slot) return;
        slot = false;
        this.inFlight--;
        this.c.wake();
      };
      let next: 'again' | 'give-up' | void;
      // Anything unexpected (a store error): the job is given up like one whose upload kept failing.
      const sent = this.submit(row, freeSlot).then(
        (outcome) => void (next = outcome),
        (err: unknown) => {
          this.c.warn(row.id, err);
          next = 'give-up';
        },
      );
      // Under a cap, a job that was not sent after all gives its reservation back (no extra step without one).
      const cap = opts.cap;
      void (cap ? sent.then(() => cap.handBack(row.id)).catch((err: unknown) => this.c.warn(row.id, err)) : sent)
        // Given up: its lease dropped, so no worker waits for a job held and worked on by no one (another may try it).
        .then(() => (next === 'give-up' ? this.c.giveUp(row.id) : undefined))
        .catch((err: unknown) => this.c.warn(row.id, err))
        .finally(() => {
          freeSlot();
          this.inHand.delete(row.id);
          // Queued again only now: while its submit is in hand, the graph check above passes it over (and so would drop it).
          if (next === 'again') {
            this.buffer.push(row);
            this.exhausted = false;
          }
          this.hooks.ended(row.id);
          if (row.kind === 'chat') this.finished();
          this.c.wake();
        });
    }
  }

  /**
   * Without a job graph, the next jobs are claimed while the last ones are handed out (fewer than --concurrency
   * left): a submit slot that frees finds one waiting instead of a claim's round trip (with PostgreSQL, one
   * claim per --concurrency jobs). With a graph, a claim may give the buffer back first (rescan): claimed when empty.
   */
  private claimAhead(): void {
    if (this.c.graphOn || this.claiming || this.exhausted || this.c.stopReason || this.buffer.length >= this.c.opts.concurrency) return;
    this.claiming = this.claim()
      .catch((err: unknown) => void (this.claimError = err))
      .finally(() => {
        this.claiming = null;
        this.c.wake();
      });
  }

  private throwClaimError(): void {
    const err = this.claimError;
    this.claimError = null;
    if (err !== null) throw err;
  }

  /** Jobs claimed and never sent in this run go back to the store (for a later run, or another worker). */
  async close(): Promise<void> {
    await this.claiming;
    // Both stores' release() does nothing for an empty list.
    await this.c.store.release([...this.unsent]);
    this.unsent.clear();
  }

  /** Claim more pending jobs (after a rescan, from the first job that may be ready: the ones not yet sent are given back and claimed again, so manifest order holds). */
  private async claim(): Promise<void> {
    if (this.rescan) {
      this.rescan = false;
      const back = this.buffer.filter((r) => !this.uploadRetries.has(r.id)).map((r) => r.id);
      this.buffer = this.buffer.filter((r) => this.uploadRetries.has(r.id));
      await this.c.store.release(back);
      for (const id of back) this.unsent.delete(id);
    }
    // --only / --limit without a job graph: once every chosen job was handed out, the rest is not read.
    if (this.selected && !this.c.graphOn && this.handedOut >= this.selected.size) {
      this.exhausted = true;
      return;
    }
    const claim = await this.c.store.claimPending(Math.min(CLAIM_MAX, Math.max(1, this.c.opts.concurrency)), { only: this.selected, skip: this.c.givenUp });
    if (claim.overBudget && !this.overBudgetSaid) {
      this.overBudgetSaid = true;
      this.c.opts.emit({ type: 'warning', message: 'pending jobs were left unclaimed: their estimated credits would go over the credit limit' });
    }
    for (const row of claim.jobs) this.unsent.add(row.id);
    this.buffer.push(...claim.jobs);
    this.heldByBudget = claim.jobs.length === 0 && claim.overBudget;
    if (claim.jobs.length === 0) this.exhausted = true;
  }

  /** The job left `pending` in this run's hands. */
  // Stryker disable next-line BlockStatement: a job left in unsent is only given back at close(), and release() gives back only pending jobs this worker holds (SQLite: still claimed; PostgreSQL: state = 'pending').
  private sent(id: string): void {
    this.unsent.delete(id);
  }

  /**
   * Graph work for a pending job about to be submitted; true when it was
   * handled here: no longer pending since it was claimed, or a for_each job (its children are made now).
   */
  private async graphStep(row: JobRow): Promise<boolean> {
    const cur = await this.c.store.getJob(row.id);
    if (!cur || cur.state !== 'pending') {
      this.sent(row.id);
      return true;
    }
    if (row.kind !== 'fanout') return false;
    // Stryker disable next-line ConditionalExpression,BooleanLiteral: a held for_each job is not handed out again in the run (it stays claimed: no later claim returns it); a guard against a second warning.
    if (this.heldByLimit.has(row.id)) return true;
    const r = await expandForEach(this.c.store, this.parents, cur, this.c.opts.creditLimit ?? null);
    if ('held' in r) {
      this.heldByLimit.add(row.id);
      this.c.opts.emit({ type: 'warning', message: r.held });
      return true;
    }
    this.sent(row.id);
    if ('error' in r) await this.c.move(row.id, 'pending', 'failed', { last_error: r.error });
    else if (r.made !== null) {
      // A chosen for_each job: its children are sent in this run too.
      if (this.selected?.has(row.id)) for (let i = 0; i < r.count; i++) this.selected.add(`${row.id}.${i}`);
      if (r.made.length > 0) this.c.opts.emit({ type: 'children', id: row.id, ids: r.made });
      this.c.opts.emit({ type: 'job', id: row.id, from: 'pending', to: 'done', task_id: null, error: null });
    }
    return true;
  }

  /** The row with its references filled (and the input checked again), or null when the job failed. */
  private async withRefs(row: JobRow): Promise<JobRow | null> {
    const spec = JSON.parse(row.spec) as StoredSpec;
    const r = await resolveInput(this.parents, row, spec);
    if ('error' in r) {
      this.sent(row.id);
      await this.c.move(row.id, 'pending', 'failed', { last_error: r.error });
      return null;
    }
    return r.input === spec.input ? row : { ...row, spec: JSON.stringify({ ...spec, input: r.input }) };
  }

  /**
   * Returns 'again' when the job is to be queued again in this run (its upload failed transiently), 'give-up'
   * when it is left pending for a later run or another worker (its upload kept failing, or its image is gone).
   */
  private async submit(queued: JobRow, freeSlot: () => void): Promise<'again' | 'give-up' | void> {
    const { opts } = this.c;
    const row = this.c.graphOn ? await this.withRefs(queued) : queued;
    if (!row) return;
    if (row.kind === 'chat') {
      // A chat call: intent, call, answer written, done (src/engine/submit/chat.ts); it counts as a request sent.
      this.submitsSent++;
      this.sent(row.id);
      return runChatJob(row, {
        move: (from, to, patch, o) => this.c.move(row.id, from, to, patch, o),
        chat: this.service.chat?.bind(this.service),
        outDir: opts.outDir,
        signal: opts.signal,
        emit: opts.emit,
        stop: (reason) => this.c.stop(reason),
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
        // Stryker disable next-line StringLiteral: the code is not shown: the catch below records the message alone.
        if (typeof value !== 'string') throw new GenbatchError('GB_INPUT_CHANGED', `no image at ${ref.path}`);
        setAtPath(input, ref.path, await this.uploader.url(value, ref.sha256, ref.remote ? 'url' : ref.data ? 'data' : 'file'));
      }
    } catch (err) {
      if (opts.signal.aborted) return;
      if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429 && err.status !== 402) {
        this.sent(row.id);
        await this.c.move(row.id, 'pending', 'failed', { last_error: `upload refused: ${err.message}` });
      } else if ((err instanceof ApiError || err instanceof NetworkError) && (this.uploadRetries.get(row.id) ?? 0) < UPLOAD_REQUEUES) {
        // The client's retries were used up on a transient error: the job comes back in this run (at most UPLOAD_REQUEUES times).
        this.uploadRetries.set(row.id, (this.uploadRetries.get(row.id) ?? 0) + 1);
        await this.c.store.noteError(row.id, `upload failed, tried again in this run: ${errorText(err)}`);
        return 'again';
      } else {
        await this.c.store.noteError(row.id, `upload failed: ${errorText(err)}`);
        opts.emit({ type: 'warning', message: `job ${row.id}: upload failed, left pending: ${errorText(err)}` });
        return 'give-up';
      }
      return;
    }
    if (this.c.stopReason || opts.signal.aborted) return;
    const body: { model: string; input: Record<string, unknown>; callback_url?: string } = { model: spec.model, input };
    // The attempt this submit is (the intent below adds 1 to the stored count).
    if (opts.callbackUrlFor) body.callback_url = opts.callbackUrlFor(row.id, row.attempts + 1);
    else if (spec.callback_url) body.callback_url = spec.callback_url;
    // The intent is durable before the POST: a crash after this point leaves `submitting`, which a rerun (or a live worker) turns into `uncertain`.
    this.sent(row.id);
    // Its expected price as the credit cap sees it now (the price observed for its class in this run), else its estimate.
    const expected = opts.cap ? opts.cap.expected([row]) : null;
    const intent = { attemptsInc: 1, submitted_input: JSON.stringify(input), submitted_at: nowIso(), last_error: null, expected_credits: expected && expected.unknown === 0 ? expected.credits : row.estimated_credits };
    if (!(await this.c.move(row.id, 'pending', 'submitting', intent, { durable: true }))) return;
    opts.emit({ type: 'sending', id: row.id, estimated_credits: row.estimated_credits });
    let taskId: string;
    try {
      this.submitsSent++;
      taskId = (await this.service.submit(body, opts.signal)).task_id;
    } catch (err) {
      // The slot is kept until the outcome is written: a 402 stops the sending there, before a next POST.
      await this.failed(row.id, err);
      return;
    }
    freeSlot();
    const sentAt = Date.now();
    if (await this.c.move(row.id, 'submitting', 'submitted', { task_id: taskId }, { durable: true })) this.hooks.sent(row.id, taskId, spec.model, sentAt);
  }

  private async failed(id: string, err: unknown): Promise<void> {
    const move = (to: 'pending' | 'uncertain' | 'exists' | 'failed', lastError: string) => this.c.move(id, 'submitting', to, to === 'failed' ? { last_error: lastError, permanent: isRefusal(err) ? 1 : 0 } : { last_error: lastError });
    if (this.c.opts.signal.aborted && !(err instanceof AmbiguousSubmitError)) {
      // Stopped before the request was sent (during a backoff or a wait for capacity): nothing was created.
      // An abort after sending comes as AmbiguousSubmitError (the client decides from what it sent).
      await move('pending', 'the run was stopped before this submit was sent');
    } else if (err instanceof AmbiguousSubmitError) {
      if (await move('uncertain', err.message)) this.hooks.uncertain(id);
    } else if (err instanceof ApiError && err.status === 409) {
      // What the job asks for already exists (a music video or persona for that track, ...): an outcome, not a retry.
      await move('exists', err.message);
    } else if (err instanceof ApiError && err.status === 402) {
      await move('pending', err.message);
      this.c.stop('insufficient-credits');
    } else if (err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429) {
      await move('failed', err.message);
    } else if (err instanceof ApiError || (err instanceof NetworkError && !err.sent)) {
      // Retries used up on an answer that proves nothing was created: pending for a later run.
      await move('pending', err.message);
    } else {
      // Anything else (an unexpected error after the request may have left): never guess.
      if (await move('uncertain', errorText(err))) this.hooks.uncertain(id);
    }
  }
}
