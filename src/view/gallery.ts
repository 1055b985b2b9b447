import { reportJobsAfter, reportJobsOf } from '../engine/index.js';
import { PROBLEM_STATES, htmlSink, scriptJson, totalJobs } from '../report/index.js';
import type { Store } from '../store/index.js';
import { VIEW_SCRIPT } from './app.js';
import { headValues, viewSummary } from './head.js';
import type { LiveState } from './live.js';

/**
 * The gallery's data, served in two parts so that the first card does not wait for every job (issue #24 item 5:
 * at 100,000 jobs the whole page was 24 MB, 1.6 s to serve): GET / is report.html's page with the header, the
 * summary, the problems and the first FIRST_ROWS rows (one page of cards); the page's script then asks
 * GET /api/rows?after=<n> for the rest, a stretch of CHUNK_ROWS rows at a time, each answer naming the `after`
 * of the next one (`next`; null: the run's end). Rows are report.html's (src/report/html-data.ts), built by the
 * view's one PageData so that state and model indexes mean the same in every answer.
 */

/** Rows in GET /: the gallery's first page of cards (PAGE in src/report/html-app.ts). */
export const FIRST_ROWS = 48;
/** Rows per GET /api/rows answer by default: about 1.2 MB of JSON at 100,000 jobs of bench/view.mjs. */
export const CHUNK_ROWS = 5000;
/** Problems (failed, uncertain, ... jobs) listed in the page, as report.html lists them. */
const PROBLEM_LIMIT = 1000;

/** GET /: the page, with the first rows and, in `<script id="gb-live">`, the point the live updates start from and the `after` of the rest. */
export function galleryPage(store: Store, live: LiveState): string {
  // One summary for the header's values and the page's header.
  let view: ReturnType<typeof viewSummary> | null = null;
  const start = live.start(() => headValues(store, undefined, (view = viewSummary(store))));
  const { summary } = view ?? viewSummary(store);
  // Read after `start`: a job changed while they are read comes again in the first poll.
  const first = reportJobsAfter(store, 0, FIRST_ROWS);
  const jobs = totalJobs(summary.counts);
  const problemCount = PROBLEM_STATES.reduce((n, s) => n + (summary.counts[s] ?? 0), 0);
  const problems = problemCount === 0 ? [] : reportJobsOf(store, store.summaryRowsIn(PROBLEM_STATES, PROBLEM_LIMIT));
  const sink = htmlSink(summary, {
    pageData: live.pageData,
    problemLimit: PROBLEM_LIMIT,
    totals: { jobs, files: store.fileTotals(), problems, problemCount },
    live: { script: VIEW_SCRIPT, data: scriptJson({ ...start, next: first.upto, total: jobs }) },
  });
  return [sink.start(), ...first.jobs.map((j) => sink.job(j)), ...sink.end()].join('');
}

/** `after` of GET /api/rows: a seq, decimal digits only (at most 15: a safe integer); else null. */
export function parseAfter(v: string | null): number | null {
  return v !== null && /^\d{1,15}$/.test(v) ? Number(v) : null;
}

/** GET /api/rows: `{rows, next, tables}`, the rows of the jobs after seq `after` (at most about `limit`), in manifest order. */
export function rowsAnswer(store: Store, live: LiveState, after: number, limit: number): string {
  const { jobs, upto } = reportJobsAfter(store, after, limit);
  const rows = jobs.map((j) => live.pageData.row(j));
  return `{"rows":[${rows.join(',')}],"next":${upto === null ? 'null' : String(upto)},"tables":${scriptJson(live.pageData.tables())}}`;
}
