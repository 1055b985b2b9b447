import { mkdir, readdir, rename } from 'node:fs/promises';
import { join } from 'node:path';
import { checkRealDir } from './files.js';
import { PREVIOUS_DIR } from './results.js';

/**
 * A job sent again (its spec changed, a parent it was made from changed, or a
 * new in-process sandbox) whose earlier result has files on disk: everything
 * in out/<job id>/ except earlier `previous-<n>/` folders and temporary files
 * is moved into out/<job id>/previous-<n>/ (n one more than the highest there),
 * so the folder only ever holds the result the report lists. Never deletes.
 * Choice: the move happens at the start of the run that resets the job; a
 * crash between the state commit and the move leaves the files in place, and
 * the new download then takes numbered names beside them (never overwrites).
 * Returns the folder they went to (relative to the output folder), or null when there was nothing.
 */
export async function moveAsidePrevious(outDir: string, jobFolder: string): Promise<string | null> {
  const dir = join(outDir, jobFolder);
  checkRealDir(dir);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return null; // no folder: nothing to keep
  }
  let highest = 0;
  const move: string[] = [];
  for (const n of names) {
    if (PREVIOUS_DIR.test(n)) highest = Math.max(highest, Number(n.slice('previous-'.length)));
    else if (!n.endsWith('.part')) move.push(n);
  }
  if (move.length === 0) return null;
  const target = `previous-${highest + 1}`;
  await mkdir(join(dir, target));
  for (const n of move) await rename(join(dir, n), join(dir, target, n));
  return join(jobFolder, target);
}

/** Move the one entry `name` of `dir` into a new `previous-<n>/` there (n one more than the highest). */
export async function moveAsideOne(dir: string, name: string): Promise<string> {
  checkRealDir(dir);
  let highest = 0;
  for (const n of await readdir(dir)) if (PREVIOUS_DIR.test(n)) highest = Math.max(highest, Number(n.slice('previous-'.length)));
  const target = join(dir, `previous-${highest + 1}`);
  await mkdir(target);
  await rename(join(dir, name), join(target, name));
  return target;
}
