/**
 * report.csv: a header row, then one row per job, RFC 4180: CRLF line ends,
 * a field quoted when it holds a comma, a double quote, CR or LF, quotes doubled.
 * Choices: UTF-8 without a BOM; null as an empty field; values are written
 * exactly (no spreadsheet-formula defusing, which would change the data).
 */
import { writeSinks, type ReportSink } from './sink.js';
import { fileTotals } from './format.js';
import type { ReportData, ReportJob } from './types.js';

/** input_tokens and output_tokens (chat jobs; empty for others) come last, so the earlier columns keep their places. */
export const CSV_COLUMNS = ['id', 'model', 'where', 'state', 'task_id', 'attempts', 'estimated_credits', 'files', 'bytes', 'error', 'input_tokens', 'output_tokens'] as const;

export function csvField(value: string | number | null): string {
  if (value === null) return '';
  const s = String(value);
  return /[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function csvRow(job: ReportJob): string {
  const t = fileTotals(job.files);
  const cells = [job.id, job.model, job.where, job.state, job.task_id, job.attempts, job.estimated_credits, t.count, t.bytes, job.error, job.usage?.input_tokens ?? null, job.usage?.output_tokens ?? null];
  return `${cells.map(csvField).join(',')}\r\n`;
}

/** report.csv as a sink: the header, then one row per job. */
export function csvSink(): ReportSink {
  return { start: () => `${CSV_COLUMNS.join(',')}\r\n`, job: csvRow, end: () => [] };
}

export async function writeCsvReport(path: string, data: ReportData): Promise<void> {
  await writeSinks([[path, csvSink()]], data.jobs());
}
