import { appendFile } from 'node:fs/promises';
import { basename } from 'node:path';
import type { EngineEvent } from '../engine/index.js';
import { EXIT, UsageError } from '../errors.js';
import { formatCredits } from '../report/format.js';
import type { JobState } from '../store/index.js';

/**
 * How a run reports itself when it ends, whichever way (done, failed, stopped, refused, an error): a markdown
 * summary appended to $GITHUB_STEP_SUMMARY when it is set (a GitHub Actions job's summary page), and with
 * `--notify URL` a JSON POST whose `text` field the incoming webhooks of common chat tools (Slack, Mattermost,
 * Rocket.Chat, Google Chat, Teams workflows) show as it is, with the counts beside it as fields.
 * Neither may fail the run: a failure is a warning on stderr. Neither holds a link (a local path means
 * nothing on a summary page) or the notify URL itself (a webhook URL is a secret).
 */

export interface RunEnd {
  manifest: string;
  /** From the exit code: done | failed | refused | balance | incomplete | cap-reached | failed-permanent | left-pending | interrupted | error. */
  outcome: string;
  exit_code: number;
  wall_seconds: number | null;
  counts: Record<JobState, number> | null;
  /** Charged over the whole run (null: not measured); this invocation's. */
  charged: number | null;
  charged_now: number | null;
  max_credits: number | null;
  failed_ids: string[];
  expired_ids: string[];
  /** The error that ended the run before its summary (a refusal, a usage error), its message. */
  error: string | null;
}

/** Collects what the end of a run reports from its events; `end()` once the run returned or threw. */
export class RunEndWatch {
  private finish: Extract<EngineEvent, { type: 'finish' }> | null = null;
  private readonly started = Date.now();
  constructor(
    private readonly manifest: string,
    private readonly maxCredits: number | null,
  ) {}
  onEvent = (e: EngineEvent): void => {
    if (e.type === 'finish') this.finish = e;
  };
  end(exitCode: number, err: unknown): RunEnd {
    const f = this.finish;
    return {
      manifest: basename(this.manifest),
      outcome: outcomeOf(exitCode, err !== undefined),
      exit_code: exitCode,
      wall_seconds: f ? f.wall_seconds : (Date.now() - this.started) / 1000,
      counts: f ? { ...f.counts } : null,
      charged: f?.run_charged ?? null,
      charged_now: f?.charged ?? null,
      max_credits: this.maxCredits,
      failed_ids: f?.failed_ids ?? [],
      expired_ids: f?.expired_ids ?? [],
      error: err === undefined ? null : err instanceof Error ? err.message : String(err),
    };
  }
  /** The `run --json` summary line (the last one), from the finish event when the run got that far. */
  summary(exitCode: number, err: unknown): Extract<EngineEvent, { type: 'summary' }> {
    const r = this.end(exitCode, err);
    const f = this.finish;
    return { type: 'summary', outcome: r.outcome, exit_code: exitCode, counts: r.counts, not_done: f?.not_done ?? null, charged: r.charged, charged_now: r.charged_now, caps: f?.caps ?? null, error: r.error };
  }
}

/** The outcome's name for each exit code of the table (src/errors.ts EXIT); `refused`: 2 or 3 by an error before anything was sent. */
function outcomeOf(code: number, refused: boolean): string {
  switch (code) {
    case EXIT.ok: return 'done';
    case EXIT.jobsFailed: return 'failed';
    case EXIT.usage: return 'refused';
    case EXIT.budget: return refused ? 'refused' : 'balance';
    case EXIT.incomplete: return 'incomplete';
    case EXIT.capReached: return 'cap-reached';
    case EXIT.failedPermanent: return 'failed-permanent';
    case EXIT.leftPending: return 'left-pending';
    case EXIT.sigint:
    case EXIT.sigterm: return 'interrupted';
    default: return 'error';
  }
}

/** `--notify` as given: an http(s) URL, else a usage error before anything is sent. */
export function notifyUrl(value: string | undefined): URL | null {
  if (value === undefined) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new UsageError(`--notify: not a URL (expected http://... or https://...)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`--notify: ${url.protocol} URL (expected http://... or https://...)`);
  return url;
}

/** One line: `genbatch run parti.yaml: failed (exit 1) in 25.0 s: 3 done, 2 failed; charged 12 credits (cap 50); failed: a, b`. */
export function endText(r: RunEnd): string {
  const parts = [`genbatch run ${r.manifest}: ${r.outcome} (exit ${r.exit_code})${r.wall_seconds !== null ? ` in ${r.wall_seconds.toFixed(1)} s` : ''}`];
  if (r.counts) parts.push(`: ${countsText(r.counts)}`);
  if (r.error) parts.push(`: ${r.error}`);
  if (r.charged !== null || r.charged_now !== null) parts.push(`; charged ${formatCredits((r.charged ?? r.charged_now)!)} credits${r.charged === null ? ' in this invocation' : ''}`);
  if (r.max_credits !== null) parts.push(`${r.charged !== null || r.charged_now !== null ? ' ' : '; '}(cap ${formatCredits(r.max_credits)})`);
  if (r.failed_ids.length) parts.push(`; failed: ${idList(r.failed_ids, r.counts?.failed)}`);
  if (r.expired_ids.length) parts.push(`; expired: ${idList(r.expired_ids, r.counts?.expired)}`);
  return parts.join('');
}

/** The markdown summary for $GITHUB_STEP_SUMMARY: a heading, the counts as a table, charge and cap, the failed ids. No links. */
export function endMarkdown(r: RunEnd): string {
  const lines = [`### genbatch run \`${tick(r.manifest)}\`: ${r.outcome} (exit ${r.exit_code})`, ''];
  if (r.error) lines.push(`Ended before its summary: ${plain(r.error)}`, '');
  if (r.counts) {
    lines.push('| state | jobs |', '| --- | ---: |');
    for (const [state, n] of Object.entries(r.counts)) if (n > 0) lines.push(`| ${state} | ${n} |`);
    lines.push('');
  }
  const charge = r.charged !== null ? `${formatCredits(r.charged)} credits over the run${r.charged_now !== null ? ` (${formatCredits(r.charged_now)} in this invocation)` : ''}` : r.charged_now !== null ? `${formatCredits(r.charged_now)} credits in this invocation` : 'not measured';
  lines.push(`- charged: ${charge}`);
  lines.push(`- cap (--max-credits): ${r.max_credits !== null ? formatCredits(r.max_credits) : 'none'}`);
  if (r.wall_seconds !== null) lines.push(`- time: ${r.wall_seconds.toFixed(1)} s`);
  if (r.failed_ids.length) lines.push(`- failed: ${r.failed_ids.map((id) => `\`${tick(id)}\``).join(', ')}${more(r.failed_ids, r.counts?.failed)}`);
  if (r.expired_ids.length) lines.push(`- expired: ${r.expired_ids.map((id) => `\`${tick(id)}\``).join(', ')}${more(r.expired_ids, r.counts?.expired)}`);
  return `${lines.join('\n')}\n\n`;
}

/** The --notify body: `text` (the one line) and the rest as fields, the counts flat (`done`, `failed`, ...). */
export function endJson(r: RunEnd): Record<string, unknown> {
  const { counts, ...rest } = r;
  return { text: endText(r), ...rest, ...(counts ?? {}) };
}

/** Writes the step summary and sends the notify; each failure is a warning (`warn`), never thrown. */
export async function reportRunEnd(r: RunEnd, o: { notify: URL | null; stepSummary: string | undefined; warn: (message: string) => void }): Promise<void> {
  if (o.stepSummary) {
    try {
      await appendFile(o.stepSummary, endMarkdown(r));
    } catch (err) {
      o.warn(`could not append the summary to $GITHUB_STEP_SUMMARY: ${(err as Error).message}`);
    }
  }
  if (o.notify) {
    // The URL's path often is the webhook's secret: only its origin is ever printed.
    const where = o.notify.origin;
    try {
      const res = await fetch(o.notify, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(endJson(r)), signal: AbortSignal.timeout(10_000), redirect: 'error' });
      await res.body?.cancel();
      if (!res.ok) o.warn(`--notify: ${where} answered HTTP ${res.status}; the run's result is as above`);
    } catch (err) {
      const e = err as Error & { cause?: { code?: string } };
      o.warn(`--notify: could not reach ${where} (${e.name === 'TimeoutError' ? 'no answer in 10 s' : (e.cause?.code ?? e.message)}); the run's result is as above`);
    }
  }
}

function countsText(counts: Record<string, number>): string {
  return Object.entries(counts).filter(([, n]) => n > 0).map(([k, n]) => `${n} ${k}`).join(', ') || 'no jobs';
}
function idList(ids: string[], n: number | undefined): string {
  return `${ids.join(', ')}${more(ids, n)}`;
}
function more(ids: string[], n: number | undefined): string {
  return n !== undefined && n > ids.length ? `, and ${n - ids.length} more` : '';
}
/** Inside a code span: no backticks. */
function tick(s: string): string {
  return s.replace(/`/g, "'");
}
/** Markdown text without links or markup from a message. */
function plain(s: string): string {
  return s.replace(/[[\]<>`*_|]/g, (c) => `\\${c}`);
}
