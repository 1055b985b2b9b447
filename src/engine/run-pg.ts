import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { ManifestError, StateError, UsageError } from '../errors.js';
import { openManifest } from '../manifest/index.js';
import type { ObservedPrices } from '../pricing/index.js';
import type { ReportData } from '../report/types.js';
import { Store } from '../store/index.js';
import type { EventBus } from './events.js';
import type { DownloadPort, ServicePort } from './ports.js';
import { checkBalance, checkLimits, prepare } from './prepare/prepare.js';
import { buildReportData } from './finish/report-data.js';
import type { RunOutcome } from './run.js';
import { moveAsidePrevious } from './prepare/previous.js';
import { checkSameOutput } from './prepare/same-output.js';
import { checkSameService, parseServiceMark, serviceMetaKey, type ServiceMark } from './prepare/same-service.js';
import { redoJobs, type RedoState } from './prepare/select.js';
import { manifestPrint, pricesHash } from './prepare/sync-key.js';
import { workEngine } from './work.js';
import { Root } from '../lib/root.js';

/**
 * `genbatch run <manifest> --state postgres://...`: any number of such processes, on any machines, share one
 * run. Exactly one syncs the manifest into the database (the sync lock, src/store/pg/sync-lock.ts) through a
 * working copy (the manifest sync, the graph's settle, --max-credits, the budget and the balance checked
 * there, as on SQLite: a refused run writes nothing); the others wait and join. The run's credit cap goes
 * to the budget row (reserved at claim time by every worker). Then each process is a worker until the run
 * has no job pending or in flight (src/engine/work.ts), and writes the reports from a copy of the run.
 * Not here (yet): --redo, --only, --limit, --learn-prices, and the balance readings of each invocation.
 */
export interface PgRunOptions {
  manifestPath: string;
  outDir: string;
  /** The database URL, and as it may be printed (password hidden). */
  stateUrl: string;
  stateDisplay: string;
  service: ServicePort;
  download: DownloadPort;
  baseUrl: string;
  apiKey: string;
  sandbox: boolean;
  /** The service and key fingerprint this run is against (src/engine/prepare/same-service.ts): a state made against another is refused. */
  serviceMark?: ServiceMark;
  concurrency: number;
  yes: boolean;
  maxCredits: number | null;
  uncertain: 'skip' | 'resubmit';
  timeScale: number;
  statusRate: number;
  callbacks: { publicUrl: string | null; listen: string; redact?: (value: unknown) => unknown } | null;
  userPrices: Record<string, number> | null;
  observedPrices?: ObservedPrices | null;
  confine?: boolean;
  /** --redo: jobs that ended in these states are sent again (src/engine/prepare/select.ts). */
  redo?: readonly RedoState[];
  /** The lease of a claimed job, ms. */
  leaseMs: number;
  idleMs: number;
  signal: AbortSignal;
  events: EventBus;
  writeReports: (outDir: string, data: ReportData) => Promise<unknown> | unknown;
}

export async function runOnPostgres(o: PgRunOptions): Promise<RunOutcome> {
  const emit = o.events.emit;
  const abs = resolve(o.manifestPath);
  if (!existsSync(abs)) throw new ManifestError([{ job: null, where: o.manifestPath, path: '', message: 'manifest file not found' }]);
  const manifest = await openManifest(abs, { confine: o.confine === true });
  // A per-invocation cap needs a budget row per invocation, shared by the workers that join it (genbatch work): not built yet.
  if (manifest.budgetPerInvocation !== null) throw new UsageError(`budget_per_invocation (${abs}) with a PostgreSQL state is not built yet: use a SQLite state file, or --max-credits / budget`);
  const pg = await import('../store/pg/index.js');
  const pool = pg.openPool(o.stateUrl, { max: Math.max(10, o.concurrency * 2), idleInTransactionMs: pg.idleInTransactionMs(o.leaseMs) });
  const failure = (err: unknown) => new StateError(`PostgreSQL state ${o.stateDisplay}: ${err instanceof Error ? err.message : String(err)}`);
  try {
    let runId: number;
    let recorded: string | undefined;
    let recordedService: string | null = null;
    try {
      await pg.migrate(pool);
      runId = await pg.ensureRun(pool, abs, o.outDir);
      recorded = (await pool.query<{ out_dir: string }>('SELECT out_dir FROM runs WHERE id = $1', [runId])).rows[0]?.out_dir;
      recordedService = (await pool.query<{ value: string }>('SELECT value FROM meta WHERE key = $1', [serviceMetaKey(runId)])).rows[0]?.value ?? null;
    } catch (err) {
      throw failure(err);
    }
    // A run made earlier (or at the same moment by another process) into another output: refused.
    checkSameOutput({ manifest: abs, recorded, given: o.outDir, state: o.stateDisplay, stateFile: null });
    // Made against another service or key: refused; none recorded (a new run, or one made before): this one adopted.
    if (o.serviceMark) {
      checkSameService(parseServiceMark(recordedService), o.serviceMark, o.stateDisplay);
      await pool
        .query('INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value', [serviceMetaKey(runId), JSON.stringify(o.serviceMark)])
        .catch((err: unknown) => Promise.reject(failure(err)));
    }
    emit({ type: 'start', manifest: abs, out_dir: o.outDir, state: o.stateDisplay, base_url: o.baseUrl, sandbox: o.sandbox });
    const userPrices = { ...(manifest.pricing ?? {}), ...(o.userPrices ?? {}) };
    const hasUserPrices = Object.keys(userPrices).length > 0;
    // What the sync depends on: the manifest's bytes and the prices (the same on every machine, whatever its path's mtime).
    const print = await manifestPrint(abs);
    const key = createHash('sha256')
      .update(JSON.stringify([print?.sha256 ?? Math.random(), pricesHash(hasUserPrices ? userPrices : null), o.uncertain]))
      .digest('hex');
    // --redo is an act, not a state of the manifest: it always syncs (a key no earlier sync had).
    const redo = o.redo ?? [];
    const syncKey = redo.length > 0 ? `${key}:redo:${Math.random()}` : key;
    /** Jobs sent again whose earlier results are in the output: moved to <job>/previous-<n>/ once the sync is written. */
    let replaced: string[] = [];
    try {
      await pg.syncOnce(pool, runId, syncKey, async (c) => {
        const copy = await pg.WorkingCopy.load(c, runId);
        try {
          copy.store.openRun(abs, o.outDir, o.baseUrl, o.sandbox, hasUserPrices);
          await prepare(copy.store, manifest, hasUserPrices ? userPrices : null, emit, false, o.uncertain === 'resubmit', o.observedPrices ?? null);
          copy.store.graph.settle();
          for (const s of copy.store.graph.drainSkipped()) emit({ type: 'job', id: s.id, from: 'pending', to: 'skipped', error: s.reason });
          const redone = redo.length > 0 ? redoJobs(copy.store, redo, null, emit) : [];
          if (redo.length > 0) emit({ type: 'redo', states: [...redo], jobs: redone.length });
          replaced = [...new Set([...copy.store.drainReplacedResults(), ...redone])];
          checkLimits(copy.store, { maxCredits: o.maxCredits, budget: manifest.budget, yes: o.yes }, null);
          if (copy.store.counts().pending > 0) checkBalance(copy.store, await o.service.balance(), emit, null);
          await copy.writeBack(c);
        } finally {
          copy.close();
        }
      });
    } catch (err) {
      // A manifest refused on its first sync leaves no run behind.
      await pool.query('DELETE FROM runs r WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.run_id = r.id)', [runId]).catch(() => undefined);
      throw err;
    }
    // The output folder from the start, as a SQLite run has it (its state file is there): a worker joining on this
    // machine before the first result is downloaded finds it (else: "not on this machine", exit 2).
    if (!o.download.bucket) Root.open(o.outDir, { create: true });
    for (const id of replaced) {
      const folder = o.download.sanitizeName(id);
      try {
        const dir = o.download.bucket ? await o.download.bucket.moveAside(folder) : await moveAsidePrevious(o.outDir, folder);
        if (dir) emit({ type: 'previous', id, dir });
      } catch (err) {
        emit({ type: 'warning', message: `job ${id}: could not move the files of its earlier result aside: ${err instanceof Error ? err.message : String(err)}` });
      }
    }
    // The tighter of --max-credits and the budget; the cap is the run's total over its invocations (budget.spent).
    const byFlag = o.maxCredits !== null && (manifest.budget === null || o.maxCredits <= manifest.budget);
    if (o.maxCredits !== null || manifest.budget !== null) {
      const credits = byFlag ? o.maxCredits! : manifest.budget!;
      await pg.setBudgetCap(pool, runId, credits, byFlag ? `--max-credits ${credits}` : `the manifest budget of ${credits}`);
      // This invocation's base, read before anything is sent (PgLedger.rebase: kept when another worker's jobs are in flight).
      const ledger = new pg.PgLedger(pool, runId);
      try {
        await ledger.releasable([]);
        await ledger.rebase(await o.service.balance());
      } catch (err) {
        emit({ type: 'warning', message: `could not read the balance at the start: the run's last reading stays the base of its charge (${err instanceof Error ? err.message : String(err)})` });
      }
    }
    const store = await pg.PgWorkStore.open({
      pool,
      runId,
      apiKey: o.apiKey,
      leaseMs: o.leaseMs,
      takeOverMs: Math.max(500, Math.round(o.leaseMs / 6)),
      statusRatePerSec: o.statusRate / o.timeScale,
      uploads: { limit: 5, windowMs: 61_200 * o.timeScale + 20 },
    });
    const token = o.callbacks ? await callbackToken(pool) : '';
    const outcome = await workEngine({
      store,
      counts: () => countsOf(pool, runId),
      filesDone: () => filesDoneOf(pool, runId),
      firstIds: (state, max) => firstIdsOf(pool, runId, state, max),
      workLeft: (exclude) => store.workLeft(exclude),
      service: o.service,
      download: o.download,
      manifest: abs,
      state: o.stateDisplay,
      announce: false,
      outDir: o.outDir,
      baseUrl: o.baseUrl,
      concurrency: o.concurrency,
      timeScale: o.timeScale,
      statusRate: o.statusRate,
      callbacks: o.callbacks ? { ...o.callbacks, token } : null,
      untilEmpty: true,
      idleMs: o.idleMs,
      signal: o.signal,
      events: o.events,
      cap: await pg.pgCap(pool, runId, store.worker),
    });
    // The run's end, as on SQLite (status: "last run ... to ..."; the reports' wall time): once nothing is left to move.
    const c = outcome.counts;
    if (c.pending + c.submitting + c.submitted + c.downloading === 0) {
      await pool.query(`UPDATE runs SET finished_at = ${pg.NOW_ISO} WHERE id = $1`, [runId]).catch(() => undefined);
    }
    await writeReportsFromCopy(o, runId, await pg.budgetRow(pool, runId).catch(() => null));
    return outcome;
  } finally {
    await pool.end().catch(() => undefined);
  }
}

/** The reports of the run, from a copy of it (src/store/pg/snapshot.ts), with each worker's share. */
async function writeReportsFromCopy(o: PgRunOptions, runId: number, budget: import('../store/pg/budget.js').BudgetRow | null): Promise<void> {
  const { PgReader } = await import('../store/pg/snapshot.js');
  const reader = await PgReader.open(o.stateUrl, o.stateDisplay);
  try {
    const snap = await reader.snapshot([runId], o.outDir);
    const store = Store.openForRead(snap.path);
    try {
      store.useRun(store.runs()[0]!);
      store.leaveOutRemoved();
      const data = buildReportData(store);
      data.summary.workers = await reader.workers(runId);
      if (budget) {
        // The one record of what the run was charged under its cap (every worker's balance readings).
        data.summary.credits.charged = budget.spent;
        data.summary.credits.cap = { credits: budget.cap, name: budget.name ?? `the run's credit cap of ${budget.cap}`, stopped: budget.stopped };
      }
      await o.writeReports(o.outDir, data);
      o.events.emit({ type: 'reports', out_dir: o.outDir, written: true });
    } finally {
      store.close();
      snap.close();
    }
  } catch (err) {
    o.events.emit({ type: 'warning', message: `could not write the reports: ${err instanceof Error ? err.message : String(err)}` });
  } finally {
    await reader.close();
  }
}

/** The run's jobs by state (every state present, 0 for none). */
export async function countsOf(pool: import('../store/pg/db.js').Pool, runId: number): Promise<Record<JobStateName, number>> {
  const { JOB_STATES } = await import('../store/index.js');
  const counts = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobStateName, number>;
  const r = await pool.query<{ state: JobStateName; n: number }>('SELECT state, count(*)::int AS n FROM jobs WHERE run_id = $1 GROUP BY state', [runId]);
  for (const row of r.rows) counts[row.state] = row.n;
  return counts;
}
type JobStateName = import('../store/index.js').JobState;

/** The run's result files recorded done (every worker's). */
export async function filesDoneOf(pool: import('../store/pg/db.js').Pool, runId: number): Promise<number> {
  const r = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM files WHERE run_id = $1 AND state = 'done'`, [runId]);
  return r.rows[0]?.n ?? 0;
}

/** The first `max` ids of the run's jobs in `state`, in manifest order. */
export async function firstIdsOf(pool: import('../store/pg/db.js').Pool, runId: number, state: JobStateName, max: number): Promise<string[]> {
  const r = await pool.query<{ id: string }>('SELECT id FROM jobs WHERE run_id = $1 AND state = $2 ORDER BY seq LIMIT $3', [runId, state, max]);
  return r.rows.map((row) => row.id);
}

/**
 * The callback path token of the state, made by the first worker that needs it (an insert that keeps the
 * first one: two workers starting together read the same), so that every worker's receiver takes every
 * job's callback (a public URL in front of several receivers).
 */
export async function callbackToken(pool: import('../store/pg/db.js').Pool): Promise<string> {
  const { newCallbackToken } = await import('./pipeline/receiver.js');
  await pool.query(`INSERT INTO meta (key, value) VALUES ('callback_token', $1) ON CONFLICT (key) DO NOTHING`, [newCallbackToken()]);
  const r = await pool.query<{ value: string }>(`SELECT value FROM meta WHERE key = 'callback_token'`);
  return r.rows[0]!.value;
}
