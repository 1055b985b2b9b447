import { ServiceClient, type BalanceAnswer } from '../client/index.js';
import type { ProbePlanEntry } from '../engine/index.js';
import type { EngineEvent } from '../engine/events.js';
import { FreeClasses, NEVER_MOVED, probe, type PriceBook, type ProbeOutcome } from '../pricing/index.js';

/**
 * run --learn-prices: the first job of each class of unknown price sent alone (a sub-run of the run
 * itself: no extra task), measured as `genbatch prices probe` measures (src/pricing/probe.ts): the
 * balance read until it holds still before the job is sent, after the submit, while the task runs,
 * and until it settles after; a price is kept only from a move this task explains, and only when the
 * readings and the charge can be true. A class at 0 is kept only when another class of the same
 * invocation moved the balance. Each class ends in one `price-learned` event (credits null: why).
 */

/** A sub-run sending one job alone; its events are passed to `onEvent`. */
export type RunAlone<S> = (entry: ProbePlanEntry, onEvent: (e: EngineEvent) => void) => Promise<S>;

export interface LearnDeps<S> {
  baseUrl: string;
  apiKey: string;
  timeScale: number;
  requestMs: number | null;
  book: PriceBook;
  signal?: AbortSignal | undefined;
  emit: (e: EngineEvent) => void;
  runAlone: RunAlone<S>;
  /** True when a sub-run was stopped (the caller returns its summary). */
  stopped: (summary: S) => boolean;
}

const NOT_DONE = 'the job did not end done in its own run (already done, or it failed: a failed task is refunded)';

/** Learn the price of each class; returns the summary of a sub-run that was stopped, else null. */
export async function learnPrices<S>(classes: ProbePlanEntry[], d: LearnDeps<S>): Promise<S | null> {
  const client = new ServiceClient({
    baseUrl: d.baseUrl,
    apiKey: d.apiKey,
    policy: { baseMs: 1000 * d.timeScale, maxMs: Math.max(50, 60_000 * d.timeScale), maxAttempts: 6, jitter: 'full' },
    ...(d.requestMs !== null ? { timeouts: { requestMs: d.requestMs } } : {}),
  });
  const free = new FreeClasses<ProbePlanEntry>();
  const keep = (entry: ProbePlanEntry, credits: number): void => {
    d.book.record(d.baseUrl, entry.cls, credits, new Date().toISOString());
    d.book.save();
    d.emit({ type: 'price-learned', id: entry.job.id, class: entry.cls.label, credits, why: null });
  };
  try {
    for (const entry of classes) {
      if (d.signal?.aborted) break;
      if ((entry.job.needs?.length ?? 0) > 0) continue; // it would take its parents along: not one task alone
      const { outcome, summary } = await learnOne(entry, client, d);
      if (summary !== null && d.stopped(summary)) return summary;
      if (outcome.kind !== 'measured') d.emit({ type: 'price-learned', id: entry.job.id, class: entry.cls.label, credits: null, why: outcome.why });
      else if (!free.measured(entry, outcome.credits)) keep(entry, outcome.credits);
    }
    const { record, refuse } = free.settle();
    for (const entry of record) keep(entry, 0);
    for (const entry of refuse) d.emit({ type: 'price-learned', id: entry.job.id, class: entry.cls.label, credits: null, why: NEVER_MOVED });
  } finally {
    await client.close();
  }
  return null;
}

/** One class: its job's sub-run inside a probe (started once the balance holds still). */
async function learnOne<S>(entry: ProbePlanEntry, client: ServiceClient, d: LearnDeps<S>): Promise<{ outcome: ProbeOutcome; summary: S | null }> {
  const settleMs = Math.max(50, 2_000 * d.timeScale);
  const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
  const during: BalanceAnswer[] = [];
  let summary: S | null = null;
  let done = false;
  // The sub-run and the readings while it runs: always waited for, whatever the probe decided (it may refuse
  // a reading taken just after the submit), so no sub-run outlives its class.
  let sub: Promise<S> | null = null;
  let settled: Promise<unknown> = Promise.resolve();
  let outcome: ProbeOutcome;
  try {
    outcome = await probe(
      {
        balance: () => client.balanceAnswer(),
        sleep,
        settleMs,
        start: async () => {
          // Accepted: the job left pending and submitting (its submit answered, or a chat call ended). Running
          // until it leaves submitted; the sub-run ends after its download.
          let accepted!: () => void;
          const isAccepted = new Promise<void>((r) => (accepted = r));
          let running = true;
          let over = false;
          const started = d.runAlone(entry, (e) => {
            if (e.type === 'job' && e.id === entry.job.id) {
              if (e.to === 'done') done = true;
              if (e.to !== 'submitting' && e.to !== 'pending') accepted();
              if (e.to !== 'submitting' && e.to !== 'submitted' && e.to !== 'pending') running = false;
            }
            d.emit(e);
          });
          sub = started;
          const ended = started.then(
            (s) => {
              summary = s;
              over = true;
            },
            () => {
              over = true; // thrown again below
            },
          );
          await Promise.race([isAccepted, ended]);
          const watch = (async () => {
            while (running && !over) {
              await Promise.race([sleep(settleMs), ended]);
              if (running && !over) during.push(await client.balanceAnswer());
            }
          })();
          settled = Promise.allSettled([ended, watch]);
          return {
            wait: async () => {
              await ended;
              await watch; // a failed balance read throws here
              return done ? 'finished' : 'failed';
            },
          };
        },
      },
      () => during,
    );
  } finally {
    await settled;
  }
  if (sub !== null) await sub; // a sub-run that threw throws here
  if (outcome.kind === 'failed' && !done) return { outcome: { ...outcome, why: NOT_DONE }, summary };
  return { outcome, summary };
}
