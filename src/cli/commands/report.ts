import { resolve } from 'node:path';
import { buildReportData } from '../../engine/index.js';
import { writeReports } from '../../report/index.js';
import { UsageError } from '../../errors.js';
import { flushed, ignoreBrokenPipe } from '../progress.js';
import { openStateForRead } from './state-file.js';

/** `genbatch report [manifest|--state PATH] [--out DIR]`: rewrite the four reports from the state file (found at --state, else DIR/state.db, else the manifest's default). */
export default async function report(manifest: string | undefined, opts: { state?: string; out?: string }): Promise<number> {
  ignoreBrokenPipe();
  const state = await openStateForRead(manifest, opts.state, opts.out, 'report');
  const { store, runs } = state;
  try {
    if (opts.out !== undefined && runs.length > 1) {
      // One folder holds one set of reports: each run would replace the one written before it.
      throw new UsageError(`the state file holds ${runs.length} runs (${runs.map((r) => r.manifest).join(', ')}); name the manifest whose reports go to --out ${opts.out}`);
    }
    for (const run of runs) {
      store.useRun(run);
      const dir = resolve(opts.out ?? run.out_dir);
      // Written elsewhere than the run's output folder: report.html links the files from there.
      const data = buildReportData(store);
      const workers = await state.workers(run.id);
      if (workers) data.summary.workers = workers;
      const paths = await writeReports(dir, data, dir === resolve(run.out_dir) ? {} : { reportDir: dir });
      process.stdout.write(`reports of ${run.manifest}: ${paths.json}, ${paths.csv}, ${paths.md}, ${paths.html}\n`);
    }
    return 0;
  } finally {
    await state.close();
    await flushed(process.stdout);
  }
}
