import { buildReportData } from '../../engine/index.js';
import { invocationText, invocationView } from '../../engine/finish/invocation-view.js';
import { writeReports } from '../../report/index.js';
import { UsageError } from '../../errors.js';
import { flushed, ignoreBrokenPipe } from '../progress.js';
import { openStateForRead, reportsOut } from './state-file.js';

/**
 * `genbatch report ... --invocation N|last [--json]`: one invocation's view to stdout (src/engine/finish/invocation-view.ts).
 * `genbatch report [manifest|--state PATH] [--out DIR|s3://bucket/prefix]`: rewrite the four reports from the state file (found at
 * --state, else DIR/state.db, else the manifest's default; a run to a bucket: beside the manifest), into DIR or under the prefix.
 */
export default async function report(manifest: string | undefined, opts: { state?: string; out?: string; invocation?: string; json?: boolean; includeRemoved?: boolean }): Promise<number> {
  ignoreBrokenPipe();
  if (opts.json && opts.invocation === undefined) throw new UsageError('--json goes with --invocation (the four reports are files: report.json is the JSON one)');
  const state = await openStateForRead(manifest, opts.state, opts.out, 'report', opts.includeRemoved === true);
  const { store, runs } = state;
  try {
    if (opts.invocation !== undefined) {
      // One invocation's view, to stdout: of the one run the state holds (or the manifest named).
      if (runs.length > 1) throw new UsageError(`the state file holds ${runs.length} runs (${runs.map((r) => r.manifest).join(', ')}); name the manifest whose invocation to show`);
      store.useRun(runs[0]!);
      const view = invocationView(store, opts.invocation);
      process.stdout.write(opts.json ? `${JSON.stringify(view)}\n` : invocationText(view));
      return 0;
    }
    if (opts.out !== undefined && runs.length > 1) {
      // One folder holds one set of reports: each run would replace the one written before it.
      throw new UsageError(`the state file holds ${runs.length} runs (${runs.map((r) => r.manifest).join(', ')}); name the manifest whose reports go to --out ${opts.out}`);
    }
    for (const run of runs) {
      store.useRun(run);
      // Written elsewhere than the run's output folder (or prefix): report.html links the files from there.
      const { dir, options } = reportsOut(run, opts.out);
      const data = buildReportData(store);
      const workers = await state.workers(run.id);
      if (workers) data.summary.workers = workers;
      const paths = await writeReports(dir, data, options);
      process.stdout.write(`reports of ${run.manifest}: ${paths.json}, ${paths.csv}, ${paths.md}, ${paths.html}\n`);
    }
    return 0;
  } finally {
    await state.close();
    await flushed(process.stdout);
  }
}
