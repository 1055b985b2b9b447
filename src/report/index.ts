/**
 * The report writers of `genbatch run` and `genbatch report`.
 *
 * writeReports() writes report.json, report.csv, report.md and report.html
 * into the output folder, one after another (each iterates data.jobs() once;
 * they never run side by side, so the iterable may hold a database cursor).
 * Each file is streamed to a temporary file, fsynced and renamed into place.
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { removeStaleTemps } from './atomic.js';
import { writeCsvReport } from './csv.js';
import { writeHtmlReport, type HtmlOptions } from './html.js';
import { writeJsonReport } from './json.js';
import { writeMarkdownReport } from './markdown.js';
import type { ReportData } from './types.js';

export type { ReportData, ReportFile, ReportJob, ReportSummary } from './types.js';
export { formatSummaryLine, formatDuration, formatCredits } from './format.js';
export { writeJsonReport } from './json.js';
export { writeCsvReport } from './csv.js';
export { writeMarkdownReport } from './markdown.js';
export { writeHtmlReport } from './html.js';

export interface ReportPaths {
  json: string;
  csv: string;
  md: string;
  html: string;
}

export interface ReportOptions extends HtmlOptions {
  /** Failed/uncertain/expired jobs listed per state in report.md. Default 50. */
  mdListLimit?: number;
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
  await writeJsonReport(paths.json, data);
  await writeCsvReport(paths.csv, data);
  await writeMarkdownReport(paths.md, data, options.mdListLimit);
  await writeHtmlReport(paths.html, data, options);
  return paths;
}
