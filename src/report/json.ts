/**
 * report.json: `{ "summary": {...}, "jobs": [ {...}, ... ] }`.
 * Streamed job by job (one job per line, the summary pretty-printed first),
 * so a 100,000-job run never builds one giant string.
 */
import { writeSinks, type ReportSink } from './sink.js';
import { reportSummary } from './format.js';
import type { ReportData, ReportJob, ReportSummary } from './types.js';

/** The shape of one job in report.json (keys always present, null when unknown). */
export function jobRecord(job: ReportJob): Record<string, unknown> {
  return {
    id: job.id,
    model: job.model,
    where: job.where,
    vars: job.vars,
    prompt: job.prompt,
    input: job.input,
    task_id: job.task_id,
    state: job.state,
    attempts: job.attempts,
    error: job.error,
    // Only on a permanent failure (the service refused the input), so other entries read as before.
    ...(job.permanent ? { permanent: true } : {}),
    estimated_credits: job.estimated_credits,
    files: job.files.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256, type: f.type, content_type: f.contentType })),
    texts: job.texts,
    usage: job.usage ?? null,
    submitted_at: job.submitted_at,
    finished_at: job.finished_at,
    mark: job.mark ?? null,
    // Absent where the data has none (a reader that does not record them); always given by buildReportData.
    ...(job.sent_by !== undefined ? { sent_by: job.sent_by, expected_credits: job.expected_credits ?? null } : {}),
    ...(job.pending_reason !== undefined ? { pending_reason: job.pending_reason } : {}),
  };
}

/** report.json as a sink: the summary first, then one line per job. */
export function jsonSink(summary: ReportSummary): ReportSink {
  let first = true;
  return {
    start: () => `{\n  "summary": ${JSON.stringify(reportSummary(summary), null, 2).replace(/\n/g, '\n  ')},\n  "jobs": [`,
    job(job) {
      const text = `${first ? '\n    ' : ',\n    '}${JSON.stringify(jobRecord(job))}`;
      first = false;
      return text;
    },
    end: () => [first ? ']\n}\n' : '\n  ]\n}\n'],
  };
}

export async function writeJsonReport(path: string, data: ReportData): Promise<void> {
  await writeSinks([[path, jsonSink(data.summary)]], data.jobs());
}
