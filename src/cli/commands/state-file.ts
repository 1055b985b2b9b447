import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve, sep } from 'node:path';
import { UsageError } from '../../errors.js';
import { Store, type RunRow } from '../../store/index.js';
import { parseStateLocation, stateOption, type StateLocation } from '../../store/location.js';
import { chooseRun, listRuns, runName } from '../../store/run-name.js';
import type { WorkerCount } from '../../store/pg/snapshot.js';
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
  // A run against the service beside --sandbox runs of the same manifests (the demo, then the real one): the
  // real run, saying so (sandbox results are synthetic; they are the ones asked for by name).
  const real = found.filter((f) => !f.endsWith(`.sandbox${sep}state.db`));
  if (real.length === 1) {
    process.stderr.write(`genbatch: ${command}: the run in ${dirname(real[0]!)} (not the --sandbox run${found.length - 1 === 1 ? '' : 's'} beside it: ${found.filter((f) => f !== real[0]).map((f) => dirname(f)).join(', ')}; name one with --out DIR)\n`);
    return join(cwd, real[0]!);
  }
  const how = `name one: genbatch ${command} <manifest>, --out DIR or --state PATH`;
  if (found.length === 0) throw new UsageError(`no run found in this folder (no state.db here, and no genbatch-out/<manifest name>/state.db, where genbatch run puts it by default); ${how}`);
  throw new UsageError(`${found.length} runs found in this folder (${found.join(', ')}); ${how}`);
}

/** The state of a run to a bucket: never in the bucket, beside its manifest (as `genbatch run` chose it). */
function stateOfBucketRun(manifest: string | undefined, outDir: string, command: string): string {
  if (manifest === undefined) throw new UsageError(`--out ${outDir}: the state of a run to a bucket is kept on the machine that ran it, not in the bucket; name it: genbatch ${command} <manifest> --out ${outDir}, or --state PATH`);
  return defaultStateBeside(manifest);
}

/**
 * A manifest's default state: `<out>/state.db` in its default output folder, else (a run to a bucket) the one
 * beside it; else the same two of a `--sandbox` run (`<name>.sandbox`): a real run's first when both exist.
 */
function manifestState(manifest: string): string {
  const inOut = join(defaultOutDir(manifest), 'state.db');
  const places = [inOut, defaultStateBeside(manifest), join(defaultOutDir(manifest, true), 'state.db'), defaultStateBeside(manifest, true)];
  return places.find((p) => existsSync(p)) ?? inOut;
}

/** The output a command writes to or reads from: `s3://bucket/prefix` as given (normalised), else the absolute folder. */
export function outputOf(out: string): string {
  return isS3Url(out) ? s3UrlOf(parseS3Url(out)) : resolve(out);
}

/**
 * Where a reader command writes a run's reports: `--out` when given (a folder or prefix other than the run's: report.html
 * links the results from there), else the run's recorded output. Never the recorded folder when `--out` names another:
 * an output folder moved with its state.db is read through --out, and its old path is no folder of this run any more.
 */
export function reportsOut(run: Pick<RunRow, 'out_dir'>, out: string | undefined): { dir: string; options: { reportDir?: string } } {
  const dir = outputOf(out ?? run.out_dir);
  return { dir, options: dir === outputOf(run.out_dir) ? {} : { reportDir: dir } };
}

/** A run's state opened to read: the store (SQLite), its runs, where it is (as it may be printed), and how to let go of it. */
export interface StateForRead {
  store: Store;
  runs: RunRow[];
  /** The state file's path, or the PostgreSQL URL with its password hidden. */
  shown: string;
  location: StateLocation;
  /** Each worker's share of a run (a PostgreSQL state); null for a SQLite state file (one writer). */
  workers(runId: number): Promise<WorkerCount[] | null>;
  /** For view: copy what changed in the database since (a PostgreSQL state); false when nothing did, or for SQLite. */
  refresh(): Promise<boolean>;
  /** After marks were made in `store`: a copy of a PostgreSQL state writes them to the database (SQLite: already in the file). */
  saveMarks(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Where the run's state is: --state (else GENBATCH_STATE), else `<--out>/state.db` (with --out s3://...: the
 * manifest's `genbatch-state/<name>.db`), else the manifest's default location (as `genbatch run` chose it:
 * `<out>/state.db`, or beside the manifest for a run to a bucket), else the one of this folder (stateHere).
 */
export function readLocation(manifest: string | undefined, statePath: string | undefined, outDir: string | undefined, command: string): StateLocation {
  const named = stateOption(statePath);
  if (named !== undefined) return parseStateLocation(named, statePath === undefined ? 'GENBATCH_STATE' : '--state');
  const path =
    manifest === undefined && outDir === undefined
      ? stateHere(command)
      : outDir !== undefined
        ? isS3Url(outDir)
          ? stateOfBucketRun(manifest, outDir, command)
          : join(outDir, 'state.db')
        : manifestState(manifest!);
  return { kind: 'sqlite', path: resolve(path) };
}

/**
 * The state found as `<--out>/state.db`: a run whose recorded output folder no longer holds this state file (the folder
 * was moved, or copied, with its state.db) is read as the run of `dir`, where its files are now: the view serves them
 * from there, export reads them there, the reports are written there. Its old path is no folder of this run any more
 * (another may be there now). PostgreSQL states map `--out` alike (openPostgresForRead).
 */
function seenInMovedFolder(store: Store, runs: RunRow[], dir: string): RunRow[] {
  const here = statSync(join(dir, 'state.db'));
  for (const run of runs) {
    if (isS3Url(run.out_dir) || run.out_dir === dir) continue;
    const there = statSync(join(run.out_dir, 'state.db'), { throwIfNoEntry: false });
    if (there === undefined || there.dev !== here.dev || there.ino !== here.ino) store.seeOutputAt(run.out_dir, dir);
  }
  return runs.map((r) => store.findRun(r.manifest) ?? r);
}

/**
 * Open the run's state (see readLocation) and pick its run: the manifest's, else every run it holds. Jobs no
 * longer in the manifest are left out of what the store reads (Store.leaveOutRemoved) unless `includeRemoved`.
 */
export async function openStateForRead(manifest: string | undefined, statePath: string | undefined, outDir?: string, command = 'status', includeRemoved = false): Promise<StateForRead> {
  const state = await openAnyForRead(manifest, statePath, outDir, command);
  state.store.leaveOutRemoved(!includeRemoved);
  return state;
}

async function openAnyForRead(manifest: string | undefined, statePath: string | undefined, outDir: string | undefined, command: string): Promise<StateForRead> {
  const location = readLocation(manifest, statePath, outDir, command);
  if (location.kind === 'postgres') return openPostgresForRead(location, manifest, outDir, command);
  const path = location.path;
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
  if (outDir !== undefined && !isS3Url(outDir) && path === resolve(outDir, 'state.db')) runs = seenInMovedFolder(store, runs, resolve(outDir));
  return { store, runs, shown: path, location, workers: async () => null, refresh: async () => false, saveMarks: async () => undefined, close: async () => store.close() };
}

/**
 * A PostgreSQL state: its runs copied into a temporary SQLite state file (src/store/pg/snapshot.ts) that the
 * readers read as any other. The manifest argument names the run by path or name (machines see different paths);
 * --out, the run's output folder as this machine sees it (default: the folder the run recorded, which must exist).
 */
async function openPostgresForRead(location: StateLocation & { kind: 'postgres' }, manifest: string | undefined, outDir: string | undefined, command: string): Promise<StateForRead> {
  const { PgReader } = await import('../../store/pg/snapshot.js');
  const reader = await PgReader.open(location.url, location.display);
  let snapshot: Awaited<ReturnType<typeof reader.snapshot>> | null = null;
  let store: Store | null = null;
  try {
    let runs = await reader.runs();
    if (runs.length === 0) throw new UsageError(`the PostgreSQL state ${location.display} holds no run yet`);
    if (manifest !== undefined) runs = [chooseRun(runs, manifest, `the PostgreSQL state ${location.display}`)];
    if (outDir !== undefined && runs.length > 1) throw new UsageError(`--out names the output folder of one run, and ${location.display} holds ${runs.length}; name the run:\n${listRuns(runs)}`);
    // A bucket is seen alike from every machine: its prefix is no folder to find here, nor to map the files to.
    const files = outDir === undefined || isS3Url(outDir) ? undefined : resolve(outDir);
    const away = runs.find((r) => !isS3Url(r.out_dir) && !existsSync(r.out_dir));
    if (files === undefined && away !== undefined && command !== 'status') {
      throw new UsageError(`the output folder of ${runName(away)}, ${away.out_dir}, is not on this machine; pass --out DIR, where this machine sees it`);
    }
    snapshot = await reader.snapshot(runs.map((r) => r.id), files);
    store = Store.openForRead(snapshot.path);
    const ids = new Set(runs.map((r) => r.id));
    const opened = { store, snapshot };
    return {
      store,
      runs: store.runs().filter((r) => ids.has(r.id)),
      shown: location.display,
      location,
      workers: (runId) => reader.workers(runId),
      refresh: () => opened.snapshot.refresh().catch((err: unknown) => Promise.reject(reader.failure(err))),
      saveMarks: async () => {
        await opened.snapshot.pushMarks();
      },
      close: async () => {
        opened.store.close();
        opened.snapshot.close();
        await reader.close();
      },
    };
  } catch (err) {
    store?.close();
    snapshot?.close();
    await reader.close();
    throw err;
  }
}
