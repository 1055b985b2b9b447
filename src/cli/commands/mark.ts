import { UsageError, visible } from '../../errors.js';
import { buildReportData, markJobs, parseOnly } from '../../engine/index.js';
import { writeReports } from '../../report/index.js';
import { flushed, ignoreBrokenPipe } from '../progress.js';
import { openStateForRead, reportsOut } from './state-file.js';

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
  const saved = await openStateForRead(manifest, opts.state, opts.out, 'mark');
  const { store, runs } = saved;
  try {
    if (runs.length > 1) throw new UsageError(`the state file holds ${runs.length} runs (${runs.map((r) => r.manifest).join(', ')}); name the manifest whose jobs to mark`);
    store.useRun(runs[0]!);
    const { ids, changed, state } = markJobs(store, patterns, action, opts.note ?? null);
    await saved.saveMarks();
    const shown = ids.slice(0, 20).map(visible).join(', ') + (ids.length > 20 ? `, ... (${ids.length - 20} more)` : '');
    const what = state === null ? `cleared the mark of ${changed} job(s)` : `marked ${changed} job(s) ${state}`;
    process.stdout.write(`${what}: ${shown}\n`);
    // The reports show the marks: written again now, where `genbatch report` with the same options writes them.
    if (changed > 0) {
      const { dir, options } = reportsOut(runs[0]!, opts.out);
      await writeReports(dir, buildReportData(store), options);
    }
    return 0;
  } finally {
    await saved.close();
    await flushed(process.stdout);
  }
}
