import { basename, dirname, extname, join, resolve } from 'node:path';

/**
 * The name a manifest's default output and state take: its file name less the extension, and for a `--sandbox`
 * run `<name>.sandbox` (sandbox results are synthetic: they never share a folder or a state with a real run's).
 */
function runFolderName(abs: string, sandbox: boolean): string {
  return `${basename(abs, extname(abs))}${sandbox ? '.sandbox' : ''}`;
}

/** Default state file of a run whose output is in a bucket: `<manifest dir>/genbatch-state/<manifest name>[.sandbox].db` (kept on this machine). */
export function defaultStateBeside(manifest: string, sandbox = false): string {
  const abs = resolve(manifest);
  return join(dirname(abs), 'genbatch-state', `${runFolderName(abs, sandbox)}.db`);
}

/** Default output folder of a manifest's run: `<manifest dir>/genbatch-out/<manifest name>/`, `<manifest name>.sandbox/` with `--sandbox` (its state file: `state.db` in it). */
export function defaultOutDir(manifest: string, sandbox = false): string {
  const abs = resolve(manifest);
  return join(dirname(abs), 'genbatch-out', runFolderName(abs, sandbox));
}
