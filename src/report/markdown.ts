/**
 * report.md: a human summary. Counts per state, credits, wall time, files,
 * then the failed, uncertain and expired jobs with their errors (at most
 * `listLimit` per state, then "and N more"), then a table of the first
 * `jobLimit` jobs with what each asked (prompt, rows/matrix variables), then
 * a count of the rest. Everything that comes from the
 * manifest or the service sits in a code span, so no markdown or HTML in it is
 * interpreted by a renderer.
 */
import { writeSinks, type ReportSink } from './sink.js';
import { PROBLEM_STATES, chatLine, creditsLine, creditsNotes, fileTotals, formatBytes, formatCredits, formatDuration, oneLine, orderedCounts, redactUrl, totalJobs } from './format.js';
import { varsText } from './prompt.js';
import type { ReportData, ReportJob, ReportSummary } from './types.js';

/** Longest error text kept per job in report.md and report.html. */
export const ERROR_CHARS = 500;

/** An inline code span holding `text` literally (on one line), whatever backticks it contains. */
export function codeSpan(text: string, max = ERROR_CHARS): string {
  const flat = oneLine(text, max);
  if (flat === '') return '(empty)';
  let longest = 0;
  for (const run of flat.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  const fence = '`'.repeat(longest + 1);
  const pad = flat.startsWith('`') || flat.endsWith('`') || flat.startsWith(' ') ? ' ' : '';
  return `${fence}${pad}${flat}${pad}${fence}`;
}

/** Plain text for a table cell: markdown punctuation escaped with a backslash. */
function cellText(text: string, max = 80): string {
  return oneLine(text, max).replace(/[\\`*_[\]|<>&~]/g, '\\$&');
}

/** One row of the per-job table: id, state, model, prompt, variables, files. */
function jobRow(job: ReportJob): string {
  const vars = varsText(job.vars);
  return `| ${cellText(job.id, 60)} | ${cellText(job.state)} | ${cellText(job.model, 60)} | ${job.prompt === null ? '' : cellText(job.prompt, 120)} | ${vars === '' ? '' : cellText(vars, 80)} | ${job.files.length} |\n`;
}

interface ProblemList {
  shown: ReportJob[];
  more: number;
}

const TITLES: Record<string, string> = {
  failed: 'Failed',
  uncertain: 'Uncertain (submit outcome unknown: a task may exist at the service)',
  expired: 'Expired (results gone before they were downloaded)',
};

function problemLine(job: ReportJob): string {
  const where = [job.model && `model ${codeSpan(job.model, 80)}`, job.where && codeSpan(job.where, 120), job.task_id && `task ${codeSpan(job.task_id, 80)}`]
    .filter(Boolean)
    .join(', ');
  const error = job.error ? codeSpan(job.error) : 'no error message recorded';
  return `- ${codeSpan(job.id, 120)} (${where}): ${error}\n`;
}

/**
 * report.md as a sink: file totals, the problem lists and the first `jobLimit` rows of the per-job table
 * gathered job by job, everything written at the end.
 */
export function markdownSink(summary: ReportSummary, listLimit = 50, jobLimit = 200): ReportSink {
  const problems = new Map<string, ProblemList>(PROBLEM_STATES.map((s) => [s, { shown: [], more: 0 }]));
  const rows: string[] = [];
  let moreRows = 0;
  let files = 0;
  let bytes = 0;
  return {
    start: () => '',
    job(job) {
      const t = fileTotals(job.files);
      files += t.count;
      bytes += t.bytes;
      if (rows.length < jobLimit) rows.push(jobRow(job));
      else moreRows++;
      const list = problems.get(job.state);
      if (list) {
        if (list.shown.length < listLimit) list.shown.push(job);
        else list.more++;
      }
      return '';
    },
    end: () => [...markdownText(summary, problems, files, bytes), ...jobTable(rows, moreRows)],
  };
}

export async function writeMarkdownReport(path: string, data: ReportData, listLimit = 50, jobLimit = 200): Promise<void> {
  await writeSinks([[path, markdownSink(data.summary, listLimit, jobLimit)]], data.jobs());
}

function markdownText(s: ReportSummary, problems: Map<string, ProblemList>, files: number, bytes: number): string[] {
  const c = s.credits;
  const out: string[] = [];
  out.push('# genbatch report\n\n');
  out.push(`- Manifest: ${codeSpan(s.manifest, 1000)}\n`);
  out.push(`- Output folder: ${codeSpan(s.out_dir, 1000)}\n`);
  out.push(`- Service: ${codeSpan(redactUrl(s.base_url), 1000)}${s.sandbox ? ' (sandbox)' : ''}\n`);
  out.push(`- Started ${codeSpan(s.started_at, 40)}, finished ${codeSpan(s.finished_at, 40)}, wall time ${formatDuration(s.wall_seconds)}\n`);
  out.push(`- Files: ${files} (${formatBytes(bytes)})\n\n`);
  if (s.refused) out.push(`**The last invocation was refused before sending** (exit ${s.refused.exit_code}, ${codeSpan(s.refused.at, 40)}): ${cellText(s.refused.reason)}. It sent nothing; report.json gives each pending job this reason (\`pending_reason\`).\n\n`);

  out.push('## Jobs\n\n| State | Jobs |\n| --- | ---: |\n');
  for (const [state, n] of orderedCounts(s.counts)) out.push(`| ${cellText(state)} | ${n} |\n`);
  out.push(`| total | ${totalJobs(s.counts)} |\n\n`);

  out.push('## Credits\n\n');
  out.push(`- Estimated (known prices only): ${formatCredits(c.estimated_known)}\n`);
  out.push(`- Jobs of unknown price (not in the estimate): ${c.unknown_price_jobs}\n`);
  const bal = (v: number | null): string => (v === null ? 'unknown' : formatCredits(v));
  const runs = c.invocations.length;
  out.push(`- Charged over the run (${runs} invocation${runs === 1 ? '' : 's'}): ${bal(c.charged)}\n`);
  out.push(`- Balance before the first invocation: ${bal(c.balance_before)}, after the last: ${bal(c.balance_after)}\n`);
  if (c.user_prices) out.push('- Some prices were supplied by the user (--prices or the manifest), not by the catalogue.\n');
  if (runs > 0) {
    out.push('\n| Invocation | Started | Balance before | Balance after | Charged | Submits started |\n| ---: | --- | ---: | ---: | ---: | ---: |\n');
    for (const inv of c.invocations) {
      const after = inv.charged_to === 'next-start' ? 'not read (next opening reading used)' : bal(inv.balance_after);
      out.push(`| ${inv.n} | ${cellText(inv.started_at)} | ${bal(inv.balance_before)} | ${after} | ${bal(inv.charged)} | ${inv.submits ?? 'not recorded'} |\n`);
    }
    if (c.invocations.some((inv) => inv.jobs)) {
      out.push('\n| Invocation | Jobs sent (last sent by it) | Done | Failed | Charged | Charge |\n| ---: | ---: | ---: | ---: | ---: | --- |\n');
      for (const inv of c.invocations) {
        const j = inv.jobs ?? { sent: 0, done: 0, failed: 0 };
        out.push(`| ${inv.n} | ${j.sent} | ${j.done} | ${j.failed} | ${bal(inv.charged)} | ${inv.charged_source ?? 'unknown'} |\n`);
      }
    }
  }
  out.push('\n');
  for (const note of creditsNotes(s)) out.push(`${note}\n\n`);
  out.push(`In one line: ${creditsLine(s)}.\n`);
  const chat = chatLine(s.chat);
  if (chat !== null && s.chat) {
    out.push('\n## Chat\n\n| Chat jobs | Done | Repeated calls | Input tokens | Output tokens |\n| ---: | ---: | ---: | ---: | ---: |\n');
    out.push(`| ${s.chat.jobs} | ${s.chat.done} | ${s.chat.repeated_calls} | ${s.chat.input_tokens} | ${s.chat.output_tokens} |\n\nIn one line: ${chat}.\n`);
  }

  for (const state of PROBLEM_STATES) {
    const list = problems.get(state);
    if (!list || list.shown.length === 0) continue;
    out.push(`\n## ${TITLES[state] ?? state} (${list.shown.length + list.more})\n\n`);
    for (const job of list.shown) out.push(problemLine(job));
    if (list.more > 0) out.push(`\nand ${list.more} more (see report.csv or report.json).\n`);
  }
  return out;
}

/** The per-job table (what each job asked for), then the other reports. */
function jobTable(rows: string[], more: number): string[] {
  const out: string[] = [];
  if (rows.length > 0) {
    out.push(`\n## Jobs and what they asked (${rows.length + more})\n\n| Job | State | Model | Prompt | Variables | Files |\n| --- | --- | --- | --- | --- | ---: |\n`);
    for (const r of rows) out.push(r);
    if (more > 0) out.push(`\nand ${more} more job${more === 1 ? '' : 's'}, listed with their prompts and inputs in report.csv and report.json.\n`);
  }
  out.push('\n## Other reports\n\n- `report.json`: every job with its prompt, input as sent, files, sizes and sha256\n- `report.csv`: one row per job (prompt, variables and input included)\n- `report.html`: a gallery of every job beside its prompt, with search, filters and sort\n');
  return out;
}
