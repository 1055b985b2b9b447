import type { JobState } from '../store/index.js';
import { clip, fitRow, fitText, type BarRow } from './progress-bars.js';
import { formatCredits, formatDuration } from '../report/format.js';
import { formatEta, formatRate, Rate } from './progress-rate.js';

/**
 * What progress shows, counted over the whole run: the job counts and the
 * files on disk start from the state file (the `synced` event), so a resumed
 * run counts the jobs and files of the invocations before it too. Uploads
 * and the rate are this invocation's.
 */
export class Tally {
  counts: Record<JobState, number> | null = null;
  /** Jobs of the run, except those removed from the manifest. */
  total = 0;
  uploads = 0;
  reused = 0;
  files = 0;
  /** Known estimated credits of the whole run, and of its jobs sent (before this invocation and in it). */
  credits = 0;
  creditsSent = 0;
  balance: number | null = null;
  stopping = false;
  /**
   * What holds the run now (the `wait` events), by what: `waiting for the upload window: 5 a minute` and when the
   * next slot frees (ms epoch; null: when an upload in flight ends), `waiting for the credit cap: ...` (no time).
   */
  readonly waits = new Map<string, { text: string; until: number | null; timed: boolean }>();
  /** Results come by callbacks (`--listen`): with nothing left to send, the run waits for them. */
  callbacks = false;
  readonly rate = new Rate();

  /** Jobs in a final state (what the rate counts). */
  finished(): number {
    const c = this.counts;
    return c ? c.done + c.failed + c.uncertain + c.expired + c.exists : 0;
  }

  /** `5.1 jobs/s, ETA 1m05s` (`stopping` in place of the ETA once new submissions stopped). */
  private pace(): [rate: string, eta: string] {
    const perS = this.rate.perSecond();
    return [formatRate(perS), this.stopping ? 'stopping' : formatEta(this.total - this.finished(), perS)];
  }

  /**
   * `waiting for the upload window: 5 a minute, next in 41 s` (and any other wait, `; ` between), `waiting for
   * callbacks: 12 outstanding` once nothing is left to send, or null when nothing holds the run.
   */
  waitText(now = Date.now()): string | null {
    const texts = [...this.waits.values()].map((w) =>
      !w.timed ? w.text : `${w.text}, ${w.until === null ? 'next when an upload in flight ends' : `next in ${Math.max(0, Math.ceil((w.until - now) / 1000))} s`}`,
    );
    const c = this.counts;
    if (this.callbacks && c && c.pending + c.submitting === 0 && c.submitted > 0) texts.push(`waiting for callbacks: ${c.submitted} outstanding`);
    return texts.length > 0 ? texts.join('; ') : null;
  }

  /** The bar rows, each fitted to `width`, at most `height` of them (the least useful dropped first). */
  bars(width: number, height: number): string[] {
    const c = this.counts;
    if (!c) return [];
    this.rate.sample(this.finished());
    const t = this.total;
    const row = (label: string, short: string, value: number, total: number, extra: string, count = `${value}/${total}`): BarRow => ({ label, short, value, total, count, extra });
    const bad = [c.failed && `${c.failed} failed`, c.uncertain && `${c.uncertain} uncertain`, c.expired && `${c.expired} expired`].filter(Boolean);
    const sent = this.creditsSent;
    const estimated = Math.max(this.credits, sent);
    // [priority (1 kept longest), line]
    const rows: Array<[number, string]> = [
      [5, fitRow(row('submitted', 'sent', t - c.pending, t, c.submitting ? `(${c.submitting} sending)` : ''), width)],
      [4, fitRow(row('running', 'run', c.submitted + c.downloading, t, c.downloading ? `(${c.downloading} downloading)` : ''), width)],
      [2, fitRow(row('downloaded', 'done', c.done, t, `jobs, ${this.files} files`), width)],
      [3, fitRow(row('failed', 'fail', c.failed + c.uncertain + c.expired, t, bad.length ? `(${bad.join(', ')})` : ''), width)],
      [6, fitRow(row('credits', 'cr', sent, estimated, `estimated, sent${this.balance === null ? '' : ` (balance ${formatCredits(this.balance)})`}`, `${formatCredits(sent)}/${formatCredits(estimated)}`), width)],
    ];
    if (this.uploads + this.reused > 0) rows.push([7, fitText('uploaded', 'up', `${this.uploads} sent, ${this.reused} reused`, width)]);
    const waiting = this.waitText();
    if (waiting) rows.push([2, fitText('waiting', 'wait', waiting, width)]);
    const [rate, eta] = this.pace();
    rows.push([1, fitText('rate', 'rate', `${rate}, ${eta}, ${formatDuration(Math.round(this.rate.elapsedS()))} elapsed`, width)]);
    if (rows.length <= height) return rows.map((r) => r[1]);
    const kept = new Set([...rows].sort((a, b) => a[0] - b[0]).slice(0, height));
    return rows.filter((r) => kept.has(r)).map((r) => r[1]);
  }

  /** The plain progress line (not a TTY), under `width` characters: the least useful parts dropped first. */
  line(width = 119): string {
    const c = this.counts;
    if (!c) return '';
    this.rate.sample(this.finished());
    const [rate, eta] = this.pace();
    // [priority, text]: shown in this order, dropped from the highest priority number.
    const parts: Array<[number, string]> = [
      [1, `${c.done}/${this.total} done`],
      [4, `${c.submitted + c.downloading} running`],
      [5, `${c.pending} pending`],
      [3, `${c.failed} failed`],
      ...(c.uncertain ? [[6, `${c.uncertain} uncertain`] as [number, string]] : []),
      ...(c.expired ? [[6, `${c.expired} expired`] as [number, string]] : []),
      [7, `${this.files} files`],
      [2, rate],
      [2, eta],
      [8, `${formatCredits(this.creditsSent)}/${formatCredits(Math.max(this.credits, this.creditsSent))} credits sent`],
      ...(this.uploads + this.reused ? [[9, `${this.uploads} uploaded (${this.reused} reused)`] as [number, string]] : []),
    ];
    const waiting = this.waitText();
    if (waiting) parts.push([2, waiting]);
    let shown = parts;
    const text = () => `genbatch: ${shown.map((p) => p[1]).join(', ')}`;
    for (let drop = 9; drop > 2 && text().length > width; drop--) shown = shown.filter((p) => p[0] < drop);
    return clip(text(), width);
  }
}
