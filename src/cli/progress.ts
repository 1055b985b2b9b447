import type { EngineEvent, EventBus } from '../engine/index.js';
import type { JobState } from '../store/index.js';
import { formatCredits } from '../report/format.js';
import { LiveBlock } from './progress-bars.js';
import { Tally } from './progress-tally.js';

/**
 * Shows a run's events. `--json`: one NDJSON line per event on stdout.
 * On a TTY: bars on stderr, fitted to the terminal's width and redrawn on a
 * resize (progress-bars.ts). Otherwise: a plain line under 120 characters every
 * few seconds. Both show a rate and an ETA, and count over the whole run
 * (progress-tally.ts). Warnings go to stderr. Returns a function that stops the output.
 */
export interface ProgressOptions {
  json: boolean;
  tty: boolean;
  /** Seconds between plain lines (default 5). */
  everyS?: number;
  /** The command that runs this run again (`genbatch run <manifest> ...`): the summary of a run with failures adds `--redo failed`. */
  again?: string;
  /**
   * The command that sends failed or expired jobs again, from the run's start event, when it is not `again
   * --redo ...` (a worker's: genbatch run on the run's manifest, as `work` has no --redo).
   */
  redoAgain?: (start: { manifest: string; out_dir: string; base_url: string }) => string;
  /** The command as typed (with its --only, --limit): after Ctrl-C the summary says it resumes the run (default: `again`). */
  resume?: string;
  out?: NodeJS.WritableStream;
  err?: NodeJS.WritableStream;
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
  const tally = new Tally();
  let block: LiveBlock | null = null;
  let timer: NodeJS.Timeout | null = null;
  let reportsLine: string | null = null;
  /** Pending jobs this run leaves for a later one (--only, --limit); null: it sends them all. */
  let leftPending: number | null = null;
  let previousMoved = 0;
  /** The command of the redo line (o.again, or o.redoAgain of the start event). */
  let redoAgain = o.again ?? 'genbatch run <manifest>';
  /** A synced line was printed (a worker's joined line then says nothing new). */
  let synced = false;
  /** Why new submissions stopped early (a signal: the summary says how to resume). */
  let stopReason: string | null = null;
  /** A line for `stream`: above the bars while they are shown (so it is neither cut nor drawn over). */
  const say = (stream: NodeJS.WritableStream, text: string): void => {
    if (block) block.print(text, stream);
    else stream.write(text);
  };
  const endBars = () => {
    block?.stop();
    block = null;
    if (timer) clearInterval(timer);
    timer = null;
  };

  const off = bus.on((e: EngineEvent) => {
    const c = tally.counts;
    switch (e.type) {
      case 'start':
        if (o.redoAgain) redoAgain = o.redoAgain(e);
        out.write(`genbatch: output in ${e.out_dir} (state ${e.state})${e.sandbox ? `, against a sandbox in this process at ${e.base_url} (its credits are not real)` : `, service ${e.base_url}`}\n`);
        break;
      case 'lease-takeover':
        say(err, `genbatch: took over the state file from ${e.from} (no longer running)\n`);
        break;
      case 'synced': {
        tally.counts = { ...e.counts };
        tally.total = Object.entries(e.counts).reduce((a, [k, n]) => (k === 'skipped' ? a : a + n), 0);
        tally.files = e.files;
        if (e.joined) {
          // A worker joining a run (genbatch work, or run after its sync on PostgreSQL): the run as found, once.
          if (!synced) out.write(`genbatch: joined a run of ${e.jobs} jobs (${stateCounts(e.counts)})\n`);
        } else out.write(`genbatch: ${e.jobs} jobs (${e.new} new, ${e.changed} changed, ${e.unchanged} unchanged${e.skipped ? `, ${e.skipped} removed from the manifest` : ''})\n`);
        if (!e.joined && e.removed) out.write(`genbatch: ${e.removed} jobs no longer in the manifest (kept in the state, left out of the reports)\n`);
        synced = true;
        break;
      }
      case 'held': {
        const why = Object.entries(e.held).map(([reason, n]) => `${n} ${reason}`).join(', ');
        say(err, `genbatch: ${e.over.join('; ')}: sending the ${e.sent} job(s) that fit (${formatCredits(e.sent_credits)} credits); the others stay pending (${why})\n`);
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
        tally.callbacks = true;
        say(out, `genbatch: callback receiver on ${e.address}; the service calls ${e.public_url} (plus a secret path); a slow poll stays as the fallback\n`);
        break;
      case 'recovered':
        say(err, `genbatch: ${e.uncertain.length} job(s) were being submitted when the last run stopped; their outcome is unknown, marked uncertain (see --uncertain)\n`);
        break;
      case 'estimate':
        // Whole run: the known estimate of every job, of which the jobs not left to send count as sent.
        tally.credits = e.total_credits;
        tally.creditsSent = Math.max(0, e.total_credits - e.pending_credits);
        tally.balance = e.balance;
        out.write(
          `genbatch: estimate ${formatCredits(e.pending_credits)} credits for the jobs ${leftPending === null ? 'left' : 'this run sends'}${e.unknown_price_jobs.length ? ` (+${e.unknown_price_jobs.length} job(s) of unknown price)` : ''}${e.unknown_count_jobs?.length ? ` (+${e.unknown_count_jobs.length} for_each job(s) of unknown count: fan-out decided at run time)` : ''}${e.balance !== null ? `; balance ${formatCredits(e.balance)}` : ''}\n`,
        );
        // Bars or lines while some job is not finished (a resumed run may only wait on jobs already sent).
        if (!c || tally.finished() >= tally.total) break;
        tally.rate.sample(tally.finished());
        if (o.tty) block = new LiveBlock(err, (width, height) => tally.bars(width, height));
        else {
          timer = setInterval(() => out.write(`${tally.line()}\n`), (o.everyS ?? 5) * 1000);
          timer.unref();
        }
        break;
      case 'children':
        // A for_each job made new pending jobs.
        if (c) c.pending += e.ids.length;
        tally.total += e.ids.length;
        break;
      case 'previous':
        previousMoved++;
        if (previousMoved <= 5) say(out, `genbatch: job ${e.id} is sent again; the files of its earlier result were moved to ${e.dir}/\n`);
        else if (previousMoved === 6) say(out, 'genbatch: (more jobs sent again: their earlier files are in <job>/previous-<n>/ too)\n');
        break;
      case 'upload':
        if (e.reused) tally.reused++;
        else tally.uploads++;
        break;
      case 'sending':
        tally.creditsSent += e.estimated_credits ?? 0;
        break;
      case 'file':
        tally.files++;
        break;
      case 'job':
        if (c) {
          c[e.from]--;
          c[e.to]++;
        }
        break;
      case 'counts':
        // The whole run as the database holds it now (a worker on PostgreSQL): replaces what the job events added up.
        tally.counts = { ...e.counts };
        tally.total = Object.entries(e.counts).reduce((a, [k, n]) => (k === 'skipped' ? a : a + n), 0);
        tally.files = e.files;
        break;
      case 'wait':
        if (e.queued === 0) tally.waits.delete(e.what);
        else if (e.what === 'credit-cap') tally.waits.set(e.what, { text: `waiting for the credit cap: ${e.rule}`, until: null, timed: false });
        else if (e.what === 'status-rate') tally.waits.set(e.what, { text: `waiting for the status-read rate: ${e.rule} (--status-rate), ${e.queued} due`, until: null, timed: false });
        else tally.waits.set(e.what, { text: `waiting for the upload window: ${e.rule}`, until: e.next_in_ms === null ? null : Date.now() + e.next_in_ms, timed: true });
        break;
      case 'warning':
        say(err, `genbatch: warning: ${e.message}\n`);
        break;
      case 'price-learned':
        say(err, e.credits !== null ? `genbatch: learned the price of ${e.class} from job ${e.id}: ${e.credits} credits${e.credits === 0 ? ' (never taken as confirmed: its jobs still need --yes)' : ''}\n` : `genbatch: no price learned from job ${e.id} (${e.class}): ${e.why ?? 'unknown'}\n`);
        break;
      case 'cap':
        say(
          err,
          `genbatch: credit cap ${formatCredits(e.credits)} (${e.name}): charged ${formatCredits(e.charged)} so far; about ${formatCredits(e.pending_credits)} credits for the jobs left at the prices known; ${e.unconfirmed_jobs} job(s) have no price confirmed by a charge yet (the first job of each price class is sent alone and its charge read)\n`,
        );
        break;
      case 'cap-price':
        if (e.expected === null || Math.abs(e.charged - e.expected) > 1e-6) {
          say(err, `genbatch: job ${e.id} was charged ${formatCredits(e.charged)} credits (expected ${e.expected === null ? 'unknown' : formatCredits(e.expected)}): its price class is counted at ${formatCredits(e.price)} from now on\n`);
        }
        break;
      case 'stopping':
        tally.stopping = true;
        stopReason = e.reason;
        if (e.reason === 'credit-cap') {
          say(err, 'genbatch: the next job would go over the credit cap: no new submissions; waiting for the tasks in flight\n');
          break;
        }
        say(
          err,
          e.reason === 'signal'
            ? 'genbatch: stopping: no new submissions; waiting for requests in flight (press Ctrl-C again to quit at once; the state stays consistent)\n'
            : e.reason === 'insufficient-credits'
              ? 'genbatch: the service answered 402 insufficient credits: no new submissions; the remaining jobs stay pending for a later run\n'
              : 'genbatch: another process took over the state file: stopping\n',
        );
        break;
      case 'finish': {
        endBars();
        const ended = stopReason === 'signal' ? 'stopped after' : 'finished in';
        const resume = stopReason === 'signal' ? `; run the same command to resume: ${o.resume ?? o.again ?? 'genbatch run <manifest>'}` : '';
        out.write(`genbatch: ${ended} ${e.wall_seconds.toFixed(1)} s: ${stateCounts(e.counts)}${chargedText(e.run_charged, e.charged)}${e.balance_after !== null ? `; balance ${e.balance_after}` : ''}${resume}\n`);
        if (e.cap?.stopped) {
          const l = e.cap.left_credits;
          const more = l && l.credits > 0 ? `, about ${formatCredits(l.credits)} credits at the prices charged${l.unknown > 0 ? ` (+${l.unknown} of unknown price)` : ''}` : '';
          out.write(`genbatch: stopped at ${e.cap.name}: charged ${formatCredits(e.cap.charged)}, ${e.cap.left_pending} jobs left pending${more} (raise the cap to go on)\n`);
        }
        if (reportsLine) out.write(`genbatch: ${reportsLine}\n`);
        if (e.callbacks_ignored) out.write(`genbatch: ${e.callbacks_ignored} completion callback(s) ignored: they named another task than the job's, an earlier attempt, or no job of this run (a leaked or forged callback URL?)\n`);
        for (const line of redoLines(e, redoAgain, o.again ?? 'genbatch run <manifest>', leftPending ?? 0)) out.write(`genbatch: ${line}\n`);
        break;
      }
      default:
        break;
    }
  });
  return () => {
    off();
    endBars();
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
function redoLines(e: Extract<EngineEvent, { type: 'finish' }>, redo: string, again: string, leftPending: number): string[] {
  const lines: string[] = [];
  const states: string[] = [];
  const permanent = e.permanent ?? { count: 0, ids: [] };
  for (const [state, ids] of [['failed', e.failed_ids ?? []], ['expired', e.expired_ids ?? []]] as const) {
    const n = e.counts[state];
    if (n === 0) continue;
    if (state !== 'failed' || n > permanent.count) states.push(state);
    lines.push(`${state}: ${ids.join(', ')}${n > ids.length ? `, and ${n - ids.length} more` : ''}`);
  }
  if (states.length > 0) lines.push(`to send the ${states.join(' and ')} jobs again: ${redo} --redo ${states.join(',')}`);
  const uncertain = e.uncertain_ids ?? [];
  if (e.counts.uncertain > 0) {
    lines.push(`uncertain (their submit's outcome is unknown; a task may exist): ${uncertain.join(', ')}${e.counts.uncertain > uncertain.length ? `, and ${e.counts.uncertain - uncertain.length} more` : ''}`);
    lines.push(`to send the uncertain jobs again (a charge may be doubled): ${redo} --uncertain resubmit`);
  }
  if (permanent.count > 0) {
    lines.push(`failed permanently (the service refused their input; --redo failed passes them over): ${permanent.ids.join(', ')}${permanent.count > permanent.ids.length ? `, and ${permanent.count - permanent.ids.length} more` : ''}`);
    lines.push(`to send them anyway (or change their spec): ${redo} --redo failed-permanent`);
  }
  if (leftPending > 0 && e.counts.pending > 0) lines.push(`${e.counts.pending} job(s) left pending (--only, --limit): ${again} sends them`);
  // Jobs held by a cap or the balance, before sending or by a stop: the command that goes on, and what it needs first.
  const perNight = (s: string) => s.includes('per-invocation') || s.includes('per_invocation');
  for (const [reason, g] of Object.entries(e.not_done ?? {})) {
    let when: string;
    if (reason.startsWith('pending: over ')) {
      const bound = reason.slice('pending: over '.length);
      when = perNight(bound) ? 'the next time' : bound.startsWith('the balance') ? 'once the balance is topped up' : 'once the cap is raised';
    } else if (reason === 'pending: the credit cap stopped the sending') when = perNight(e.cap?.name ?? '') ? 'the next time' : 'once the cap is raised';
    else if (reason === 'pending: the balance ran out (402)') when = 'once the balance is topped up';
    else continue;
    lines.push(`${g.count} job(s) left pending (${reason.slice('pending: '.length)}): ${again} sends what fits ${when}`);
  }
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

/** `3 done, 2 pending` (the states with jobs), or `no jobs`. */
function stateCounts(counts: Record<JobState, number>): string {
  const parts = (Object.keys(counts) as JobState[]).filter((k) => counts[k] > 0).map((k) => `${counts[k]} ${k}`);
  return parts.join(', ') || 'no jobs';
}
