/**
 * The report writers of `genbatch run` and `genbatch report`.
 *
 * writeReports() writes report.json, report.csv, report.md and report.html
 * into the output folder from one pass over data.jobs() (each job goes to the
 * four writers in turn; the iterable may hold a database cursor). Each file is
 * written to its own temporary file, fsynced and renamed into place. With an
 * `s3://bucket/prefix` output, the four are objects under the prefix instead
 * (src/report/objects.ts): each key only ever holds a whole report.
 */
import { Root } from '../lib/root.js';
import { join } from 'node:path';
import { removeStaleTemps } from './atomic.js';
import { csvSink } from './csv.js';
import { htmlSink, type HtmlOptions } from './html.js';
import { jsonSink } from './json.js';
import { markdownSink } from './markdown.js';
import { objectReports } from './objects.js';
import { writeSinks, type OpenReport } from './sink.js';
import type { ReportData } from './types.js';
import { withRetry, type RetryPolicy } from '../client/retry.js';
import { isS3Url, openBucket, s3UrlOf, type ObjectOut, type UploadJournal } from '../storage/index.js';

export type { ReportData, ReportFile, ReportInvocation, ReportJob, ReportSummary } from './types.js';
export { formatSummaryLine, formatDuration, formatCredits } from './format.js';
export { writeJsonReport } from './json.js';
export { writeCsvReport } from './csv.js';
export { writeMarkdownReport } from './markdown.js';
export { writeHtmlReport } from './html.js';
export { promptOf, varsOf, varsText } from './prompt.js';

export interface ReportPaths {
  json: string;
  csv: string;
  md: string;
  html: string;
}

export interface ReportOptions extends HtmlOptions {
  /** Failed/uncertain/expired jobs listed per state in report.md. Default 50. */
  mdListLimit?: number;
  /** Jobs in report.md's per-job table (prompt, variables); the rest are counted. Default 200. */
  mdJobLimit?: number;
  /**
   * With an `s3://` output: the run's open bucket and its upload journal (so a run killed while writing a
   * large report has its upload cleared by the next run). Default: a bucket opened from the AWS environment,
   * no journal (the reader commands).
   */
  bucket?: { out: ObjectOut; journal?: UploadJournal };
}

/** Tries of the reports' writes to a bucket. */
const BUCKET_RETRY: RetryPolicy = { baseMs: 500, maxMs: 10_000, maxAttempts: 5, jitter: 'full' };

const NAMES = { json: 'report.json', csv: 'report.csv', md: 'report.md', html: 'report.html' } as const;

/** The four report paths inside `outDir` (a folder, or `s3://bucket/prefix`: then the objects' URLs). */
export function reportPaths(outDir: string): ReportPaths {
  const at = (name: string) => (isS3Url(outDir) ? `${outDir.replace(/\/+$/, '')}/${name}` : join(outDir, name));
  return { json: at(NAMES.json), csv: at(NAMES.csv), md: at(NAMES.md), html: at(NAMES.html) };
}

/**
 * Write the four reports into `outDir` (created if missing), or as objects under `s3://bucket/prefix`;
 * returns their paths (URLs).
 */
export async function writeReports(outDir: string, data: ReportData, options: ReportOptions = {}): Promise<ReportPaths> {
  if (isS3Url(outDir)) {
    const out = options.bucket?.out ?? (await openBucket(outDir));
    try {
      // A cut connection or a 5xx of the bucket: the four are written again from the start (each key keeps
      // its earlier whole report meanwhile).
      await withRetry(() => writeAll(NAMES, data, options, objectReports(out, options.bucket?.journal)), { policy: BUCKET_RETRY, method: 'UPLOAD' });
    } finally {
      if (!options.bucket) out.close();
    }
    return reportPaths(s3UrlOf(out.loc));
  }
  // The output folder through its Root (src/lib/root.ts): made when missing, checked now; each report is a new
  // temporary file (O_EXCL|O_NOFOLLOW) renamed over its name in it.
  const root = Root.open(outDir, { create: true });
  await removeStaleTemps(root.dir);
  const paths = reportPaths(root.dir);
  await writeAll(paths, data, options);
  return paths;
}

/** One pass over the jobs feeds the four reports (each row and its files are read once). */
async function writeAll(to: ReportPaths, data: ReportData, options: ReportOptions, open?: OpenReport): Promise<void> {
  await writeSinks(
    [
      [to.json, jsonSink(data.summary)],
      [to.csv, csvSink()],
      [to.md, markdownSink(data.summary, options.mdListLimit, options.mdJobLimit)],
      [to.html, htmlSink(data.summary, options)],
    ],
    data.jobs(),
    open,
  );
}
export { CSS, escapeHtml, htmlSink, invocationTail, timeHtml } from './html.js';
export { PageData, fileHref, scriptJson } from './html-data.js';
export { PROBLEM_STATES, creditsLine, creditsNotes, formatBytes, orderedCounts, totalJobs } from './format.js';
