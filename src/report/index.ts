/**
 * The report writers of `genbatch run` and `genbatch report`.
 *
 * writeReports() writes report.json, report.csv, report.md and report.html
 * into the output folder from one pass over data.jobs() (each job goes to the
 * four writers in turn; the iterable may hold a database cursor). Each file is
 * written to its own temporary file, fsynced and renamed into place.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { removeStaleTemps } from './atomic.js';
import { csvSink } from './csv.js';
import { htmlSink, type HtmlOptions } from './html.js';
import { jsonSink } from './json.js';
import { markdownSink } from './markdown.js';
import { writeSinks } from './sink.js';
import type { ReportData } from './types.js';

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
}

/** The four report paths inside `outDir`. */
export function reportPaths(outDir: string): ReportPaths {
  return {
    json: join(outDir, 'report.json'),
    csv: join(outDir, 'report.csv'),
    md: join(outDir, 'report.md'),
    html: join(outDir, 'report.html'),
  };
}

/** Write the four reports into `outDir` (created if missing); returns their paths. */
export async function writeReports(outDir: string, data: ReportData, options: ReportOptions = {}): Promise<ReportPaths> {
  await mkdir(outDir, { recursive: true });
  await removeStaleTemps(outDir);
  const paths = reportPaths(outDir);
  // One pass over the jobs feeds the four reports (each row and its files are read once).
  await writeSinks(
    [
      [paths.json, jsonSink(data.summary)],
      [paths.csv, csvSink()],
      [paths.md, markdownSink(data.summary, options.mdListLimit, options.mdJobLimit)],
      [paths.html, htmlSink(data.summary, options)],
    ],
    data.jobs(),
  );
  return paths;
}
export { CSS, escapeHtml, htmlSink, timeHtml } from './html.js';
export { PageData, fileHref, scriptJson } from './html-data.js';
export { formatBytes, orderedCounts, totalJobs } from './format.js';
