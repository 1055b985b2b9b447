import { buildReportData } from '../engine/index.js';
import { creditsLine, creditsNotes, formatBytes, formatDuration, invocationTail, type ReportData, type ReportSummary } from '../report/index.js';
import type { Store } from '../store/index.js';

/**
 * The gallery's header as the view shows it, read again at each change so that it follows a run in another
 * process: the report summary with the run's last invocation marked `running` while a run holds the state
 * file's lease (so no "no closing balance reading" note for an invocation that is only not finished yet),
 * and the end time "now" then.
 */
export function viewSummary(store: Store, counts: Readonly<Record<string, number>> = store.counts()): { summary: ReportSummary; running: boolean; data: ReportData } {
  // `data`: the page's rows come from the same read (GET /: one summary per page, not one for the header and one for the rows).
  const data = buildReportData(store, null, 0, counts);
  const s = data.summary;
  if (!store.writerActive()) return { summary: s, running: false, data };
  const last = s.credits.invocations.at(-1);
  if (last && last.finished_at === null) last.running = true;
  const now = new Date().toISOString();
  return { summary: { ...s, finished_at: now, wall_seconds: Math.max(0, (Date.parse(now) - Date.parse(s.started_at)) / 1000) }, running: true, data };
}

/** The header's values for the page's script (set as text): time, credits, files, the invocations and the notes. */
export interface HeadValues {
  time: { from: string; to: string; took: string; running: boolean };
  credits: string;
  files: string;
  invocations: Array<[number, string, string]>;
  notes: string[];
}

/** `counts`: store.counts() when the caller has just read it (a GROUP BY over every job); `view`: viewSummary() when the caller has it. */
export function headValues(store: Store, counts?: Readonly<Record<string, number>>, view: { summary: ReportSummary; running: boolean } = viewSummary(store, counts)): HeadValues {
  const { summary: s, running } = view;
  const f = store.fileTotals();
  return {
    time: { from: s.started_at, to: s.finished_at, took: formatDuration(s.wall_seconds), running },
    credits: creditsLine(s),
    files: `${f.count} (${formatBytes(f.bytes)})`,
    invocations: s.credits.invocations.map((inv) => [inv.n, inv.started_at, invocationTail(inv)]),
    notes: creditsNotes(s),
  };
}
