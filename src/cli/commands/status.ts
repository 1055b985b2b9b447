import { visible } from '../../errors.js';
import { JOB_STATES, type SummaryRow } from '../../store/index.js';
import { flushed, ignoreBrokenPipe } from '../progress.js';
import { formatBytes, formatCredits } from '../../report/index.js';
import type { WorkerCount } from '../../store/pg/snapshot.js';
import { capNote, runCredits } from '../../engine/finish/report-data.js';
import { keptChanged } from '../../engine/prepare/changed.js';
import { openStateForRead } from './state-file.js';

/** Jobs still in flight (sent, not finished) this long after their submit are listed as stuck, with their last error. */
export const STUCK_AFTER_MS = 3600 * 1000;
const IN_FLIGHT: ReadonlySet<string> = new Set(['submitting', 'submitted', 'downloading']);

/** The jobs of the current run sent more than STUCK_AFTER_MS before `now` and not finished. */
function stuckJobs(rows: Iterable<SummaryRow>, now: number): Array<{ id: string; state: string; since: string; error: string | null }> {
  const out = [];
  for (const j of rows) {
    const sent = Date.parse(j.submitted_at ?? '');
    if (IN_FLIGHT.has(j.state) && Number.isFinite(sent) && now - sent > STUCK_AFTER_MS) out.push({ id: j.id, state: j.state, since: j.submitted_at as string, error: j.last_error });
  }
  return out;
}

/** The per-worker lines of a PostgreSQL state: `    host:pid:id  holding 2 submitted, 1 downloading; 9 files (1.2 MB); last seen <time>`. */
function workersText(workers: readonly WorkerCount[]): string {
  if (workers.length === 0) return '  workers: none yet\n';
  const lines = workers.map((w) => {
    const jobs = Object.entries(w.jobs).map(([state, n]) => `${n} ${state}`).join(', ') || 'none';
    return `    ${visible(w.id)}\tholding ${jobs}; ${w.files} file${w.files === 1 ? '' : 's'} (${formatBytes(w.bytes)}); last seen ${w.last_seen ?? '-'}\n`;
  });
  return `  workers (${workers.length}):\n${lines.join('')}`;
}

/** Jobs by their review mark (`genbatch mark`, the view's buttons): `{approved, rejected}`. */
function reviewCounts(marks: Iterable<{ state: 'approved' | 'rejected' }>): { approved: number; rejected: number } {
  const n = { approved: 0, rejected: 0 };
  for (const m of marks) n[m.state]++;
  return n;
}

/** `genbatch status [manifest|--state PATH|--out DIR] [--json] [--jobs]`: jobs by state (and each job on request). Reads only; safe during a run. */
export default async function status(manifest: string | undefined, opts: { state?: string; out?: string; json?: boolean; jobs?: boolean; includeRemoved?: boolean }): Promise<number> {
  ignoreBrokenPipe();
  const state = await openStateForRead(manifest, opts.state, opts.out, 'status', opts.includeRemoved === true);
  const { store, runs } = state;
  try {
    const out: unknown[] = [];
    for (const run of runs) {
      store.useRun(run);
      const counts = store.counts();
      const est = store.estimate();
      const stuck = stuckJobs(store.summaryRows(), Date.now());
      // The credit cap on what is charged (the last invocation's), and what the run was charged.
      const capped = capNote(store);
      const cap = capped && { credits: capped.credits, name: capped.name, stopped: capped.stopped, charged: capped.charged ?? runCredits(store).charged };
      const workers = await state.workers(run.id);
      const marks = reviewCounts(store.marks().values());
      const kept = Object.keys(keptChanged(store));
      const jobs = opts.jobs
        ? [...store.summaryRows()].map((j) => ({ id: j.id, model: j.model, state: j.state, task_id: j.task_id, attempts: j.attempts, error: j.last_error, where: j.where }))
        : undefined;
      if (opts.json) {
        out.push({ manifest: run.manifest, out_dir: run.out_dir, started_at: run.started_at, finished_at: run.finished_at, counts, marks, estimated_credits: est.known, unknown_price_jobs: est.unknown, ...(cap ? { cap } : {}), stuck, ...(kept.length > 0 ? { changed_not_sent: kept } : {}), ...(workers ? { workers } : {}), ...(jobs ? { jobs } : {}) });
        continue;
      }
      const total = JOB_STATES.reduce((a, s) => a + counts[s], 0);
      process.stdout.write(`${visible(run.manifest)}\n  output: ${visible(run.out_dir)}\n  last run: ${visible(run.started_at ?? '-')} to ${visible(run.finished_at ?? '(running or interrupted)')}\n  ${total} jobs:`);
      process.stdout.write(JOB_STATES.filter((s) => counts[s] > 0).map((s) => ` ${counts[s]} ${s}`).join(',') + '\n');
      if (counts.done > 0 || marks.approved + marks.rejected > 0) {
        const open = Math.max(0, counts.done - marks.approved - marks.rejected);
        process.stdout.write(`  review: ${marks.approved} approved, ${marks.rejected} rejected, ${open} done not marked\n`);
      }
      if (cap) {
        const charged = cap.charged === null ? 'charged unknown' : `charged ${formatCredits(cap.charged)}`;
        process.stdout.write(`  credit cap ${formatCredits(cap.credits)} (${cap.name}): ${charged}${cap.stopped ? '; stopped at the cap, jobs left pending (raise the cap to go on)' : ''}\n`);
      }
      if (workers) process.stdout.write(workersText(workers));
      if (kept.length > 0) process.stdout.write(`  ${kept.length} changed-not-sent (done, spec changed, results kept by --keep-changed; run --redo changed sends them): ${kept.slice(0, 20).map(visible).join(', ')}${kept.length > 20 ? ', ...' : ''}\n`);
      if (stuck.length > 0) process.stdout.write(`  ${stuck.length} stuck (sent more than 1 h ago, not finished):\n`);
      for (const j of stuck) process.stdout.write(`  ${visible(j.id)}\t${visible(j.state)} since ${visible(j.since)}\t${visible(j.error ?? 'no error recorded')}\n`);
      if (jobs !== undefined && jobs.length > 0) process.stdout.write('  id\tstate\tmodel\ttask_id\tattempts\terror\n');
      for (const j of jobs ?? []) {
        process.stdout.write(`  ${visible(j.id)}\t${visible(j.state)}\t${visible(j.model)}\t${visible(j.task_id ?? '-')}\t${j.attempts}${j.error ? `\t${visible(j.error)}` : ''}\n`);
      }
    }
    if (opts.json) process.stdout.write(JSON.stringify(out.length === 1 ? out[0] : out) + '\n');
    return 0;
  } finally {
    await state.close();
    await flushed(process.stdout);
  }
}
