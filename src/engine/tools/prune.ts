import { Root } from '../../lib/root.js';
import { sanitizeName } from '../../download/names.js'; // not the barrel: it loads the whole downloader
import type { Store } from '../../store/index.js';
import type { PreviousFile } from '../../store/previous.js';
import { ownResultRecord } from '../prepare/previous.js';
import { PREVIOUS_DIR, RESULT_FILE } from '../results.js';

/**
 * `genbatch prune`: keep the newest `keep` previous-<n>/ generations of each job, and (with `removed`) remove the
 * result files of jobs the manifest no longer names. Only files the state records are removed (a previous
 * generation: previous_files; a removed job's result: files), and only when the file on disk is still the one
 * recorded (a regular file of the recorded size and sha256); the record goes with the file. Anything else is
 * left and reported: a file or folder the state does not record (`foreign`), a recorded file that changed
 * (`changed`). A folder is removed only once empty. Every listing and removal goes through the output
 * folder's Root (src/lib/root.ts): a symbolic link is never followed, nothing outside the folder is touched.
 */
export interface PruneOptions {
  store: Store;
  outDir: string;
  /** previous-<n>/ generations kept per job (the highest n). */
  keep: number;
  /** Ids of the jobs no longer in the manifest whose files go (null: --removed not given). */
  removed: ReadonlySet<string> | null;
  dryRun: boolean;
}

export interface PruneResult {
  /** Files removed (or, with dry_run, that would be), relative to the output folder. */
  removed: string[];
  /** Folders removed once empty (or that would be). */
  removed_dirs: string[];
  bytes: number;
  /** Generations kept (job folder/previous-<n>). */
  kept: number;
  /** Entries the state does not record, left as they are. */
  foreign: string[];
  /** Recorded files that are no longer what was recorded (another size or content, a link, a folder), left. */
  changed: string[];
  dry_run: boolean;
}

export async function prune(o: PruneOptions): Promise<PruneResult> {
  const res: PruneResult = { removed: [], removed_dirs: [], bytes: 0, kept: 0, foreign: [], changed: [], dry_run: o.dryRun };
  let root: Root;
  try {
    root = Root.open(o.outDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return res; // no output folder: nothing to prune
    throw err;
  }
  const byJob = new Map<string, Map<string, PreviousFile[]>>();
  for (const f of o.store.previousFiles()) {
    const dirs = byJob.get(f.job_id) ?? new Map<string, PreviousFile[]>();
    dirs.set(f.dir, [...(dirs.get(f.dir) ?? []), f]);
    byJob.set(f.job_id, dirs);
  }
  // Read first: the state is written while the folders are pruned (one connection: no write under an open read).
  const ids = Array.from(o.store.allJobs(), (r) => r.id);
  for (const id of ids) {
    const row = { id };
    const folder = sanitizeName(row.id, 'job');
    const gone = o.removed?.has(row.id) === true;
    const recorded = byJob.get(row.id) ?? new Map<string, PreviousFile[]>();
    // Newest first; a removed job keeps none.
    const dirs = [...recorded.keys()].sort((a, b) => generation(b) - generation(a));
    const keepDirs = new Set(gone ? [] : dirs.slice(0, o.keep));
    res.kept += keepDirs.size;
    for (const dir of dirs) {
      if (keepDirs.has(dir)) continue;
      for (const f of recorded.get(dir)!) {
        if ((await removeRecorded(root, f.path, f.size, f.sha256, o.dryRun, res)) && !o.dryRun) o.store.dropPrevious(row.id, f.path);
      }
      // A removed job's folder is emptied as a whole below.
      if (!gone) emptyOut(root, dir, new Set(recorded.get(dir)!.map((f) => f.path)), new Set(), o.dryRun, res);
    }
    if (!gone) {
      // previous-<n>/ folders on disk that the state does not record: left, and said.
      for (const e of safeList(root, folder, res) ?? []) {
        const name = `${folder}/${e.name}`;
        if (PREVIOUS_DIR.test(e.name) && !recorded.has(name)) res.foreign.push(name);
      }
      continue;
    }
    const current = o.store.filesOf(row.id).filter((f) => f.state === 'done' && f.path !== null);
    for (const f of current) {
      if ((await removeRecorded(root, f.path!, f.size, f.sha256, o.dryRun, res)) && !o.dryRun) o.store.dropFile(row.id, f.path!);
    }
    // Its result.json: the job's own (its job_id), as the state's jobs.result records the task.
    const own = ownResultRecord(root, `${folder}/${RESULT_FILE}`, row.id);
    if (own !== null) await removeRecorded(root, own.path, own.size, own.sha256, o.dryRun, res);
    const paths = [...current.map((f) => f.path!), ...(own ? [own.path] : []), ...dirs.flatMap((d) => recorded.get(d)!.map((f) => f.path))];
    emptyOut(root, folder, new Set(paths), new Set(dirs), o.dryRun, res);
  }
  return res;
}

/** n of `.../previous-<n>`. */
function generation(dir: string): number {
  const m = /previous-(\d+)$/i.exec(dir);
  return m ? Number(m[1]) : 0;
}

/** Remove the recorded file at `name` when it is still what was recorded. True when it is gone now (or would be: dry run; or was already). */
async function removeRecorded(root: Root, name: string, size: number | null, sha256: string | null, dryRun: boolean, res: PruneResult): Promise<boolean> {
  let st;
  try {
    st = root.lstat(name);
  } catch {
    res.changed.push(name); // a link or a file where a folder on the way should be
    return false;
  }
  if (st === null) return true; // already gone: the record goes
  if (!st.isFile()) {
    res.changed.push(name);
    return false;
  }
  const got = await root.hash(name);
  if (got === null) return true;
  if ((size !== null && got.size !== size) || (sha256 !== null && got.sha256 !== sha256)) {
    res.changed.push(name);
    return false;
  }
  if (!dryRun) root.remove(name);
  res.removed.push(name);
  res.bytes += got.size;
  return true;
}

/**
 * The folder `dir` after its recorded files went: removed when empty, with its sub-folders that are recorded
 * generations (`generations`: previous-<n>/ folders the state records) and held only recorded files; whatever else
 * is there, another folder too (even an empty one: genbatch did not make it), is left and reported as foreign.
 * `recorded`: the paths removed (in a dry run, still there).
 */
function emptyOut(root: Root, dir: string, recorded: ReadonlySet<string>, generations: ReadonlySet<string>, dryRun: boolean, res: PruneResult): boolean {
  const entries = safeList(root, dir, res);
  if (entries === null) return true;
  let empty = true;
  for (const e of entries) {
    const name = `${dir}/${e.name}`;
    if (e.isDirectory() && !e.isSymbolicLink() && generations.has(name)) {
      if (!emptyOut(root, name, recorded, generations, dryRun, res)) empty = false;
    } else if (!(dryRun && recorded.has(name) && res.removed.includes(name))) {
      empty = false;
      if (!recorded.has(name)) res.foreign.push(name);
    }
  }
  if (!empty) return false;
  if (!dryRun) root.removeDir(dir);
  res.removed_dirs.push(dir);
  return true;
}

/** The entries of `dir`, or null when missing; a link or a file there is reported (changed), not followed. */
function safeList(root: Root, dir: string, res: PruneResult): import('node:fs').Dirent[] | null {
  try {
    return root.list(dir);
  } catch {
    res.changed.push(dir);
    return null;
  }
}
