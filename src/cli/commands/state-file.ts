import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { UsageError } from '../../errors.js';
import { Store, type RunRow } from '../../store/index.js';
import { defaultOutDir } from '../../api/paths.js';

/**
 * Open the state file named by --state, else `<--out>/state.db`, else the manifest's
 * default location (as `genbatch run` chose it), and pick its run.
 */
export function openStateForRead(manifest: string | undefined, statePath: string | undefined, outDir?: string): { store: Store; runs: RunRow[] } {
  if (!manifest && !statePath && !outDir) throw new UsageError('give a manifest, --out DIR or --state PATH');
  const path = resolve(statePath ?? join(outDir ?? defaultOutDir(manifest!), 'state.db'));
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
