import { existsSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { UsageError } from '../../errors.js';
import { Store, type RunRow } from '../../store/index.js';
import { defaultOutDir, defaultStateBeside } from '../../api/paths.js';
import { isS3Url, parseS3Url, s3UrlOf } from '../../storage/url.js';

/**
 * With nothing named, the state file of the run made from this folder: `./state.db` (inside an output
 * folder), else the one `./genbatch-out/<manifest name>/state.db` (`genbatch run <manifest>`'s default
 * for a manifest in this folder). None or several: a UsageError that says how to name one.
 */
function stateHere(command: string): string {
  const cwd = process.cwd();
  if (existsSync(join(cwd, 'state.db'))) return join(cwd, 'state.db');
  const outs = join(cwd, 'genbatch-out');
  let found: string[] = [];
  try {
    found = readdirSync(outs, { withFileTypes: true })
      .filter((e) => e.isDirectory() && existsSync(join(outs, e.name, 'state.db')))
      .map((e) => join('genbatch-out', e.name, 'state.db'))
      .sort();
  } catch {
    found = [];
  }
  if (found.length === 1) return join(cwd, found[0]!);
  const how = `name one: genbatch ${command} <manifest>, --out DIR or --state PATH`;
  if (found.length === 0) throw new UsageError(`no run found in this folder (no state.db here, and no genbatch-out/<manifest name>/state.db, where genbatch run puts it by default); ${how}`);
  throw new UsageError(`${found.length} runs found in this folder (${found.join(', ')}); ${how}`);
}

/** The state of a run to a bucket: never in the bucket, beside its manifest (as `genbatch run` chose it). */
function stateOfBucketRun(manifest: string | undefined, outDir: string, command: string): string {
  if (manifest === undefined) throw new UsageError(`--out ${outDir}: the state of a run to a bucket is kept on the machine that ran it, not in the bucket; name it: genbatch ${command} <manifest> --out ${outDir}, or --state PATH`);
  return defaultStateBeside(manifest);
}

/** A manifest's default state: `<out>/state.db` in its default output folder, else (a run to a bucket) the one beside it. */
function manifestState(manifest: string): string {
  const inOut = join(defaultOutDir(manifest), 'state.db');
  const beside = defaultStateBeside(manifest);
  return !existsSync(inOut) && existsSync(beside) ? beside : inOut;
}

/** The output a command writes to or reads from: `s3://bucket/prefix` as given (normalised), else the absolute folder. */
export function outputOf(out: string): string {
  return isS3Url(out) ? s3UrlOf(parseS3Url(out)) : resolve(out);
}

/**
 * Open the state file named by --state, else `<--out>/state.db` (with --out s3://...: the manifest's
 * `genbatch-state/<name>.db`), else the manifest's
 * default location (as `genbatch run` chose it), else the one of this folder (stateHere), and pick its run.
 */
export function openStateForRead(manifest: string | undefined, statePath: string | undefined, outDir?: string, command = 'status'): { store: Store; runs: RunRow[] } {
  const path = resolve(statePath ?? (outDir !== undefined && isS3Url(outDir) ? stateOfBucketRun(manifest, outDir, command) : manifest === undefined && outDir === undefined ? stateHere(command) : outDir !== undefined ? join(outDir, 'state.db') : manifestState(manifest!)));
  if (!existsSync(path)) throw new UsageError(`no state file at ${path}${manifest ? ' (has this manifest been run? pass --state if it used another one)' : ''}`);
  const store = Store.openForRead(path);
  let runs = store.runs();
  if (manifest) {
    const run = store.findRun(manifest);
    if (!run) {
      store.close();
      throw new UsageError(`the state file ${path} holds no run of ${resolve(manifest)}`);
    }
    runs = [run];
  }
  if (runs.length === 0) {
    store.close();
    throw new UsageError(`the state file ${path} holds no run yet`);
  }
  return { store, runs };
}
