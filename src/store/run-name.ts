import { basename, extname, resolve } from 'node:path';
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
