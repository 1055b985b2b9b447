import cliProgress from 'cli-progress';
import type { EngineEvent, EventBus } from '../engine/index.js';
import type { JobState } from '../store/index.js';

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
  out?: NodeJS.WritableStream;
  err?: NodeJS.WritableStream;
}

type Counts = Record<JobState, number>;

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
      pending += JSON.stringify({ ts: new Date().toISOString(), ...e }) + '\n';
      if (pending.length > 65_536) flush();
      else scheduled ??= setImmediate(flush);
    });
    return () => {
      off();
      if (scheduled) clearImmediate(scheduled);
      flush();
    };
  }
  let counts: Counts | null = null;
  let total = 0;
  let uploads = 0;
  let previousMoved = 0;
  let credits = 0;
  let bars: { multi: cliProgress.MultiBar; submitted: cliProgress.SingleBar; done: cliProgress.SingleBar; failed: cliProgress.SingleBar } | null = null;
  let timer: NodeJS.Timeout | null = null;
  let reportsLine: string | null = null;

  const line = (): string => {
    if (!counts) return '';
    const c = counts;
    const running = c.submitting + c.submitted + c.downloading;
    return `${c.done}/${total} done, ${running} in flight, ${c.pending} pending, ${c.failed} failed, ${c.uncertain} uncertain, ${c.expired} expired, ${uploads} uploads`;
  };
  const update = () => {
    if (!bars || !counts) return;
    const c = counts;
    const sent = total - c.pending;
    const payload = { running: c.submitted + c.downloading, uploads, credits };
    bars.submitted.update(sent, payload);
    bars.done.update(c.done, payload);
    bars.failed.update(c.failed + c.uncertain + c.expired, payload);
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
          `genbatch: estimate ${e.pending_credits} credits for the jobs left${e.unknown_price_jobs.length ? ` (+${e.unknown_price_jobs.length} job(s) of unknown price)` : ''}${e.balance !== null ? `; balance ${e.balance}` : ''}\n`,
        );
        if (o.tty && counts && counts.pending > 0) {
          const fmt = (name: string) => `${name.padEnd(10)} {bar} {value}/{total}`;
          const multi = new cliProgress.MultiBar({ clearOnComplete: false, hideCursor: true, stream: err, format: '{name} {bar} {value}/{total}' }, cliProgress.Presets.shades_classic);
          bars = {
            multi,
            submitted: multi.create(total, 0, { name: 'submitted'.padEnd(10) }, { format: fmt('submitted') + ' | running {running} | uploads {uploads} | estimate {credits} credits' }),
            done: multi.create(total, 0, { name: 'done'.padEnd(10) }, { format: fmt('done') }),
            failed: multi.create(total, 0, { name: 'failed'.padEnd(10) }, { format: fmt('not done') + ' (failed, uncertain, expired)' }),
          };
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
        bars?.submitted.setTotal(total);
        bars?.done.setTotal(total);
        bars?.failed.setTotal(total);
        update();
        break;
      case 'previous':
        previousMoved++;
        if (previousMoved <= 5) out.write(`genbatch: job ${e.id} is sent again; the files of its earlier result were moved to ${e.dir}/\n`);
        else if (previousMoved === 6) out.write('genbatch: (more jobs sent again: their earlier files are in <job>/previous-<n>/ too)\n');
        break;
      case 'upload':
        if (!e.reused) uploads++;
        update();
        break;
      case 'job':
        if (counts) {
          counts[e.from]--;
          counts[e.to]++;
        }
        if (e.to === 'done' || e.to === 'failed') update();
        else update();
        break;
      case 'warning':
        if (!bars) err.write(`genbatch: warning: ${e.message}\n`);
        break;
      case 'stopping':
        err.write(
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
          bars.multi.stop();
          bars = null;
        }
        if (timer) clearInterval(timer);
        counts = e.counts;
        const c = e.counts;
        const parts = (Object.keys(c) as JobState[]).filter((k) => c[k] > 0).map((k) => `${c[k]} ${k}`);
        out.write(`genbatch: finished in ${e.wall_seconds.toFixed(1)} s: ${parts.join(', ') || 'no jobs'}${e.balance_after !== null ? `; balance ${e.balance_after}` : ''}\n`);
        if (reportsLine) out.write(`genbatch: ${reportsLine}\n`);
        break;
      }
      default:
        break;
    }
  });
  return () => {
    off();
    if (timer) clearInterval(timer);
    if (bars) bars.multi.stop();
  };
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
