import { run as runManifest } from '../../api/run.js';
import { EventBus, type EngineEvent } from '../../engine/index.js';
import { attachProgress, flushed, ignoreBrokenPipe, type ProgressOptions } from '../progress.js';
import { confineWanted } from '../confine.js';
import { displayUrl, stateOption } from '../../store/location.js';
import { EXIT, GenbatchError } from '../../errors.js';
import { RunEndWatch, notifyUrl, reportRunEnd } from '../run-end.js';

/**
 * `genbatch run <manifest>`: the checkpointed pipeline (src/api/run.ts, the library's run()). Rerunning
 * the same command resumes from the state file. This command adds the progress output and the signals.
 *
 * --sandbox starts the sandbox in this process with a fresh key and time scale
 * 0.02 (a 15-60 s image takes 0.3-1.2 s, a 90-300 s video 1.8-6 s, the upload
 * window of 60 s becomes 1.2 s), so the demo finishes in well under a minute.
 * --time-scale overrides it; against another server it scales the runner's own
 * waits (poll interval, first poll, backoff, upload window) to match a sandbox
 * started with the same --time-scale.
 */

export interface RunFlags {
  sandbox?: boolean;
  out?: string;
  state?: string;
  concurrency: number;
  yes?: boolean;
  maxCredits?: number;
  maxCreditsPerInvocation?: number;
  json?: boolean;
  baseUrl?: string;
  prices?: string;
  /** skip, resubmit or resubmit-after=DURATION (src/engine/prepare/uncertain.ts). */
  uncertain: string;
  callbackUrl?: string;
  listen?: string;
  timeScale?: number;
  /** Seconds: the total deadline of one API request (also GENBATCH_REQUEST_TIMEOUT). */
  requestTimeout?: number | string;
  /** --redo failed,expired */
  redo?: string;
  /** --only, each value as given (may be a comma list). */
  only?: string[];
  limit?: number;
  maxChanged?: number;
  keepChanged?: boolean;
  learnPrices?: boolean;
  /** --status-rate as typed: checked by the run (a number > 0). */
  statusRate?: string;
  /** --confine (or GENBATCH_CONFINE): the manifest may name only files inside its folder. */
  confine?: boolean;
  /** --notify URL: POST a JSON summary there when the run ends, whichever way (src/cli/run-end.ts). */
  notify?: string;
}

/**
 * The command that runs this run again (the end-of-run summary adds `--redo failed`): the manifest and the
 * options that say where the run is (output folder, state file, service) and how it runs (--max-credits,
 * --time-scale, ...). Not --redo, --only or --limit: each suggestion adds what it needs.
 */
function againCommand(manifest: string, flags: RunFlags): string {
  const parts = ['genbatch run', shellWord(manifest)];
  const add = (flag: string, value: string | number | undefined) => {
    if (value !== undefined) parts.push(flag, shellWord(String(value)));
  };
  if (flags.sandbox) parts.push('--sandbox');
  add('--out', flags.out);
  // A URL's password is never printed (with it in GENBATCH_STATE, the same command finds it again).
  add('--state', flags.state === undefined ? undefined : displayUrl(flags.state));
  add('--base-url', flags.baseUrl);
  add('--max-credits', flags.maxCredits);
  add('--max-credits-per-invocation', flags.maxCreditsPerInvocation);
  add('--time-scale', flags.timeScale);
  if (flags.concurrency !== 8) add('--concurrency', flags.concurrency);
  add('--prices', flags.prices);
  if (flags.uncertain !== 'skip') add('--uncertain', flags.uncertain);
  add('--callback-url', flags.callbackUrl);
  add('--listen', flags.listen);
  add('--status-rate', flags.statusRate);
  add('--request-timeout', flags.requestTimeout);
  if (flags.learnPrices) parts.push('--learn-prices');
  if (flags.confine) parts.push('--confine');
  if (flags.yes) parts.push('--yes');
  return parts.join(' ');
}

/** After Ctrl-C: the same command as typed, with its --only and --limit (not --redo: those jobs are pending already). */
function resumeCommand(again: string, flags: RunFlags): string {
  const parts = [again];
  for (const only of flags.only ?? []) parts.push('--only', shellWord(only));
  if (flags.limit !== undefined) parts.push('--limit', String(flags.limit));
  return parts.join(' ');
}

/** `s` as one POSIX shell word (quoted only when it must be). */
function shellWord(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

export default async function run(manifest: string, flags: RunFlags): Promise<number> {
  const { json, notify, ...options } = flags;
  const notifyTo = notifyUrl(notify);
  const watch = new RunEndWatch(manifest, flags.maxCredits ?? null);
  const again = againCommand(manifest, flags);
  return withProgress({ json: json === true, again, resume: resumeCommand(again, flags) }, async (onEvent, signal) => {
    let code: number = EXIT.internal;
    let error: unknown;
    try {
      const summary = await runManifest(manifest, {
        ...options,
        state: stateOption(flags.state),
        confine: confineWanted(flags.confine),
        onEvent: (e) => {
          watch.onEvent(e);
          onEvent(e);
        },
        signal,
      });
      code = summary.exitCode;
      return code;
    } catch (err) {
      error = err;
      code = err instanceof GenbatchError ? err.exitCode : EXIT.internal;
      throw err;
    } finally {
      // --json: the last line is the summary object, whichever way the run ended.
      if (json === true) onEvent(watch.summary(code, error));
      // $GITHUB_STEP_SUMMARY and --notify hear of every ending, a refusal or an error too; neither changes it.
      await reportRunEnd(watch.end(code, error), { notify: notifyTo, stepSummary: process.env.GITHUB_STEP_SUMMARY, warn: (m) => process.stderr.write(`genbatch: warning: ${m}\n`) });
    }
  });
}

/**
 * `fn` with the progress output (bars on a TTY, else plain lines; NDJSON events with json) and the signals:
 * the first SIGINT/SIGTERM aborts `signal` (stop submitting, finish what is in flight, write the report);
 * a second SIGINT gives the signal back to Node's default handler, which ends the process at once.
 */
export async function withProgress(o: { json: boolean; again: string; resume?: string; redoAgain?: ProgressOptions['redoAgain'] }, fn: (onEvent: (e: EngineEvent) => void, signal: AbortSignal) => Promise<number>): Promise<number> {
  ignoreBrokenPipe();
  const bus = new EventBus();
  const stopProgress = attachProgress(bus, { json: o.json, tty: process.stderr.isTTY === true && !o.json, again: o.again, resume: o.resume, ...(o.redoAgain ? { redoAgain: o.redoAgain } : {}) });
  const controller = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      process.removeListener('SIGINT', onSignal);
      process.removeListener('SIGTERM', onSignal);
      // Events still queued for the next write go out first (the default handler ends the process at once).
      stopProgress();
      process.kill(process.pid, sig);
      return;
    }
    controller.abort(sig);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    return await fn(bus.emit, controller.signal);
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    stopProgress();
    await flushed(process.stdout);
    await flushed(process.stderr);
  }
}
