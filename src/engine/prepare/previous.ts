import { Root } from '../../lib/root.js';
import { createHash } from 'node:crypto';
import { closeSync, readFileSync } from 'node:fs';
import { PREVIOUS_DIR } from '../results.js';

/**
 * A job sent again (its spec changed, a parent it was made from changed, or a
 * new in-process sandbox) whose earlier result has files on disk: everything
 * in out/<job id>/ except earlier `previous-<n>/` folders and temporary files
 * is moved into out/<job id>/previous-<n>/ (n one more than the highest there),
 * so the folder only ever holds the result the report lists. Never deletes.
 * Every listing, mkdir and rename goes through the output folder's Root (src/lib/root.ts): a job folder
 * that is a symbolic link, or leads out of the output folder, is refused (UnsafePathError), never followed.
 * Choice: the move happens at the start of the run that resets the job; a
 * crash between the state commit and the move leaves the files in place, and
 * the new download then takes numbered names beside them (never overwrites).
 * Returns the folder they went to (relative to the output folder), or null when there was nothing.
 * `moved`: told where the entries went (the state records the result files among them: genbatch prune).
 */
export async function moveAsidePrevious(outDir: string, jobFolder: string, moved?: (target: string, names: readonly string[], root: Root) => void): Promise<string | null> {
  let root: Root;
  try {
    root = Root.open(outDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null; // no output folder: nothing to keep
    throw err;
  }
  const names = (root.list(jobFolder) ?? []).map((e) => e.name); // no folder: nothing to keep
  const move = names.filter((n) => !PREVIOUS_DIR.test(n) && !n.endsWith('.part'));
  if (move.length === 0) return null;
  const target = `${jobFolder}/previous-${nextNumber(names)}`;
  root.mkdirs(target);
  for (const n of move) root.rename(`${jobFolder}/${n}`, `${target}/${n}`);
  moved?.(target, move, root);
  return target;
}

/** Move the one entry `name` of the job folder `jobFolder` into a new `previous-<n>/` there (n one more than the highest). Returns its name under the root. */
export async function moveAsideOne(root: Root, jobFolder: string, name: string): Promise<string> {
  const target = `${jobFolder}/previous-${nextNumber((root.list(jobFolder) ?? []).map((e) => e.name))}`;
  root.mkdirs(target);
  root.rename(`${jobFolder}/${name}`, `${target}/${name}`);
  return target;
}

function nextNumber(names: readonly string[]): number {
  let highest = 0;
  for (const n of names) if (PREVIOUS_DIR.test(n)) highest = Math.max(highest, Number(n.slice('previous-'.length)));
  return highest + 1;
}

/**
 * The record of `name` (a result.json moved aside: genbatch writes it beside each result, the files table does not
 * list it) when it is the job's own (its job_id is `jobId`): path, size and sha256; null otherwise (someone else's).
 */
export function ownResultRecord(root: Root, name: string, jobId: string): { path: string; size: number; sha256: string } | null {
  let bytes: Buffer;
  try {
    const got = root.openRead(name);
    if (got === null) return null;
    try {
      bytes = readFileSync(got.fd);
    } finally {
      closeSync(got.fd);
    }
    const parsed = JSON.parse(bytes.toString('utf8')) as unknown;
    if (typeof parsed !== 'object' || parsed === null || (parsed as { job_id?: unknown }).job_id !== jobId) return null;
  } catch {
    return null;
  }
  return { path: name, size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
}
