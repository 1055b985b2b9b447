import type { SummaryRow } from '../store/types.js';

/** Ids listed per reason in the end-of-run summary (`not_done`); past it, `more` says how many were left off. */
export const NOT_DONE_IDS = 1000;

/** One reason of the end-of-run summary: how many jobs, their ids in manifest order (at most NOT_DONE_IDS), and how many more. */
export interface NotDone {
  count: number;
  ids: string[];
  more?: number;
}

/**
 * Every job not done at the end of a run, grouped by why: `{ "<reason>": { count, ids, more? } }`. A pending job
 * held before sending has the bound it broke (`pending: over --max-credits-per-invocation 40`); another pending
 * job the way the run stopped (`pending: the credit cap stopped the sending`, `pending: the balance ran out
 * (402)`, `pending: interrupted`, `pending: another process took over`), one --only/--limit did not choose
 * `pending: not chosen (--only, --limit)`, else its last error (an upload that kept failing); a job in any other
 * state its state and its last error, first line, cut at 120 characters.
 */
export function notDone(rows: Iterable<SummaryRow>, held: ReadonlyMap<string, string>, stop: string | null, aborted: boolean, selected: ReadonlySet<string> | null = null): Record<string, NotDone> {
  const out: Record<string, NotDone> = {};
  for (const row of rows) {
    if (row.state === 'done') continue;
    const why = row.state === 'pending' ? (pendingWhy(held.get(row.id), stop, aborted) ?? (selected !== null && !selected.has(row.id) ? 'not chosen (--only, --limit)' : row.last_error ? detail(row.last_error) : 'left for the next run')) : detail(row.last_error);
    const reason = `${row.state}: ${why}`;
    const g = (out[reason] ??= { count: 0, ids: [] });
    g.count++;
    if (g.ids.length < NOT_DONE_IDS) g.ids.push(row.id);
    else g.more = g.count - g.ids.length;
  }
  return out;
}

function pendingWhy(held: string | undefined, stop: string | null, aborted: boolean): string | null {
  if (held !== undefined) return held;
  if (aborted || stop === 'signal') return 'interrupted';
  if (stop === 'credit-cap') return 'the credit cap stopped the sending';
  if (stop === 'insufficient-credits') return 'the balance ran out (402)';
  if (stop === 'lease-lost') return 'another process took over the state file';
  return null;
}

function detail(error: string | null): string {
  if (!error) return 'no error recorded';
  const line = error.split('\n', 1)[0]!;
  return line.length > 120 ? `${line.slice(0, 119)}…` : line;
}
