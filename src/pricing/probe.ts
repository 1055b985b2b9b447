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
 * The balance may move when the task is sent or after it ended, not both (a refund of part of a
 * task's outputs, which would do that, also makes its price ambiguous).
 * A failed task teaches nothing (the service refunds it): reported, not recorded. A balance that
 * moved while the task ran, or a negative difference, is reported as unreliable, never recorded.
 */

export interface ProbePort {
  balance(): Promise<number>;
  /** Start the class's representative task; resolves once it was accepted (chat: once the answer is in). */
  start(): Promise<{ wait: (() => Promise<'finished' | 'failed'>) | null }>;
  sleep(ms: number): Promise<void>;
  /** How long to wait between two balance readings that must agree. */
  settleMs: number;
}

export type ProbeOutcome =
  | { kind: 'measured'; credits: number; readings: number[] }
  | { kind: 'failed'; why: string; readings: number[] }
  | { kind: 'unreliable'; why: string; readings: number[] };

const STABLE_TRIES = 5;

/** Two readings `settleMs` apart that agree; null when they never did in `STABLE_TRIES`. */
async function stable(p: ProbePort, readings: number[]): Promise<number | null> {
  let last = await p.balance();
  readings.push(last);
  for (let i = 0; i < STABLE_TRIES; i++) {
    await p.sleep(p.settleMs);
    const next = await p.balance();
    readings.push(next);
    if (next === last) return next;
    last = next;
  }
  return null;
}

/**
 * One probe. `p.start()` sends the task; the `wait` it returns polls it to its end, reading the
 * balance at each poll: those readings come through `readingsDuringWait`.
 */
export async function probe(p: ProbePort, readingsDuringWait: () => number[]): Promise<ProbeOutcome> {
  const readings: number[] = [];
  const before = await stable(p, readings);
  if (before === null) return { kind: 'unreliable', why: 'the balance kept moving before the probe (another client is using the key); nothing was sent', readings };
  const started = await p.start();
  const afterSubmit = await p.balance();
  readings.push(afterSubmit);
  let end: 'finished' | 'failed' = 'finished';
  if (started.wait) end = await started.wait();
  const during = readingsDuringWait();
  for (const r of during) readings.push(r);
  const moved = during.find((r) => r !== afterSubmit);
  const after = await stable(p, readings);
  if (end === 'failed') return { kind: 'failed', why: 'the task failed, and a failed task is refunded: its price is not known from it', readings };
  if (moved !== undefined) return { kind: 'unreliable', why: `the balance moved while the task ran (${afterSubmit} -> ${moved}): another client is using the key`, readings };
  if (after === null) return { kind: 'unreliable', why: 'the balance kept moving after the task ended', readings };
  // The charge comes when the task is sent or when it ends (then it may settle): one of the two, not both,
  // or another client's spending cannot be told from it.
  const lastRunning = during.length > 0 ? during[during.length - 1]! : afterSubmit;
  if (before !== afterSubmit && lastRunning !== after) {
    return { kind: 'unreliable', why: `the balance moved both when the task was sent (${before} -> ${afterSubmit}) and after it ended (${lastRunning} -> ${after}): another client may be using the key`, readings };
  }
  const credits = Math.round((before - after) * 1e6) / 1e6;
  if (credits < 0) return { kind: 'unreliable', why: `the balance rose by ${-credits} credits during the probe`, readings };
  return { kind: 'measured', credits, readings };
}
