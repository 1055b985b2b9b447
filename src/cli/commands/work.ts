import { work as workOn } from '../../api/work.js';
import { displayUrl, stateOption } from '../../store/location.js';
import { withProgress } from './run.js';

/**
 * `genbatch work --state postgres://... [--run NAME] [--until-empty]`: a worker that joins a run kept in
 * PostgreSQL without its manifest (a pod that only pulls work), src/api/work.ts. The run was made by
 * `genbatch run <manifest> --state URL`; this process claims its jobs beside any other worker, with run's
 * service and output flags, and the progress output and signals of run.
 */

export interface WorkFlags {
  state?: string;
  run?: string;
  untilEmpty?: boolean;
  baseUrl?: string;
  out?: string;
  concurrency: number;
  yes?: boolean;
  json?: boolean;
  callbackUrl?: string;
  listen?: string;
  timeScale?: number;
  statusRate?: string;
  requestTimeout?: number | string;
}

/** A word of a shell command, quoted when it needs to be. */
const q = (s: string) => (/^[\w@%+=:,./*-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** The command that starts this worker again (the end-of-run summary's suggestion): the password never shown. */
function againCommand(flags: WorkFlags): string {
  const parts = ['genbatch work'];
  if (flags.state !== undefined) parts.push('--state', q(displayUrl(flags.state)));
  if (flags.run !== undefined) parts.push('--run', q(flags.run));
  if (flags.out !== undefined) parts.push('--out', q(flags.out));
  if (flags.baseUrl !== undefined) parts.push('--base-url', q(flags.baseUrl));
  if (flags.untilEmpty) parts.push('--until-empty');
  if (flags.concurrency !== 8) parts.push('--concurrency', String(flags.concurrency));
  if (flags.callbackUrl !== undefined) parts.push('--callback-url', q(flags.callbackUrl));
  if (flags.listen !== undefined) parts.push('--listen', q(flags.listen));
  return [...parts, ...paceFlags(flags)].join(' ');
}

/** The flags that set how fast the worker goes (a sandbox's time scale, the status rate, the request deadline): repeated by every printed command. */
function paceFlags(flags: WorkFlags): string[] {
  const parts: string[] = [];
  if (flags.timeScale !== undefined) parts.push('--time-scale', String(flags.timeScale));
  if (flags.statusRate !== undefined) parts.push('--status-rate', q(flags.statusRate));
  if (flags.requestTimeout !== undefined) parts.push('--request-timeout', q(String(flags.requestTimeout)));
  return parts;
}

/**
 * The command that sends the run's failed or expired jobs again (`work` has no --redo): `genbatch run` on the
 * run's manifest, output and service as the start event gives them, with the same state.
 */
function redoCommand(flags: WorkFlags): (start: { manifest: string; out_dir: string; base_url: string }) => string {
  return (start) => {
    const parts = ['genbatch run', q(start.manifest), '--out', q(start.out_dir)];
    if (flags.state !== undefined) parts.push('--state', q(displayUrl(flags.state)));
    parts.push('--base-url', q(start.base_url));
    return [...parts, ...paceFlags(flags)].join(' ');
  };
}

export default async function work(flags: WorkFlags): Promise<number> {
  const { json, ...options } = flags;
  return withProgress({ json: json === true, again: againCommand(flags), redoAgain: redoCommand(flags) }, async (onEvent, signal) => {
    const summary = await workOn({ ...options, state: stateOption(flags.state), onEvent, signal });
    return summary.exitCode;
  });
}
