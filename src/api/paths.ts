import { basename, dirname, extname, join, resolve } from 'node:path';

/** Default output folder of a manifest's run: `<manifest dir>/genbatch-out/<manifest name>/` (its state file: `state.db` in it). */
export function defaultOutDir(manifest: string): string {
  const abs = resolve(manifest);
  return join(dirname(abs), 'genbatch-out', basename(abs, extname(abs)));
}
