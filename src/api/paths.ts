import { basename, dirname, extname, join, resolve } from 'node:path';

/** Default state file of a run whose output is in a bucket: `<manifest dir>/genbatch-state/<manifest name>.db` (kept on this machine). */
export function defaultStateBeside(manifest: string): string {
  const abs = resolve(manifest);
  return join(dirname(abs), 'genbatch-state', `${basename(abs, extname(abs))}.db`);
}

/** Default output folder of a manifest's run: `<manifest dir>/genbatch-out/<manifest name>/` (its state file: `state.db` in it). */
export function defaultOutDir(manifest: string): string {
  const abs = resolve(manifest);
  return join(dirname(abs), 'genbatch-out', basename(abs, extname(abs)));
}
