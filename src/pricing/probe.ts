/**
 * Measuring what the service charges for one price class: one task run alone, the balance read
 * before and after. The balance is the only source of truth the service offers, and any other use
 * of the same key moves it too, so a probe reads it at every step and trusts a difference only
 * when the balance moved where this task can have been charged (at its submission, at its end, or
 * while its charge settles) and nowhere else:
 *
 *   before  read twice, `settleMs` apart: must agree (else another client is busy: wait, try again)
 *   submit  one task (or one chat call); read again
 *   wait    poll the task until it ends, reading the balance at every poll: it must not move
 *   after   read until two readings `settleMs` apart agree (the charge, or a refund, has settled)
 *
 * The balance may drop when the task is sent or after it ended, not both. The one move allowed after a charge at
 * submission is a rise by less than that charge: the refund of the outputs the task did not deliver, at its end.
 * The price is then the charge at submission (what the next task of the class is charged, and what the credit cap
 * of run counts), not the charge less the refund.
 * A failed task teaches nothing (the service refunds it): reported, not recorded. A balance that
 * moved while the task ran is reported as unreliable, never recorded.
 *
 * What cannot be true is refused, with the reason, and never recorded: a balance answer that is a
 * numeric string rather than a number, not finite, or out of range (negative before the task, or
 * above MAX_PROBE_BALANCE), checked before anything is sent; a charge that is not finite, is
 * negative (the balance rose), or exceeds the balance before the task. A charge of 0 is measured
 * here, but recorded by the caller only when the balance moved for another class of the same
 * probe (FreeClasses): a balance that never moves would make every class look free.
 */

/** A balance as the client read it (src/client: readBalance): the number, and whether it came as a string. */
export interface BalanceAnswer {
  credits: number;
  quoted: boolean;
}

export interface ProbePort {
  balance(): Promise<BalanceAnswer>;
  /** Start the class's representative task; resolves once it was accepted (chat: once the answer is in). */
  start(): Promise<{ wait: (() => Promise<'finished' | 'failed'>) | null }>;
  sleep(ms: number): Promise<void>;
  /** How long to wait between two balance readings that must agree. */
  settleMs: number;
}

export type ProbeOutcome =
  /** `refunded`: credits given back at the task's end (outputs it did not deliver), not taken off the price. */
  | { kind: 'measured'; credits: number; refunded?: number; readings: number[] }
  | { kind: 'failed'; why: string; readings: number[] }
  | { kind: 'unreliable'; why: string; readings: number[] }
  | { kind: 'refused'; why: string; readings: number[] };

const STABLE_TRIES = 5;

/**
 * The largest balance a probe learns from: above it a double no longer holds a millionth of a credit
 * (the probe's resolution) next to the balance, so a difference would not be the charge.
 */
export const MAX_PROBE_BALANCE = Math.floor(Number.MAX_SAFE_INTEGER / 1e6);

/** Why a balance answer cannot be learned from, or null. `sent`: read after the task was sent (a negative one is then judged as a charge). */
export function balanceProblem(a: BalanceAnswer, sent: boolean): string | null {
  if (a.quoted) return `the balance answer is a numeric string ("${a.credits}"), not a number: unusable for learning a price`;
  if (!Number.isFinite(a.credits)) return `the balance answer ${a.credits} is not a finite number: unusable`;
  if (a.credits > MAX_PROBE_BALANCE) return `the balance answer ${a.credits} is out of range (above ${MAX_PROBE_BALANCE} credits, where a millionth of a credit is lost): unusable`;
  if (!sent && a.credits < 0) return `the balance answer ${a.credits} is out of range (negative): unusable`;
  return null;
}

/** Why a measured charge cannot be true, or null. */
export function chargeProblem(charge: number, before: number): string | null {
  if (!Number.isFinite(charge)) return `the charge (${charge}) is not a finite number`;
  if (charge < 0) return `the charge is negative: the balance rose by ${-charge} credits during the probe`;
  if (charge > before) return `the charge of ${charge} credits exceeds the balance before the task (${before})`;
  return null;
}

class Unusable extends Error {}

/** One reading, refused (Unusable) when it cannot be learned from. */
async function read(p: ProbePort, readings: number[], sent: boolean): Promise<number> {
  const a = await p.balance();
  readings.push(a.credits);
  const problem = balanceProblem(a, sent);
  if (problem !== null) throw new Unusable(`${problem} (read ${sent ? 'after' : 'before'} the task was sent)`);
  return a.credits;
}

/** Two readings `settleMs` apart that agree; null when they never did in `STABLE_TRIES`. */
async function stable(p: ProbePort, readings: number[], sent: boolean): Promise<number | null> {
  let last = await read(p, readings, sent);
  for (let i = 0; i < STABLE_TRIES; i++) {
    await p.sleep(p.settleMs);
    const next = await read(p, readings, sent);
    if (next === last) return next;
    last = next;
  }
  return null;
}

/**
 * One probe. `p.start()` sends the task; the `wait` it returns polls it to its end, reading the
 * balance at each poll: those readings come through `readingsDuringWait`.
 */
export async function probe(p: ProbePort, readingsDuringWait: () => BalanceAnswer[]): Promise<ProbeOutcome> {
  const readings: number[] = [];
  try {
    return await probeChecked(p, readingsDuringWait, readings);
  } catch (err) {
    if (err instanceof Unusable) return { kind: 'refused', why: err.message, readings };
    throw err;
  }
}

async function probeChecked(p: ProbePort, readingsDuringWait: () => BalanceAnswer[], readings: number[]): Promise<ProbeOutcome> {
  const before = await stable(p, readings, false);
  if (before === null) return { kind: 'unreliable', why: 'the balance kept moving before the probe (another client is using the key); nothing was sent', readings };
  const started = await p.start();
  const afterSubmit = await read(p, readings, true);
  let end: 'finished' | 'failed' = 'finished';
  if (started.wait) end = await started.wait();
  const during: number[] = [];
  for (const a of readingsDuringWait()) {
    readings.push(a.credits);
    const problem = balanceProblem(a, true);
    if (problem !== null) throw new Unusable(`${problem} (read while the task ran)`);
    during.push(a.credits);
  }
  const after = await stable(p, readings, true);
  if (end === 'failed') return { kind: 'failed', why: 'the task failed, and a failed task is refunded: its price is not known from it', readings };
  if (after === null) return { kind: 'unreliable', why: 'the balance kept moving after the task ended', readings };
  if (before !== afterSubmit) return chargedAtSubmit(before, afterSubmit, during, after, readings);
  // Not charged when sent: charged when it ended (then it may settle). The last reading of the wait is taken once the
  // task was seen ended: it may show the charge; any earlier move is another client's.
  const moved = during.slice(0, -1).find((r) => r !== afterSubmit);
  if (moved !== undefined) return { kind: 'unreliable', why: `the balance moved while the task ran (${afterSubmit} -> ${moved}): another client is using the key`, readings };
  return measured(before - after, before, 0, readings);
}

/**
 * Charged when it was sent: the price is that charge. After it the balance may only rise, by less than the charge in
 * all: a refund of the outputs the task did not deliver, at its end (which a reading may show before a poll sees the
 * task ended), does not lower what a task of the class is charged. A drop after the submission is another client's.
 */
function chargedAtSubmit(before: number, afterSubmit: number, during: readonly number[], after: number, readings: number[]): ProbeOutcome {
  const charge = before - afterSubmit;
  if (charge < 0) return measured(before - after, before, 0, readings); // the balance rose: refused as a negative charge
  let last = afterSubmit;
  for (const r of [...during, after]) {
    if (r < last) return { kind: 'unreliable', why: `the balance moved both when the task was sent (${before} -> ${afterSubmit}) and after (${last} -> ${r}): another client may be using the key`, readings };
    last = r;
  }
  const refunded = after - afterSubmit;
  if (refunded >= charge) {
    return { kind: 'unreliable', why: `the balance was charged ${round(charge)} credits when the task was sent and rose by ${round(refunded)} after: more than a refund of part of it`, readings };
  }
  return measured(charge, before, refunded, readings);
}

function round(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}

function measured(charge: number, before: number, refunded: number, readings: number[]): ProbeOutcome {
  const credits = round(charge);
  const problem = chargeProblem(credits, before);
  if (problem !== null) return { kind: 'refused', why: problem, readings };
  return refunded > 0 ? { kind: 'measured', credits, refunded: round(refunded), readings } : { kind: 'measured', credits, readings };
}

/** Why a class measured at 0 credits was not recorded: its probe never saw the balance move for any class. */
export const NEVER_MOVED = 'the balance never moved in this probe: no class was charged, so 0 credits may only mean the balance is not live (a price of 0 is recorded only when another class\'s task of the same probe moved the balance)';

/**
 * Classes measured at 0 credits, held until the probe ends: free only when the balance moved for another
 * class of the same probe (it is live). `charged(credits)` is told every measured charge; `settle()` says
 * which held classes to record (all of them, or none, with NEVER_MOVED).
 */
export class FreeClasses<T> {
  private readonly held: T[] = [];
  private live = false;

  /** A measured charge: a class at 0 is held (true), any other charge shows the balance is live (false). */
  measured(item: T, credits: number): boolean {
    if (credits > 0) {
      this.live = true;
      return false;
    }
    this.held.push(item);
    return true;
  }

  settle(): { record: T[]; refuse: T[] } {
    return this.live ? { record: [...this.held], refuse: [] } : { record: [], refuse: [...this.held] };
  }
}
