/**
 * Small formatting helpers shared by the report writers and the CLI's final line.
 */
import { visible } from '../errors.js';
import type { ReportSummary } from './types.js';

/** Display order of job states; states not listed here follow, alphabetically. */
const STATE_ORDER = ['done', 'failed', 'uncertain', 'expired', 'exists', 'skipped', 'pending', 'submitting', 'submitted', 'downloading'];

/** States a reader must look at: listed with their errors in report.md and report.html. */
export const PROBLEM_STATES: readonly string[] = ['failed', 'uncertain', 'expired', 'exists', 'skipped'];

/** [state, count] pairs with count > 0, in display order. */
export function orderedCounts(counts: Record<string, number>): Array<[string, number]> {
  const known = STATE_ORDER.filter((s) => (counts[s] ?? 0) > 0);
  const other = Object.keys(counts)
    .filter((s) => !STATE_ORDER.includes(s) && (counts[s] ?? 0) > 0)
    .sort();
  return [...known, ...other].map((s) => [s, counts[s] ?? 0]);
}

export function totalJobs(counts: Record<string, number>): number {
  let n = 0;
  for (const v of Object.values(counts)) n += v;
  return n;
}

/**
 * Credits with at most 2 decimals, no trailing zeros: 12, 0.5, 3.25. A value that 2 decimals
 * would show as 0 keeps 2 significant digits (0.0005, 0.0012: a few chat calls), so a
 * charge is never shown as nothing.
 */
export function formatCredits(n: number): string {
  const r = Math.round(n * 100) / 100;
  if (r === 0 && n !== 0 && Number.isFinite(n)) return String(Number(n.toPrecision(2)));
  return String(r);
}

/** 12.3s, 4m 05s, 1h 02m 03s. */
export function formatDuration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '?';
  if (seconds < 60) return `${Math.round(seconds * 10) / 10}s`;
  const total = Math.round(seconds);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  const pad = (v: number): string => String(v).padStart(2, '0');
  return h > 0 ? `${h}h ${pad(m)}m ${pad(s)}s` : `${m}m ${pad(s)}s`;
}

/** 512 B, 1.5 KB, 23.4 MB (powers of 1024). */
export function formatBytes(n: number): string {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v} B` : `${v.toFixed(1)} ${units[i]}`;
}

/**
 * A base URL fit for a report: user, password, query and fragment removed
 * (a URL such as https://user:key@host would otherwise carry a secret into the reports).
 */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.username = '';
    u.password = '';
    u.search = '';
    u.hash = '';
    return u.toString();
  } catch {
    return '(unparseable URL)';
  }
}

/** The summary as written to the reports: the base URL redacted. */
export function reportSummary(summary: ReportSummary): ReportSummary {
  return { ...summary, base_url: redactUrl(summary.base_url) };
}

/**
 * One line of credit accounting, e.g. "estimated 120 credits (+2 jobs of unknown price), charged 118 (balance 1000 -> 882)",
 * or "..., charged 118 over 2 invocations (balance 1000 -> 880)" for a run stopped and resumed.
 */
export function creditsLine(summary: ReportSummary): string {
  const c = summary.credits;
  const runs = c.invocations.length;
  let line = `estimated ${formatCredits(c.estimated_known)} credit${c.estimated_known === 1 ? '' : 's'}`;
  if (c.unknown_price_jobs > 0) line += ` (+${c.unknown_price_jobs} job${c.unknown_price_jobs === 1 ? '' : 's'} of unknown price)`;
  if (c.user_prices) line += ' (some prices user-supplied)';
  const running = c.invocations.at(-1)?.running === true ? c.invocations.at(-1)!.n : null;
  if (c.charged !== null) line += `, charged ${formatCredits(c.charged)}${runs > 1 ? ` over ${runs} invocations` : ''}`;
  else line += running !== null ? `, charged: measured when invocation ${running} ends` : ', charged unknown';
  if (c.balance_before !== null || c.balance_after !== null) {
    const b = (v: number | null): string => (v === null ? '?' : formatCredits(v));
    line += ` (balance ${b(c.balance_before)} -> ${b(c.balance_after)})`;
  }
  if (c.cap) line += `; cap ${formatCredits(c.cap.credits)} (${c.cap.name})${c.cap.stopped ? ': the run stopped at the cap, jobs left pending' : ''}`;
  return line;
}

/** What "estimated" and "charged" measure, in plain sentences (report.md and report.html). */
export function creditsNotes(summary: ReportSummary): string[] {
  const c = summary.credits;
  const unknown = c.unknown_price_jobs;
  const notes = [
    `"Estimated" is the sum of the known prices of the run's jobs only${c.user_prices ? ' (some supplied by the user)' : ''}: ` +
      (unknown > 0 ? `${unknown} job${unknown === 1 ? '' : 's'} of unknown price ${unknown === 1 ? 'is' : 'are'} not in it.` : 'every job has a known price.'),
    '"Charged" is measured, not computed from prices: for each invocation of `genbatch run` on this manifest that had work (jobs to send or tasks to wait for), ' +
      'the balance read before its work minus the balance read after it, added up over the invocations. Anything else that uses the same API key meanwhile (another run, another program) moves the balance too and is counted; ' +
      'what happens between invocations (another use, a refund of a task that failed while nothing ran) is not.',
  ];
  if (c.invocations.length === 0) notes.push('No invocation had work, so nothing was charged by this run and the balance was not read.');
  for (const inv of c.invocations) {
    if (inv.running === true) notes.push(`Invocation ${inv.n} is running: its charge is measured when it ends (the balance is read then).`);
    else if (inv.charged_to === 'next-start') notes.push(`Invocation ${inv.n} has no closing balance reading (stopped before it, or the read failed): it is measured up to the opening reading of invocation ${inv.n + 1}.`);
    else if (inv.charged === null) {
      notes.push(
        inv.balance_before === null
          ? `Invocation ${inv.n} could not read the balance before its work: its charge, and so the run's, is unknown.`
          : `Invocation ${inv.n} has no closing balance reading (stopped before it, or the read failed): its charge, and so the run's, is unknown until a later invocation reads the balance.`,
      );
    }
  }
  return notes;
}

/**
 * The CLI's final line, e.g.
 * "20 jobs: 17 done, 2 failed, 1 uncertain; estimated 120 credits, charged 118 (balance 1000 -> 882); 4m 05s".
 */
export function formatSummaryLine(summary: ReportSummary): string {
  const parts = orderedCounts(summary.counts).map(([s, n]) => `${n} ${s}`);
  const total = totalJobs(summary.counts);
  const head = `${total} job${total === 1 ? '' : 's'}${parts.length ? `: ${parts.join(', ')}` : ''}`;
  return `${head}; ${creditsLine(summary)}; ${formatDuration(summary.wall_seconds)}`;
}

/**
 * The first `max` UTF-16 units of `text`, one fewer when the cut would split a surrogate pair
 * (an emoji kept half would be written as U+FFFD).
 */
export function headOf(text: string, max: number): string {
  if (text.length <= max) return text;
  const last = text.charCodeAt(max - 1);
  return text.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/** A single line of at most `max` characters: whitespace runs (newlines included) become one space. */
export function oneLine(text: string, max: number): string {
  // Control characters left after the spaces (ESC, ...) as \uXXXX: a report.md shown in a terminal cannot drive it.
  const flat = visible(text.replace(/\s+/g, ' ').trim());
  return flat.length > max ? `${headOf(flat, max - 1)}…` : flat;
}

/** Number of files and total bytes of a job. */
export function fileTotals(files: ReadonlyArray<{ size: number }>): { count: number; bytes: number } {
  let bytes = 0;
  for (const f of files) bytes += f.size;
  return { count: files.length, bytes };
}

/** The chat summary in one line, e.g. "4 chat jobs (4 done), 1 repeated call, 120 input and 48 output tokens"; null without chat jobs. */
export function chatLine(chat: { jobs: number; done: number; repeated_calls: number; input_tokens: number; output_tokens: number } | undefined): string | null {
  if (!chat) return null;
  const calls = `${chat.repeated_calls} repeated call${chat.repeated_calls === 1 ? '' : 's'} (a call cut short by a crash or a retry is made again)`;
  return `${chat.jobs} chat job${chat.jobs === 1 ? '' : 's'} (${chat.done} done), ${calls}, ${chat.input_tokens} input and ${chat.output_tokens} output tokens`;
}
