import { resolve } from 'node:path';
import { UsageError } from '../../errors.js';
import { buildReportData, globTest, parseOnly } from '../../engine/index.js';
import { writeReports } from '../../report/index.js';
import type { MarkState, Store } from '../../store/index.js';
import { flushed, ignoreBrokenPipe } from '../progress.js';
import { openStateForRead } from './state-file.js';

export interface MarkOptions {
  state?: string;
  out?: string;
  approve?: string[];
  reject?: string[];
  clear?: string[];
  note?: string;
}

/**
 * `genbatch mark <manifest|--state PATH|--out DIR> --approve|--reject|--clear ID... [--note TEXT]`: review marks
 * without a browser, written to the state file (src/store/marks.ts), safe during a run. Ids and globs as
 * `run --only`. Every pattern must name a job of the run; only done jobs are approved or rejected (an exact id
 * of a job in another state is exit 2 with its state; a glob takes the done jobs it matches and must match
 * one). Nothing is written unless every pattern is good. The run's reports are written again (they show the marks).
 */
export default async function mark(manifest: string | undefined, opts: MarkOptions): Promise<number> {
  ignoreBrokenPipe();
  const actions = (['approve', 'reject', 'clear'] as const).filter((a) => opts[a] !== undefined);
  if (actions.length !== 1) throw new UsageError(`mark expects one of --approve, --reject or --clear with job ids${actions.length > 1 ? ` (got ${actions.map((a) => `--${a}`).join(' and ')})` : ''}`);
  const action = actions[0]!;
  const patterns = parseOnly(opts[action]!, `--${action}`);
  const { store, runs } = openStateForRead(manifest, opts.state, opts.out, 'mark');
  try {
    if (runs.length > 1) throw new UsageError(`the state file holds ${runs.length} runs (${runs.map((r) => r.manifest).join(', ')}); name the manifest whose jobs to mark`);
    store.useRun(runs[0]!);
    const ids = chosenJobs(store, patterns, action, `--${action}`);
    const state: MarkState | null = action === 'approve' ? 'approved' : action === 'reject' ? 'rejected' : null;
    const current = store.marks();
    const note = opts.note ?? null;
    let changed = 0;
    store.db.transaction(() => {
      for (const id of ids) {
        // Clearing a job that has no mark adds nothing to its history.
        if (state === null && !current.has(id)) continue;
        store.addMark(id, state, note);
        changed++;
      }
    }).immediate();
    const shown = ids.slice(0, 20).join(', ') + (ids.length > 20 ? `, ... (${ids.length - 20} more)` : '');
    const what = state === null ? `cleared the mark of ${changed} job(s)` : `marked ${changed} job(s) ${state}`;
    process.stdout.write(`${what}: ${shown}\n`);
    // The reports show the marks: written again now (as `genbatch report` does).
    if (changed > 0) await writeReports(resolve(runs[0]!.out_dir), buildReportData(store));
    return 0;
  } finally {
    store.close();
    await flushed(process.stdout);
  }
}

/** The ids the patterns name, in manifest order; a usage error naming every pattern that names no job (or no done job). */
function chosenJobs(store: Store, patterns: readonly string[], action: 'approve' | 'reject' | 'clear', flag: string): string[] {
  const tests = patterns.map(globTest);
  const glob = patterns.map((p) => /[*?]/.test(p));
  const matched = new Array<boolean>(patterns.length).fill(false);
  const known = new Array<boolean>(patterns.length).fill(false);
  const notDone: string[] = [];
  const ids: string[] = [];
  for (const row of store.summaryRows()) {
    let hit = false;
    for (let i = 0; i < tests.length; i++) {
      if (!tests[i]!(row.id)) continue;
      known[i] = true;
      if (action !== 'clear' && row.state !== 'done') {
        if (!glob[i]) notDone.push(`job ${row.id} is ${row.state}`);
        continue;
      }
      matched[i] = true;
      hit = true;
    }
    if (hit) ids.push(row.id);
  }
  const problems: string[] = [];
  const none = patterns.filter((_, i) => !known[i] && !glob[i]);
  if (none.length > 0) problems.push(`${none.map((p) => `"${p}"`).join(', ')} ${none.length === 1 ? 'is' : 'are'} not a job of the run`);
  const emptyGlobs = patterns.filter((p, i) => !matched[i] && glob[i]);
  if (emptyGlobs.length > 0) problems.push(`${emptyGlobs.map((p) => `"${p}"`).join(', ')} ${emptyGlobs.length === 1 ? 'matches' : 'match'} no ${action === 'clear' ? '' : 'done '}job of the run`);
  if (notDone.length > 0) {
    problems.push(`${notDone.join(', ')}: only done jobs can be marked (a failed or expired job is sent again with run --redo failed,expired)`);
  }
  if (problems.length > 0) throw new UsageError(`${flag}: ${problems.join('; ')}`);
  return ids;
}
