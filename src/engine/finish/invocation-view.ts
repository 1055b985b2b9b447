import { UsageError } from '../../errors.js';
import type { ReportInvocation } from '../../report/types.js';
import type { Store } from '../../store/index.js';
import { hasJobSendColumns } from '../../store/schema.js';
import { runCredits } from './report-data.js';

/**
 * One invocation of a run (`genbatch report --invocation N|last`): its balance readings and charge (measured,
 * reconstructed from the next invocation's opening reading, or unknown), and the jobs it was the last to send,
 * with their state now and their expected price when sent.
 */
export interface InvocationView {
  manifest: string;
  invocation: ReportInvocation;
  /** The jobs whose last send was by this invocation, in manifest order. */
  jobs: Array<{ id: string; model: string; state: string; expected_credits: number | null; error: string | null }>;
  /** The sum of their expected prices (jobs of unknown price are left out: see unknown_price_jobs). */
  expected_credits: number;
  unknown_price_jobs: number;
}

/** `which`: a number (1, 2, ...) or `last`. A UsageError names the invocations there are when it is none of them. */
export function invocationView(store: Store, which: string): InvocationView {
  const credits = runCredits(store);
  const byInvocation = store.jobsByInvocation();
  const list = credits.invocations;
  const n = which === 'last' ? (list.at(-1)?.n ?? null) : /^[1-9][0-9]*$/.test(which) ? Number(which) : NaN;
  if (Number.isNaN(n)) throw new UsageError(`--invocation: expected a number (1, 2, ...) or "last", got "${which}"`);
  const inv = list.find((i) => i.n === n);
  if (!inv) {
    const there = list.length === 0 ? 'the run has none (no invocation had work that could move the balance)' : `the run has ${list.length}: 1 to ${list.at(-1)!.n}`;
    throw new UsageError(`--invocation ${which}: no such invocation; ${there}`);
  }
  inv.jobs = byInvocation.get(inv.n) ?? { sent: 0, done: 0, failed: 0 };
  const jobs: InvocationView['jobs'] = [];
  let expected = 0;
  let unknown = 0;
  if (hasJobSendColumns(store.db)) {
    const rows = store.db
      .prepare('SELECT id, model, state, expected_credits, last_error FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? AND sent_by = ? ORDER BY seq')
      .raw(true)
      .iterate(store.run().id, inv.n) as IterableIterator<[string, string, string, number | null, string | null]>;
    for (const [id, model, state, credits, error] of rows) {
      jobs.push({ id, model, state, expected_credits: credits, error });
      if (credits === null) unknown++;
      else expected += credits;
    }
  }
  return { manifest: store.run().manifest, invocation: inv, jobs, expected_credits: Math.round(expected * 1e6) / 1e6, unknown_price_jobs: unknown };
}

/** The view as plain lines (without --json). */
export function invocationText(v: InvocationView): string {
  const i = v.invocation;
  const n = (x: number | null): string => (x === null ? 'unknown' : String(x));
  const j = i.jobs ?? { sent: 0, done: 0, failed: 0 };
  const lines = [
    `invocation ${i.n} of ${v.manifest}: started ${i.started_at}, ${i.finished_at === null ? 'did not finish (stopped or killed)' : `finished ${i.finished_at}`}`,
    `balance before ${n(i.balance_before)}, after ${i.charged_to === 'next-start' ? `not read (the next invocation's opening reading is used)` : n(i.balance_after)}`,
    `charged ${n(i.charged)} (${i.charged_source ?? 'no reading to measure it'}); expected ${v.expected_credits}${v.unknown_price_jobs > 0 ? ` and ${v.unknown_price_jobs} job(s) of unknown price` : ''}`,
    `jobs it last sent: ${j.sent}, done ${j.done}, failed ${j.failed}`,
  ];
  for (const job of v.jobs) lines.push(`  ${job.id}\t${job.state}\t${job.model}\t${job.expected_credits ?? 'unknown'}${job.error ? `\t${job.error}` : ''}`);
  return lines.join('\n') + '\n';
}
