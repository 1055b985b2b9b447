import type { JobState, WorkStore } from '../store/index.js';
import type { CallbackNote, CallbackReceiver } from './callbacks.js';
import type { EventBus } from './events.js';
import { Pipeline } from './pipeline.js';
import type { DownloadPort, ServicePort } from './ports.js';
import { DEFAULT_STATUS_RATE, exitCodeFor, UPLOAD_REUSE_MS, type RunOutcome } from './run.js';

/**
 * A worker on a run that another process made (genbatch work): no manifest, no sync, no estimate (the run
 * that made it did those; the budget is reserved when a job is claimed). Passes of the pipeline over the
 * store, each claiming what it can and taking over what dead workers left; between passes it waits `idleMs`.
 * With `untilEmpty` it ends once the run has no job left that a worker could move (none pending, submitting,
 * submitted or downloading); without, it waits for more work until stopped.
 */
export interface WorkEngineOptions {
  store: WorkStore;
  /** The run's jobs by state, as the store holds them now (every worker's). */
  counts(): Promise<Record<JobState, number>>;
  service: ServicePort;
  download: DownloadPort;
  /** For the start event: the run's manifest (as recorded) and the state (password hidden). */
  manifest: string;
  state: string;
  outDir: string;
  baseUrl: string;
  concurrency: number;
  timeScale: number;
  /** Status reads per second of the service's time (default 10). */
  statusRate?: number;
  /**
   * Completion callbacks: a receiver on `listen` whose URLs carry `token` (the same for every worker of the
   * database, so any worker's receiver takes the callback of a job another worker sent); null: polling only.
   */
  callbacks: { publicUrl: string | null; listen: string; token: string; redact?: (value: unknown) => unknown } | null;
  untilEmpty: boolean;
  /** Wait between passes, ms. */
  idleMs: number;
  signal: AbortSignal;
  events: EventBus;
}

const OPEN_STATES: readonly JobState[] = ['pending', 'submitting', 'submitted', 'downloading'];

export async function workEngine(o: WorkEngineOptions): Promise<RunOutcome> {
  const t0 = Date.now();
  const emit = o.events.emit;
  emit({ type: 'start', manifest: o.manifest, out_dir: o.outDir, state: o.state, base_url: o.baseUrl, sandbox: false });
  let counts = await o.counts();
  emit({ type: 'synced', jobs: total(counts), new: 0, changed: 0, unchanged: total(counts), skipped: 0, counts, files: 0 });
  // Callbacks go to the pass running; those that come between passes wait for the next one.
  let pipeline: Pipeline | null = null;
  const early: CallbackNote[] = [];
  const callbacks = o.callbacks ? await listen(o.callbacks, (note) => (pipeline ? pipeline.onCallback(note) : early.push(note)), emit) : null;
  let statusRequests = 0;
  let stopReason: string | null = null;
  try {
    for (;;) {
      // A pass starts with its leases renewed: a worker that was paused (or idle) past its lease goes on as
      // a fresh one; the jobs it held are another's by now, and its writes about them are refused.
      await o.store.heartbeat();
      pipeline = new Pipeline(o.store, o.service, o.download, {
        outDir: o.outDir,
        concurrency: Math.max(1, o.concurrency),
        maxActive: Math.max(500, o.concurrency * 50),
        timeScale: o.timeScale,
        signal: o.signal,
        emit,
        callbackUrlFor: callbacks?.urlFor ?? null,
        baseUrl: o.baseUrl,
        uploadMaxAgeMs: UPLOAD_REUSE_MS * Math.min(1, o.timeScale),
        statusRate: (o.statusRate ?? DEFAULT_STATUS_RATE) / o.timeScale,
      });
      const running = pipeline.run();
      for (const note of early.splice(0)) pipeline.onCallback(note);
      await running;
      statusRequests += pipeline.statusRequests;
      stopReason = pipeline.stopReason;
      pipeline = null;
      counts = await o.counts();
      if (stopReason === 'lease-lost' && !o.signal.aborted) {
        emit({ type: 'warning', message: "this worker's leases ran out (paused, or the database not reached in time); the jobs it held are left to other workers, and it goes on" });
        stopReason = null;
      }
      if (o.signal.aborted || stopReason !== null) break;
      if (o.untilEmpty && OPEN_STATES.every((s) => counts[s] === 0)) break;
      await idle(o.idleMs, o.signal);
      if (o.signal.aborted) break;
    }
  } finally {
    await callbacks?.receiver.close();
  }
  const exitCode = exitCodeFor(counts, o.signal, stopReason);
  emit({ type: 'finish', counts, exit_code: exitCode, wall_seconds: (Date.now() - t0) / 1000, status_requests: statusRequests, balance_after: null, charged: null, run_charged: null });
  return { exitCode, counts, statusRequests };
}

/** Start the callback receiver (as runEngine does) and say where it listens. */
async function listen(
  c: NonNullable<WorkEngineOptions['callbacks']>,
  onNote: (note: CallbackNote) => void,
  emit: EventBus['emit'],
): Promise<{ receiver: CallbackReceiver; urlFor: (jobId: string, attempt: number) => string }> {
  const { CallbackReceiver, parseListen } = await import('./callbacks.js');
  const { host, port } = parseListen(c.listen);
  const receiver = new CallbackReceiver(onNote, c.token, c.redact);
  const addr = await receiver.listen(host, port);
  const base = c.publicUrl ?? `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}/`;
  emit({ type: 'listening', address: `${addr.address}:${addr.port}`, public_url: base });
  return { receiver, urlFor: (jobId, attempt) => receiver.urlFor(base, jobId, attempt) };
}

function total(counts: Record<JobState, number>): number {
  return Object.values(counts).reduce((a, n) => a + n, 0);
}

function idle(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
