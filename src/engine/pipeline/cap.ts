import { priceClass } from '../../pricing/classes.js';
import type { CapLedger, CapTotals, JobRow, JobState } from '../../store/index.js';
import type { EngineEvent } from '../events.js';
import type { StoredSpec } from '../spec.js';

/**
 * The credit cap on what is charged (--max-credits, the manifest's budget): the run's charge, measured by the
 * balance, stays at most the cap plus the charge of one task per process.
 *
 *   ledger    spent (every drop of the balance since the run began, over all its invocations; a rise, a refund,
 *             gives room back) and reserved (the expected price of each job sent whose charge no reading has
 *             shown yet). A job is sent only when spent + reserved + its expected price fits in the cap.
 *             In memory for a SQLite state (LocalLedger), the budget row for PostgreSQL (one for every worker).
 *   classes   a job's expected price is the price observed for its price class in this process; a class not yet
 *             observed sends its first job alone (nothing else of this process in flight, the tasks it resumed
 *             included: adopt()), reserving the known
 *             estimate (published, yours, learned), or nothing when there is none (sent only while spent <
 *             cap): its charge, the balance before it was sent minus the lowest balance read until it ended (one
 *             reading is taken once its submit is answered: a partial refund at its end does not lower it), becomes
 *             the class's price (the higher of that and the estimate). A task that failed (refunded) or never
 *             existed teaches nothing: the next job of the class goes alone again.
 *   readings  after each job of this process leaves `submitting`/`submitted` (its reservation ends with the first
 *             reading begun after that), once the job sent alone is submitted, and every few seconds while anything
 *             is reserved.
 *   stop      the next job does not fit and nothing this process sent is still waiting for a reading: stop
 *             sending (the run finishes what is in flight and exits with EXIT.capReached). With jobs of its own
 *             (or, with PostgreSQL, of another worker) still reserved, it waits for their readings instead.
 * Any other use of the same API key moves the balance too and counts against the cap.
 */
/** What the pipeline is told about the next job. */
export type Admit = 'go' | 'wait' | 'stop';

/** Consecutive failed balance readings after which the cap stops the run's sending (nothing can be measured). */
const READ_FAILURES = 5;
/** Readings while anything is reserved, at least this often (ms of the service's time). */
const READ_EVERY_MS = 3000;

interface Held {
  cls: string;
  sent: boolean;
  /** The job left submitting/submitted: the next reading ends its reservation. */
  ended: JobState | null;
}

export interface CreditCapOptions {
  credits: number;
  /** How the cap is named: `--max-credits 200`, `the manifest budget of 200`. */
  name: string;
  ledger: CapLedger;
  balance: () => Promise<number>;
  timeScale: number;
  emit: (e: EngineEvent) => void;
}

export class CreditCap {
  readonly credits: number;
  readonly name: string;
  /** Observed price per price class (this process). */
  readonly prices = new Map<string, number>();
  private readonly own = new Map<string, Held>();
  /** The job sent alone to learn its class's price; `low` is the lowest balance read since it was admitted. */
  private alone: { id: string; cls: string; before: number; low: number; estimate: number | null } | null = null;
  private reading: Promise<number | null> | null = null;
  private lastReadAt = 0;
  /** The last reading, and when it began (ms epoch). */
  private lastReading: number | null = null;
  private lastReadStart = 0;
  /** When this process last had nothing in flight after having something (a reading begun since sees no job of its own moving). */
  private quietSince = 0;
  /** admit() needs a fresh reading (a class's first job waits for it). */
  private wantRead = false;
  private retryAt = 0;
  private failures = 0;
  /** The ledger's totals at the last reading or reservation. */
  totals: CapTotals = { spent: 0, reserved: 0 };
  /** Runs the work loop again (set by the pipeline that uses the cap). */
  wake: () => void = () => undefined;

  constructor(private readonly o: CreditCapOptions) {
    this.credits = o.credits;
    this.name = o.name;
  }

  /** A balance reading in flight (the loop counts it as work). */
  get busy(): number {
    return this.reading ? 1 : 0;
  }

  /** Whether job `row` may be sent now (reserved when 'go'), must wait for readings, or must not be sent in this run. */
  async admit(row: JobRow): Promise<Admit> {
    if (this.alone) return 'wait';
    if (this.failures >= READ_FAILURES) return 'stop';
    const cls = classOf(row);
    const price = this.prices.get(cls);
    if (price === undefined) {
      // A class not observed yet: its job goes alone, measured from a reading begun once nothing else was in
      // flight (asked of tick(), never awaited here: the loop keeps beating its leases while the balance is read).
      if (this.own.size > 0) return 'wait';
      if (this.reading || this.lastReading === null || this.lastReadStart < this.quietSince) {
        // tick(), later in the same pass of the loop, starts the reading; its end wakes the loop (a wake here would spin it).
        this.wantRead = true;
        return 'wait';
      }
      const before = this.lastReading;
      const estimate = estimateOf(row);
      const r = await this.o.ledger.reserve(row.id, estimate ?? 0, estimate === null);
      this.totals = r;
      if (!r.ok) return r.reserved > 0 ? 'wait' : 'stop';
      this.own.set(row.id, { cls, sent: false, ended: null });
      this.alone = { id: row.id, cls, before, low: before, estimate };
      return 'go';
    }
    const r = await this.o.ledger.reserve(row.id, price, false);
    this.totals = r;
    if (r.ok) {
      this.own.set(row.id, { cls, sent: false, ended: null });
      return 'go';
    }
    return this.own.size > 0 || r.reserved > 0 ? 'wait' : 'stop';
  }

  /** Why admit() said 'wait', in words (the progress line's `waiting for the credit cap: ...`). */
  waitReason(row: JobRow): string {
    if (this.alone) return `job ${this.alone.id} sent alone to learn its class's price`;
    if (this.prices.get(classOf(row)) !== undefined) return `jobs in flight to be charged before ${row.id} fits`;
    return this.own.size > 0 ? `jobs in flight to end before ${row.id} (a new price class) goes alone` : `a balance reading before ${row.id} goes alone`;
  }

  /** A job of this process changed state (StageContext.move). */
  moved(id: string, from: JobState, to: JobState): void {
    const h = this.own.get(id);
    if (!h) return;
    if (to === 'submitting') h.sent = true;
    else if (to === 'submitted' && from === 'submitting' && this.alone?.id === id) {
      // A reading while the job sent alone runs: the service charges at submission and refunds what a task did
      // not deliver when it ends, so only a reading before its end shows what a task of its class is charged.
      this.wantRead = true;
      this.wake();
    } else if ((from === 'submitting' || from === 'submitted') && to !== 'submitted') {
      h.ended = to;
      this.retryAt = 0;
      this.wake();
    }
  }

  /**
   * Job `id` was sent by an earlier process (a run resumed after a kill, or with PostgreSQL a dead worker's job taken
   * over) and this process now waits on its task: held like a job of its own, with no reservation (its charge is in
   * the balance already), so that a class's first job still goes alone: the refund of such a task when it fails would
   * otherwise be read as part of that job's charge (a class learned at 0, every job sent at once).
   */
  adopt(id: string): void {
    if (!this.own.has(id)) this.own.set(id, { cls: '', sent: true, ended: null });
  }

  /** The submit of job `id` is over: when it was never sent, its reservation goes back at once. */
  async handBack(id: string): Promise<void> {
    const h = this.own.get(id);
    if (!h || h.sent) return;
    this.own.delete(id);
    // Stryker disable next-line ConditionalExpression: while a job goes alone admit() sends nothing else, so the only job of this process to hand back is that one.
    if (this.alone?.id === id) this.alone = null;
    await this.o.ledger.unreserve(id);
    this.wake();
  }

  /** This process stops working on job `id` (given up, left for later): not waited for (its reservation stays until a reading finds it ended). */
  forget(id: string): void {
    this.own.delete(id);
    if (this.alone?.id === id) this.alone = null;
    if (this.own.size === 0) this.quietSince = Date.now();
  }

  /** Forget the jobs of a pipeline that stopped for lost leases (their reservations end with a later reading of any worker). */
  reset(): void {
    this.own.clear();
    this.alone = null;
    this.quietSince = Date.now();
  }

  /** Start a reading when one is due; returns when the next is due (ms epoch). */
  tick(now: number): number {
    if (this.reading) return Infinity;
    const ended = [...this.own.values()].some((h) => h.ended !== null);
    const charging = this.own.size > 0 || this.totals.reserved > 0;
    // After a failed reading: again at retryAt (a job may be waiting for it).
    const due = Math.max(this.retryAt, ended || this.wantRead || this.failures > 0 ? 0 : charging ? this.lastReadAt + Math.max(50, READ_EVERY_MS * this.o.timeScale) : Infinity);
    if (now < due) return due;
    void this.read().then(() => this.wake());
    return Infinity;
  }

  /** Read the balance (one reading at a time; a caller during a reading waits for it, then reads again). */
  private async read(): Promise<number | null> {
    // Stryker disable next-line ConditionalExpression: read() is called by tick() only, which returns while a reading is in flight.
    while (this.reading) await this.reading;
    const p = this.readOnce();
    this.reading = p;
    try {
      return await p;
    } finally {
      this.reading = null;
    }
  }

  private async readOnce(): Promise<number | null> {
    const own = [...this.own].filter(([, h]) => h.ended !== null).map(([id]) => id);
    const started = Date.now();
    this.wantRead = false;
    let reading: number;
    let release: string[];
    try {
      release = await this.o.ledger.releasable(own);
      reading = await this.o.balance();
      if (!Number.isFinite(reading)) throw new Error(`the balance read is not a number: ${String(reading)}`);
      this.totals = await this.o.ledger.settle(reading, release);
    } catch (err) {
      this.failures++;
      this.retryAt = Date.now() + Math.min(30_000, 1000 * 2 ** this.failures) * Math.min(1, Math.max(this.o.timeScale, 0.01));
      const what = err instanceof Error ? err.message : String(err);
      this.o.emit({
        type: 'warning',
        message: `the credit cap could not read the balance (${this.failures} in a row): ${what}${this.failures >= READ_FAILURES ? '; no more jobs are sent in this run' : '; tried again'}`,
      });
      return null;
    }
    this.failures = 0;
    this.lastReadAt = Date.now();
    this.lastReading = reading;
    this.lastReadStart = started;
    if (this.alone) this.alone.low = Math.min(this.alone.low, reading);
    for (const id of own) {
      const h = this.own.get(id)!;
      this.own.delete(id);
      const a = this.alone;
      if (a?.id !== id) continue;
      this.alone = null;
      // Charged only when the task finished with results (a failed task is refunded; a job back to pending or uncertain tells nothing).
      if (h.ended === 'downloading' || h.ended === 'done') {
        // The deepest drop seen, not the last: a task that delivered fewer outputs than asked was partly refunded at its end.
        const charge = Math.max(0, round6(a.before - a.low));
        const price = Math.max(charge, a.estimate ?? 0);
        this.prices.set(a.cls, price);
        this.o.emit({ type: 'cap-price', id, class: a.cls, charged: charge, expected: a.estimate, price });
      }
    }
    // Every job of this process ended before this reading began: it is the fresh reading a class's first job needs.
    if (own.length > 0 && this.own.size === 0) this.quietSince = started;
    return reading;
  }

  /** The expected credits of `rows` (not yet sent) at the prices observed, else their estimates; and how many have neither. */
  expected(rows: Iterable<JobRow>): { credits: number; unknown: number } {
    let credits = 0;
    let unknown = 0;
    for (const row of rows) {
      // Stryker disable next-line ConditionalExpression,EqualityOperator: a fast path; an empty map gives undefined too.
      const p = this.prices.size > 0 ? this.prices.get(classOf(row)) : undefined;
      const c = p ?? estimateOf(row);
      if (c === null) unknown++;
      else credits += c;
    }
    return { credits: round6(credits), unknown };
  }
}

/**
 * A job's estimate as the cap counts it: unknown (null) unless a finite number of credits >= 0. The row may have
 * been edited by hand or written by another client of a PostgreSQL state: a negative estimate reserved for the
 * job sent alone added credits to the worker's hold that the run's budget row never gave (each later send then
 * fitted in the hold, past the cap).
 */
function estimateOf(row: JobRow): number | null {
  const e = row.estimated_credits;
  return e !== null && Number.isFinite(e) && e >= 0 ? e : null;
}

/** The price class key of a stored job. */
export function classOf(row: JobRow): string {
  const spec = JSON.parse(row.spec) as StoredSpec;
  // Stryker disable next-line StringLiteral: priceClass() makes every kind but 'submit' a per-request class, so the chat kind's name is not read.
  return priceClass({ model: row.model, kind: row.kind === 'chat' ? 'chat' : 'submit', input: spec.input }).key;
}

/** A ledger kept in this process (a SQLite state: one process works on the run); `spent` starts at what earlier invocations were charged. */
export class LocalLedger implements CapLedger {
  private readonly held = new Map<string, number>();
  private reserved = 0;
  private last: number | null;

  constructor(
    private readonly cap: number,
    private spent: number,
    opening: number | null,
  ) {
    this.last = opening;
  }

  async reserve(id: string, credits: number, unknown: boolean): Promise<CapTotals & { ok: boolean }> {
    const fits = unknown ? this.spent + this.reserved < this.cap - 1e-9 : this.spent + this.reserved + credits <= this.cap + 1e-9;
    if (fits) {
      this.held.set(id, credits);
      this.reserved += credits;
    }
    return { ok: fits, spent: this.spent, reserved: this.reserved };
  }

  async unreserve(id: string): Promise<void> {
    this.reserved -= this.held.get(id) ?? 0;
    this.held.delete(id);
  }

  async releasable(own: readonly string[]): Promise<string[]> {
    return [...own];
  }

  async settle(reading: number, release: readonly string[]): Promise<CapTotals> {
    if (this.last !== null) this.spent = round6(this.spent + this.last - reading);
    this.last = reading;
    for (const id of release) await this.unreserve(id);
    if (this.held.size === 0) this.reserved = 0;
    return { spent: this.spent, reserved: this.reserved };
  }
}

function round6(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
