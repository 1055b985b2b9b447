import { JOB_STATES } from '../../store/index.js';
import { flushed, ignoreBrokenPipe } from '../progress.js';
import { openStateForRead } from './state-file.js';

/** `genbatch status [manifest|--state PATH|--out DIR] [--json] [--jobs]`: jobs by state (and each job on request). Reads only; safe during a run. */
export default async function status(manifest: string | undefined, opts: { state?: string; out?: string; json?: boolean; jobs?: boolean }): Promise<number> {
  ignoreBrokenPipe();
  const { store, runs } = openStateForRead(manifest, opts.state, opts.out);
  try {
    const out: unknown[] = [];
    for (const run of runs) {
      store.useRun(run);
      const counts = store.counts();
      const est = store.estimate();
      const jobs = opts.jobs
        ? [...store.summaryRows()].map((j) => ({ id: j.id, model: j.model, state: j.state, task_id: j.task_id, attempts: j.attempts, error: j.last_error, where: j.where }))
        : undefined;
      if (opts.json) {
        out.push({ manifest: run.manifest, out_dir: run.out_dir, started_at: run.started_at, finished_at: run.finished_at, counts, estimated_credits: est.known, unknown_price_jobs: est.unknown, ...(jobs ? { jobs } : {}) });
        continue;
      }
      const total = JOB_STATES.reduce((a, s) => a + counts[s], 0);
      process.stdout.write(`${run.manifest}\n  output: ${run.out_dir}\n  last run: ${run.started_at ?? '-'} to ${run.finished_at ?? '(running or interrupted)'}\n  ${total} jobs:`);
      process.stdout.write(JOB_STATES.filter((s) => counts[s] > 0).map((s) => ` ${counts[s]} ${s}`).join(',') + '\n');
      if (jobs !== undefined && jobs.length > 0) process.stdout.write('  id\tstate\tmodel\ttask_id\tattempts\terror\n');
      for (const j of jobs ?? []) {
        process.stdout.write(`  ${j.id}\t${j.state}\t${j.model}\t${j.task_id ?? '-'}\t${j.attempts}${j.error ? `\t${j.error}` : ''}\n`);
      }
    }
    if (opts.json) process.stdout.write(JSON.stringify(out.length === 1 ? out[0] : out) + '\n');
    return 0;
  } finally {
    store.close();
    await flushed(process.stdout);
  }
}
