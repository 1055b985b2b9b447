import { basename, extname, resolve } from 'node:path';
import { UsageError } from '../errors.js';
import type { RunRow } from './types.js';

/**
 * Naming a run of a state that holds several (a PostgreSQL database, shared by machines whose paths
 * differ): by its manifest's path as recorded, by that path from the current folder, by the manifest's
 * file name (`cats.yaml`) or by that name without its extension (`cats`, the run's name).
 */

/** A run's name: its manifest's file name without the extension. */
export function runName(run: Pick<RunRow, 'manifest'>): string {
  return basename(run.manifest, extname(run.manifest));
}

/** The runs that `name` names (more than one: the name is ambiguous). */
export function runsNamed<R extends Pick<RunRow, 'manifest'>>(runs: readonly R[], name: string): R[] {
  const exact = runs.filter((r) => r.manifest === name || r.manifest === resolve(name));
  if (exact.length > 0) return exact;
  return runs.filter((r) => basename(r.manifest) === name || runName(r) === name);
}

/** The runs as a list to print: `cats (/data/cats.yaml)`, one per line, indented. */
export function listRuns(runs: readonly Pick<RunRow, 'manifest'>[]): string {
  return runs.map((r) => `  ${runName(r)} (${r.manifest})`).join('\n');
}

/**
 * The one run `name` names among `runs` (a state shown as `where`); without a name, the only run. None,
 * an unknown name, or several without a name: a UsageError listing the runs.
 */
export function chooseRun<R extends Pick<RunRow, 'manifest'>>(runs: readonly R[], name: string | undefined, where: string): R {
  if (runs.length === 0) throw new UsageError(`${where} holds no run yet (genbatch run <manifest> --state URL makes one)`);
  if (name === undefined) {
    if (runs.length === 1) return runs[0]!;
    throw new UsageError(`${where} holds ${runs.length} runs; name one with --run NAME:\n${listRuns(runs)}`);
  }
  const named = runsNamed(runs, name);
  if (named.length === 0) throw new UsageError(`${where} holds no run named ${name}; its runs:\n${listRuns(runs)}`);
  if (named.length > 1) throw new UsageError(`${name} names ${named.length} runs of ${where}; give the manifest's path:\n${listRuns(named)}`);
  return named[0]!;
}
