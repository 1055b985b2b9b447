import type { JobState, WorkStore } from '../store/index.js';
import type { PgCap } from '../store/pg/budget.js';
import { CreditCap } from './pipeline/cap.js';
import type { CallbackNote, CallbackReceiver } from './pipeline/receiver.js';
import type { EventBus } from './events.js';
import { Pipeline } from './pipeline/pipeline.js';
import type { DownloadPort, ServicePort } from './ports.js';
import { DEFAULT_STATUS_RATE, exitCodeFor, SUMMARY_IDS, UPLOAD_REUSE_MS, type RunOutcome } from './run.js';

/**
 * A worker on a run that another process made (genbatch work): no manifest, no sync, no estimate (the run
 * that made it did those; the budget is reserved when a job is claimed). The pipeline over the store, kept
 * going when this worker has nothing in hand (keepWaiting: it claims and takes over what dead workers left
 * every `idleMs`): with `untilEmpty` as long as the run has a job pending or in flight (any worker's),
 * without until stopped. A pipeline stopped by lost leases (paused, the database out of reach) is followed
 * by a fresh one.
 */
export interface WorkEngineOptions {
  store: WorkStore;
  /** The run's jobs by state, as the store holds them now (every worker's). */
  counts(): Promise<Record<JobState, number>>;
  /** The run's result files recorded done, every worker's (what its progress shows). */
  filesDone(): Promise<number>;
  /** The first `max` ids of the run's jobs in `state`, in manifest order (the end-of-run line lists failed and expired ones). */
  firstIds(state: JobState, max: number): Promise<string[]>;
  /** The run's pending jobs and jobs in flight, any worker's (PgWorkStore.workLeft). */
  workLeft(exclude: readonly string[]): Promise<{ pending: number; inFlight: number }>;
  service: ServicePort;
  download: DownloadPort;
  /** For the start event: the run's manifest (as recorded) and the state (password hidden). */
  manifest: string;
  state: string;
  /** Emit the start event (default true; false: the caller did, before its sync). */
  announce?: boolean;
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
  /** The run's credit cap on what is charged (its budget row), or null / absent: none. */
  cap?: PgCap | null;
}

export async function workEngine(o: WorkEngineOptions): Promise<RunOutcome> {
  const t0 = Date.now();
  const emit = o.events.emit;
  if (o.announce !== false) emit({ type: 'start', manifest: o.manifest, out_dir: o.outDir, state: o.state, base_url: o.baseUrl, sandbox: false });
  let counts = await o.counts();
  emit({ type: 'synced', jobs: total(counts), new: 0, changed: 0, unchanged: total(counts), skipped: 0, counts, files: await o.filesDone(), joined: true });
  // Callbacks go to the pass running; those that come between passes wait for the next one.
  let pipeline: Pipeline | null = null;
  const early: CallbackNote[] = [];
  const callbacks = o.callbacks ? await listen(o.callbacks, (note) => (pipeline ? pipeline.onCallback(note) : early.push(note)), emit) : null;
  let statusRequests = 0;
  let callbacksIgnored = 0;
  let stopReason: string | null = null;
  // One cap for every pass: the prices it observed hold for the worker's whole life.
  const pc = o.cap ?? null;
  const cap = pc ? new CreditCap({ credits: pc.credits, name: pc.name, ledger: pc.ledger, balance: () => o.service.balance(), timeScale: o.timeScale, emit }) : null;
  if (pc && cap) emit({ type: 'cap', credits: pc.credits, name: pc.name, charged: await pc.spent(), pending_credits: 0, unconfirmed_jobs: counts.pending });
  // The heartbeat on the store's own timer and connection (PostgreSQL): a loop that waits seconds on a busy
  // database lets no lease of a live worker run out.
  const stopBeat = o.store.beatInBackground?.() ?? null;
  const stopCounts = countsEvery(o, emit);
  try {
    const keepWaiting = async (): Promise<boolean> => {
      if (o.signal.aborted) return false;
      if (!o.untilEmpty) return true;
      // The jobs this worker gave up on (left for a later run) are not waited for.
      const left = await o.workLeft(pipeline ? [...pipeline.givenUp] : []);
      // Pending jobs the credit limit holds back are nothing this worker can do once no job is in flight
      // (only a job in flight may still give its reserved credits back).
      if (left.inFlight === 0 && pipeline?.heldByBudget) return false;
      return left.pending + left.inFlight > 0;
    };
    for (;;) {
      // Leases renewed first: after a pipeline stopped by lost leases, this worker goes on as a fresh one (the
      // jobs it held are another's by now, and its writes about them are refused).
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
        keepWaiting,
        idleMs: o.idleMs,
        cap,
      });
      const running = pipeline.run();
      for (const note of early.splice(0)) pipeline.onCallback(note);
      await running;
      statusRequests += pipeline.statusRequests;
      callbacksIgnored += pipeline.callbacksIgnored;
      stopReason = pipeline.stopReason;
      pipeline = null;
      if (stopReason !== 'lease-lost' || o.signal.aborted) break;
      // The jobs the stopped pass held are waited on by no one now: their leases expire at once, so the
      // next pass (or another worker) takes them over, instead of the heartbeat renewing them forever.
      await o.store.dropLeases();
      cap?.reset();
      emit({ type: 'warning', message: "this worker's leases ran out (paused, or the database out of reach); the jobs it held are left to other workers, and it goes on" });
      stopReason = null;
    }
    counts = await o.counts();
  } finally {
    await stopCounts();
    await stopBeat?.();
    await callbacks?.receiver.close();
    // What this worker held of the cap for later sends goes back (else others wait for its row to run out).
    await pc?.ledger.close?.().catch((err: unknown) => emit({ type: 'warning', message: `could not give back the credits held for later sends: ${err instanceof Error ? err.message : String(err)}` }));
  }
  const exitCode = exitCodeFor(counts, o.signal, stopReason);
  const capStop = stopReason === 'credit-cap' && !o.signal.aborted;
  await pc?.note(capStop).catch((err: unknown) => emit({ type: 'warning', message: `could not record the credit cap's state: ${err instanceof Error ? err.message : String(err)}` }));
  const spent = pc ? await pc.spent() : null;
  const [failed, expired, uncertain] = await Promise.all((['failed', 'expired', 'uncertain'] as const).map((s) => (counts[s] > 0 ? o.firstIds(s, SUMMARY_IDS) : [])));
  emit({
    type: 'finish',
    counts,
    exit_code: exitCode,
    wall_seconds: (Date.now() - t0) / 1000,
    status_requests: statusRequests,
    balance_after: null,
    charged: null,
    run_charged: spent,
    failed_ids: failed ?? [],
    expired_ids: expired ?? [],
    uncertain_ids: uncertain ?? [],
    ...(callbacks ? { callbacks_ignored: callbacksIgnored } : {}),
    ...(pc && cap && spent !== null ? { cap: { credits: pc.credits, name: pc.name, stopped: capStop, charged: spent, left_pending: counts.pending, left_credits: null } } : {}),
  });
  return { exitCode, counts, statusRequests };
}

/** How often a worker reads the run's counts and files for its progress (every worker's: its own events show only its own), at most. */
export const COUNTS_EVERY_MS = 2_000;
/** The pause after a read is at least this many times the read's own time: on a large run the counts cost the server about 1% per worker. */
export const COUNTS_PAUSE_FACTOR = 100;

/**
 * The run's counts and files as a `counts` event every COUNTS_EVERY_MS, or less often when the two counts take long
 * (a large run: at 1,000,000 jobs a count scans them all), so that a worker's progress follows the whole run:
 * counted from its own job events alone, it drifted (other workers' moves unseen, jobs it took over from them
 * counted out twice: "-19 running"). A failed read is skipped (the next one comes). Returns the stop.
 */
function countsEvery(o: WorkEngineOptions, emit: EventBus['emit']): () => Promise<void> {
  let reading: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const next = (ms: number): void => {
    if (stopped) return;
    timer = setTimeout(read, ms);
    timer.unref();
  };
  const read = (): void => {
    const t0 = performance.now();
    reading = Promise.all([o.counts(), o.filesDone()])
      .then(([counts, files]) => emit({ type: 'counts', counts, files }))
      .catch(() => undefined)
      .finally(() => next(Math.max(COUNTS_EVERY_MS, COUNTS_PAUSE_FACTOR * (performance.now() - t0))));
  };
  next(COUNTS_EVERY_MS);
  return async () => {
    stopped = true;
    if (timer) clearTimeout(timer);
    await reading;
  };
}

/** Start the callback receiver (as runEngine does) and say where it listens. */
async function listen(
  c: NonNullable<WorkEngineOptions['callbacks']>,
  onNote: (note: CallbackNote) => void,
  emit: EventBus['emit'],
): Promise<{ receiver: CallbackReceiver; urlFor: (jobId: string, attempt: number) => string }> {
  const { CallbackReceiver, parseListen } = await import('./pipeline/receiver.js');
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
