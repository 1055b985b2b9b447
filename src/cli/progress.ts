import type cliProgress from 'cli-progress';
import { createRequire } from 'node:module';
import type { EngineEvent, EventBus } from '../engine/index.js';
import type { JobState } from '../store/index.js';
import { formatCredits } from '../report/format.js';

/**
 * Shows a run's events. `--json`: one NDJSON line per event on stdout.
 * On a TTY: cli-progress bars on stderr. Otherwise: a plain line every few
 * seconds. Warnings go to stderr. Returns a function that stops the output.
 */
export interface ProgressOptions {
  json: boolean;
  tty: boolean;
  /** Seconds between plain lines (default 5). */
  everyS?: number;
  /** The command that runs this run again (`genbatch run <manifest> ...`): the summary of a run with failures adds `--redo failed`. */
  again?: string;
  out?: NodeJS.WritableStream;
  err?: NodeJS.WritableStream;
}

type Counts = Record<JobState, number>;

/** cli-progress is loaded only when bars are drawn (a TTY run): ~20 ms of start-up that --json and plain runs skip. */
let barsModule: typeof cliProgress | null = null;
function loadBars(): typeof cliProgress {
  barsModule ??= createRequire(import.meta.url)('cli-progress') as typeof cliProgress;
  return barsModule;
}

export function attachProgress(bus: EventBus, o: ProgressOptions): () => void {
  const out = o.out ?? process.stdout;
  const err = o.err ?? process.stderr;
  if (o.json) {
    // Lines of one turn of the event loop go out in one write (a write per event cost ~0.15 ms of CPU on a pipe).
    let pending = '';
    let scheduled: NodeJS.Immediate | null = null;
    const flush = () => {
      scheduled = null;
      if (pending) out.write(pending);
      pending = '';
    };
    const off = bus.on((e) => {
      // The bytes of JSON.stringify({ ts, ...e }) without the spread copy: "ts" first, then the event's own keys in order.
      pending += `{"ts":"${new Date().toISOString()}",${JSON.stringify(e).slice(1)}\n`;
      if (pending.length > 65_536) flush();
      else scheduled ??= setImmediate(flush);
    });
    // Lines still queued when the process ends another way (an uncaught error, process.exit) are written then:
    // stdout pipes and files are written synchronously, so a reader still sees every event.
    const atExit = () => flush();
    process.on('exit', atExit);
    return () => {
      off();
      process.removeListener('exit', atExit);
      if (scheduled) clearImmediate(scheduled);
      flush();
    };
  }
  let counts: Counts | null = null;
  let total = 0;
  let uploads = 0;
  let reused = 0;
  let files = 0;
  let previousMoved = 0;
  /** Known estimate of the jobs left when the run started, and of those sent so far. */
  let credits = 0;
  let creditsSent = 0;
  let balance: number | null = null;
  type Bar = cliProgress.SingleBar;
  let bars: { multi: cliProgress.MultiBar; uploaded: Bar; submitted: Bar; running: Bar; downloaded: Bar; failed: Bar; credits: Bar } | null = null;
  let timer: NodeJS.Timeout | null = null;
  let reportsLine: string | null = null;
  /** Pending jobs this run leaves for a later one (--only, --limit); null: it sends them all. */
  let leftPending: number | null = null;
  /** A line for stderr: through the bars while they are shown (so it is neither lost nor drawn over). */
  const errLine = (text: string): void => {
    if (bars) bars.multi.log(text);
    else err.write(text);
  };
  const num = (n: number): string => (Number.isInteger(n) ? String(n) : n.toFixed(2));

  const line = (): string => {
    if (!counts) return '';
    const c = counts;
    return (
      `${c.done}/${total} done, ${uploads} uploaded (${reused} reused), ${total - c.pending} submitted, ${c.submitted} running, ${c.downloading} downloading, ` +
      `${files} files downloaded, ${c.pending} pending, ${c.failed} failed, ${c.uncertain} uncertain, ${c.expired} expired, ${num(creditsSent)}/${num(credits)} estimated credits sent`
    );
  };
  const update = () => {
    if (!bars || !counts) return;
    const c = counts;
    bars.uploaded.update(uploads + reused, { uploads, reused });
    bars.submitted.update(total - c.pending);
    bars.running.update(c.submitted + c.downloading, { downloading: c.downloading });
    bars.downloaded.update(c.done, { files });
    bars.failed.update(c.failed + c.uncertain + c.expired);
    bars.credits.update(Math.min(creditsSent, Math.max(credits, creditsSent)), { balance: balance === null ? '-' : num(balance) });
  };
  const setTotals = () => {
    if (!bars) return;
    for (const b of [bars.submitted, bars.running, bars.downloaded, bars.failed]) b.setTotal(total);
    bars.uploaded.setTotal(Math.max(1, uploads + reused));
    bars.credits.setTotal(Math.max(credits, creditsSent, 1));
  };

  const off = bus.on((e: EngineEvent) => {
    switch (e.type) {
      case 'start':
        out.write(`genbatch: output in ${e.out_dir} (state ${e.state})${e.sandbox ? `, against a sandbox in this process at ${e.base_url} (its credits are not real)` : `, service ${e.base_url}`}\n`);
        break;
      case 'lease-takeover':
        err.write(`genbatch: took over the state file from ${e.from} (no longer running)\n`);
        break;
      case 'synced': {
        counts = { ...e.counts };
        total = Object.entries(counts).reduce((a, [k, n]) => (k === 'skipped' ? a : a + n), 0);
        out.write(`genbatch: ${e.jobs} jobs (${e.new} new, ${e.changed} changed, ${e.unchanged} unchanged${e.skipped ? `, ${e.skipped} removed from the manifest` : ''})\n`);
        break;
      }
      case 'redo':
        out.write(`genbatch: --redo ${e.states.join(',')}: ${e.jobs} job(s) sent again\n`);
        break;
      case 'selection': {
        leftPending = e.left_pending;
        const by = [e.only ? `--only ${e.only.join(',')}` : '', e.limit !== null ? `--limit ${e.limit}` : ''].filter(Boolean).join(' ');
        const needed = e.needed > 0 ? `, ${e.needed} of them because jobs chosen need them` : '';
        out.write(`genbatch: ${by}: sending ${e.selected} of ${e.selected + e.left_pending} pending job(s)${needed}; ${e.left_pending} stay pending for a later run\n`);
        break;
      }
      case 'reports':
        reportsLine = e.written ? `reports: ${e.out_dir}/report.{json,csv,md,html}` : 'nothing changed: the reports are as they were (genbatch report rewrites them)';
        break;
      case 'listening':
        out.write(`genbatch: callback receiver on ${e.address}; the service calls ${e.public_url} (plus a secret path); a slow poll stays as the fallback\n`);
        break;
      case 'recovered':
        err.write(`genbatch: ${e.uncertain.length} job(s) were being submitted when the last run stopped; their outcome is unknown, marked uncertain (see --uncertain)\n`);
        break;
      case 'estimate':
        credits = e.pending_credits;
        out.write(
          `genbatch: estimate ${formatCredits(e.pending_credits)} credits for the jobs ${leftPending === null ? 'left' : 'this run sends'}${e.unknown_price_jobs.length ? ` (+${e.unknown_price_jobs.length} job(s) of unknown price)` : ''}${e.unknown_count_jobs?.length ? ` (+${e.unknown_count_jobs.length} for_each job(s) of unknown count: fan-out decided at run time)` : ''}${e.balance !== null ? `; balance ${formatCredits(e.balance)}` : ''}\n`,
        );
        balance = e.balance;
        if (o.tty && counts && counts.pending > 0) {
          const row = (name: string, rest: string) => `${name.padEnd(10)} ${rest}`;
          const bar = loadBars();
          const multi = new bar.MultiBar({ clearOnComplete: false, hideCursor: true, stream: err, format: '{bar} {value}/{total}' }, bar.Presets.shades_classic);
          bars = {
            multi,
            uploaded: multi.create(1, 0, { uploads: 0, reused: 0 }, { format: row('uploaded', '{uploads} sent, {reused} reused') }),
            submitted: multi.create(total, 0, {}, { format: row('submitted', '{bar} {value}/{total}') }),
            running: multi.create(total, 0, { downloading: 0 }, { format: row('running', '{bar} {value}/{total} (downloading {downloading})') }),
            downloaded: multi.create(total, 0, { files: 0 }, { format: row('downloaded', '{bar} {value}/{total} jobs, {files} files') }),
            failed: multi.create(total, 0, {}, { format: row('failed', '{bar} {value}/{total} (failed, uncertain, expired)') }),
            credits: multi.create(Math.max(credits, 1), 0, { balance: '-' }, { format: row('credits', '{bar} {value}/{total} estimated, sent (balance {balance})') }),
          };
          setTotals();
          update();
        } else if (!o.tty) {
          timer = setInterval(() => out.write(`genbatch: ${line()}\n`), (o.everyS ?? 5) * 1000);
          timer.unref();
        }
        break;
      case 'children':
        // A for_each job made new pending jobs.
        if (counts) counts.pending += e.ids.length;
        total += e.ids.length;
        setTotals();
        update();
        break;
      case 'previous':
        previousMoved++;
        if (previousMoved <= 5) out.write(`genbatch: job ${e.id} is sent again; the files of its earlier result were moved to ${e.dir}/\n`);
        else if (previousMoved === 6) out.write('genbatch: (more jobs sent again: their earlier files are in <job>/previous-<n>/ too)\n');
        break;
      case 'upload':
        if (e.reused) reused++;
        else uploads++;
        setTotals();
        update();
        break;
      case 'sending':
        creditsSent += e.estimated_credits ?? 0;
        setTotals();
        update();
        break;
      case 'file':
        files++;
        update();
        break;
      case 'job':
        if (counts) {
          counts[e.from]--;
          counts[e.to]++;
        }
        update();
        break;
      case 'warning':
        errLine(`genbatch: warning: ${e.message}\n`);
        break;
      case 'stopping':
        errLine(
          e.reason === 'signal'
            ? 'genbatch: stopping: no new submissions; waiting for requests in flight (press Ctrl-C again to quit at once; the state stays consistent)\n'
            : e.reason === 'insufficient-credits'
              ? 'genbatch: the service answered 402 insufficient credits: no new submissions; the remaining jobs stay pending for a later run\n'
              : 'genbatch: another process took over the state file: stopping\n',
        );
        break;
      case 'finish': {
        if (bars) {
          update();
          bars.multi.update(); // draws now, writing lines logged since the last redraw
          bars.multi.stop();
          bars = null;
        }
        if (timer) clearInterval(timer);
        counts = e.counts;
        const c = e.counts;
        const parts = (Object.keys(c) as JobState[]).filter((k) => c[k] > 0).map((k) => `${c[k]} ${k}`);
        out.write(`genbatch: finished in ${e.wall_seconds.toFixed(1)} s: ${parts.join(', ') || 'no jobs'}${chargedText(e.run_charged, e.charged)}${e.balance_after !== null ? `; balance ${e.balance_after}` : ''}\n`);
        if (reportsLine) out.write(`genbatch: ${reportsLine}\n`);
        for (const line of redoLines(e, o.again ?? 'genbatch run <manifest>', leftPending ?? 0)) out.write(`genbatch: ${line}\n`);
        break;
      }
      default:
        break;
    }
  });
  return () => {
    off();
    if (timer) clearInterval(timer);
    if (bars) {
      bars.multi.update();
      bars.multi.stop();
    }
  };
}

/** The end-of-run line's charge: the run's over all its invocations, and this invocation's. */
function chargedText(run: number | null, now: number | null): string {
  if (run !== null) return `; charged ${formatCredits(run)} credits over the run${now !== null ? `, ${formatCredits(now)} in this invocation` : ''}`;
  if (now !== null) return `; charged ${formatCredits(now)} credits in this invocation (the run's total is not known: an earlier invocation has no closing balance reading)`;
  return '';
}

/**
 * The end of the summary of a run with failed or expired jobs: their ids (the first 20, then how many more)
 * and the command that sends them again; and the jobs --only/--limit left pending.
 */
function redoLines(e: Extract<EngineEvent, { type: 'finish' }>, again: string, leftPending: number): string[] {
  const lines: string[] = [];
  const states: string[] = [];
  for (const [state, ids] of [['failed', e.failed_ids ?? []], ['expired', e.expired_ids ?? []]] as const) {
    const n = e.counts[state];
    if (n === 0) continue;
    states.push(state);
    lines.push(`${state}: ${ids.join(', ')}${n > ids.length ? `, and ${n - ids.length} more` : ''}`);
  }
  if (states.length > 0) lines.push(`to send the ${states.join(' and ')} jobs again: ${again} --redo ${states.join(',')}`);
  if (leftPending > 0 && e.counts.pending > 0) lines.push(`${e.counts.pending} job(s) left pending (--only, --limit): ${again} sends them`);
  return lines;
}

/** Resolves once everything written so far to `stream` is flushed (main.ts calls process.exit right after a command returns). */
export function flushed(stream: NodeJS.WritableStream = process.stdout): Promise<void> {
  return new Promise((resolve) => {
    if (!stream.write('', () => resolve())) stream.once('drain', () => resolve());
  });
}

/** A reader that goes away (`genbatch status | head`) is not an error: later writes are dropped. */
export function ignoreBrokenPipe(stream: NodeJS.WritableStream = process.stdout): void {
  if (stream.listenerCount('error') > 0) return;
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
}
