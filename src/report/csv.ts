/**
 * report.csv: a header row, then one row per job, RFC 4180: CRLF line ends,
 * a field quoted when it holds a comma, a double quote, CR or LF, quotes doubled.
 * Choices: UTF-8 without a BOM; null as an empty field; values are written
 * exactly (no spreadsheet-formula defusing, which would change the data).
 */
import { writeSinks, type ReportSink } from './sink.js';
import { varsText } from './prompt.js';
import type { ReportData, ReportJob } from './types.js';

/**
 * Columns added later come last, so the earlier ones keep their places: input_tokens and output_tokens (chat
 * jobs; empty for others), then prompt (promptOf), vars (`mood=rainy, row=17`) and input (the input as sent, as
 * JSON), then mark (approved, rejected, empty for none).
 */
export const CSV_COLUMNS = ['id', 'model', 'where', 'state', 'task_id', 'attempts', 'estimated_credits', 'files', 'bytes', 'error', 'input_tokens', 'output_tokens', 'prompt', 'vars', 'input', 'mark'] as const;

const NEEDS_QUOTES = /[",\r\n]/;

function csvText(s: string): string {
  return NEEDS_QUOTES.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function csvField(value: string | number | null): string {
  if (value === null) return '';
  return csvText(typeof value === 'string' ? value : String(value));
}

/** One row; built field by field (no array of cells per job: ~3x less CPU on a cold 100,000-job pass). */
export function csvRow(job: ReportJob): string {
  let count = 0;
  let bytes = 0;
  for (const f of job.files) {
    count++;
    bytes += f.size;
  }
  const u = job.usage;
  return `${csvText(job.id)},${csvText(job.model)},${csvText(job.where)},${csvText(job.state)},${csvField(job.task_id)},${csvField(job.attempts)},${csvField(job.estimated_credits)},${csvField(count)},${csvField(bytes)},${csvField(job.error)},${csvField(u?.input_tokens ?? null)},${csvField(u?.output_tokens ?? null)},${csvField(job.prompt)},${csvText(varsText(job.vars))},${csvField(job.input === null ? null : JSON.stringify(job.input))},${csvField(job.mark?.state ?? null)}\r\n`;
}

/** report.csv as a sink: the header, then one row per job. */
export function csvSink(): ReportSink {
  return { start: () => `${CSV_COLUMNS.join(',')}\r\n`, job: csvRow, end: () => [] };
}

export async function writeCsvReport(path: string, data: ReportData): Promise<void> {
  await writeSinks([[path, csvSink()]], data.jobs());
}
