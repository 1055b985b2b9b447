import { run as runManifest } from '../../api/run.js';
import { EventBus, type EngineEvent } from '../../engine/index.js';
import { attachProgress, flushed, ignoreBrokenPipe, type ProgressOptions } from '../progress.js';
import { confineWanted } from '../confine.js';
import { displayUrl, stateOption } from '../../store/location.js';

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
  json?: boolean;
  baseUrl?: string;
  prices?: string;
  uncertain: 'skip' | 'resubmit';
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
  learnPrices?: boolean;
  /** --status-rate as typed: checked by the run (a number > 0). */
  statusRate?: string;
  /** --confine (or GENBATCH_CONFINE): the manifest may name only files inside its folder. */
  confine?: boolean;
}

/**
 * The command that runs this run again (the end-of-run summary adds `--redo failed`): the manifest and the
 * options that say where the run is (output folder, state file, service).
 */
function againCommand(manifest: string, flags: RunFlags): string {
  const q = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
  const parts = ['genbatch run', q(manifest)];
  if (flags.sandbox) parts.push('--sandbox');
  if (flags.out !== undefined) parts.push('--out', q(flags.out));
  // A URL's password is never printed (with it in GENBATCH_STATE, the same command finds it again).
  if (flags.state !== undefined) parts.push('--state', q(displayUrl(flags.state)));
  if (flags.baseUrl !== undefined) parts.push('--base-url', q(flags.baseUrl));
  return parts.join(' ');
}

export default async function run(manifest: string, flags: RunFlags): Promise<number> {
  const { json, ...options } = flags;
  return withProgress({ json: json === true, again: againCommand(manifest, flags) }, async (onEvent, signal) => {
    const summary = await runManifest(manifest, { ...options, state: stateOption(flags.state), confine: confineWanted(flags.confine), onEvent, signal });
    return summary.exitCode;
  });
}

/**
 * `fn` with the progress output (bars on a TTY, else plain lines; NDJSON events with json) and the signals:
 * the first SIGINT/SIGTERM aborts `signal` (stop submitting, finish what is in flight, write the report);
 * a second SIGINT gives the signal back to Node's default handler, which ends the process at once.
 */
export async function withProgress(o: { json: boolean; again: string; redoAgain?: ProgressOptions['redoAgain'] }, fn: (onEvent: (e: EngineEvent) => void, signal: AbortSignal) => Promise<number>): Promise<number> {
  ignoreBrokenPipe();
  const bus = new EventBus();
  const stopProgress = attachProgress(bus, { json: o.json, tty: process.stderr.isTTY === true && !o.json, again: o.again, ...(o.redoAgain ? { redoAgain: o.redoAgain } : {}) });
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
