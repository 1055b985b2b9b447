import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { redactDeep, serviceConfigFromEnv } from '../client/index.js';
import { EventBus } from '../engine/index.js';
import type { EngineEvent } from '../engine/events.js';
import { callbackToken, countsOf, filesDoneOf, firstIdsOf } from '../engine/run-pg.js';
import { workEngine } from '../engine/work.js';
import { checkSameService, parseServiceMark, serviceMark, serviceMetaKey, type ServiceMark } from '../engine/prepare/same-service.js';
import { UsageError } from '../errors.js';
import type { JobState, RunRow } from '../store/index.js';
import { parseStateLocation } from '../store/location.js';
import { chooseRun, runName } from '../store/run-name.js';
import { checkCallbackTarget, checkServiceOptions, followSignal, openWritableBucket, outcomeName, type RunOptions, type RunOutcomeName } from './run.js';
import { servicePorts } from './ports.js';
import { workIdleMs, workLeaseMs } from './lease.js';
import { isS3Url, parseS3Url, s3UrlOf } from '../storage/url.js';

/**
 * A worker on a run kept in PostgreSQL, as `genbatch work` does it: joins the run (by name, or the only one)
 * without its manifest and works on it beside any other worker until stopped or, with `untilEmpty`, until no
 * job is left that a worker could move. Writes no reports (`genbatch report` does, from anywhere).
 */
export interface WorkOptions extends Pick<RunOptions, 'concurrency' | 'baseUrl' | 'apiKey' | 'callbackUrl' | 'listen' | 'timeScale' | 'requestTimeout' | 'statusRate' | 'yes'> {
  /** The database: a postgres:// URL (required). */
  state?: string;
  /** The run: its name, file name or manifest path; needed when the database holds several. */
  run?: string;
  untilEmpty?: boolean;
  /** Output folder, storage every worker sees, or `s3://bucket/prefix`; default: the run's recorded one (a folder must exist here). */
  out?: string;
  onEvent?: (e: EngineEvent) => void;
  signal?: AbortSignal;
}

export interface WorkSummary {
  outcome: RunOutcomeName;
  exitCode: number;
  /** The run's jobs by state at the end (every worker's). */
  counts: Record<JobState, number>;
  statusRequests: number;
  /** The run's manifest, as recorded, and the folder this worker wrote to. */
  manifest: string;
  outDir: string;
}

/**
 * The output folder a worker writes to: --out, else the folder the run recorded, which must be there on this
 * machine (storage every worker sees, mounted at the same path); a worker never makes it, so that results
 * never go to a local disk by mistake.
 */
export function workOutDir(run: Pick<RunRow, 'manifest' | 'out_dir'>, out: string | undefined): string {
  // A bucket (`s3://bucket/prefix`, given or recorded by the run) is every worker's: no folder to find.
  const named = out ?? run.out_dir;
  if (isS3Url(named)) return s3UrlOf(parseS3Url(named));
  if (out !== undefined) return resolve(out);
  if (!existsSync(run.out_dir)) {
    throw new UsageError(`the output folder of ${runName(run)}, ${run.out_dir}, is not on this machine; mount the shared folder there, or pass --out DIR where this machine sees it`);
  }
  return run.out_dir;
}

/** A worker against another service or key than the run was made against: refused (exit 2); none recorded: this one adopted. */
async function checkWorkService(pool: import('pg').Pool, runId: number, mark: ServiceMark, state: string): Promise<void> {
  const raw = (await pool.query<{ value: string }>('SELECT value FROM meta WHERE key = $1', [serviceMetaKey(runId)])).rows[0]?.value ?? null;
  checkSameService(parseServiceMark(raw), mark, state, 'work');
  if (raw === null) await pool.query('INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING', [serviceMetaKey(runId), JSON.stringify(mark)]);
}

export async function work(o: WorkOptions): Promise<WorkSummary> {
  if (o.state === undefined) throw new UsageError('work expects --state postgres://USER:PASSWORD@HOST:PORT/DATABASE (or GENBATCH_STATE): the database that holds the run');
  const location = parseStateLocation(o.state);
  if (location.kind !== 'postgres') {
    throw new UsageError(`work joins a run kept in PostgreSQL (--state postgres://...); ${location.path} is a SQLite state file, which has one writer: use genbatch run <manifest> --state ${location.path}`);
  }
  const { concurrency, timeScale, requestMs, statusRate } = await checkServiceOptions(o);
  const { PgReader } = await import('../store/pg/snapshot.js');
  const reader = await PgReader.open(location.url, location.display);
  let run: RunRow;
  try {
    run = chooseRun(await reader.runs(), o.run, `the PostgreSQL state ${location.display}`);
  } finally {
    await reader.close();
  }
  const outDir = workOutDir(run, o.out);
  // The run's service unless told otherwise: its tasks are there.
  const named = o.baseUrl ?? (process.env.GENBATCH_BASE_URL ? undefined : (run.base_url ?? undefined));
  const { baseUrl, apiKey } = serviceConfigFromEnv({ ...(named !== undefined ? { baseUrl: named } : {}), ...(o.apiKey !== undefined ? { apiKey: o.apiKey } : {}) });
  checkCallbackTarget(o, baseUrl);

  const { idleInTransactionMs, openPool } = await import('../store/pg/db.js');
  const { PgWorkStore } = await import('../store/pg/work-store.js');
  const leaseMs = workLeaseMs(timeScale);
  const pool = openPool(location.url, { max: Math.max(10, concurrency * 2), idleInTransactionMs: idleInTransactionMs(leaseMs) });
  const bus = new EventBus();
  if (o.onEvent) bus.on(o.onEvent);
  // Results in a bucket: checked writable before this worker claims anything (exit 74, naming it).
  const bucket = isS3Url(outDir) ? await openWritableBucket(outDir) : null;
  const ports = servicePorts({ baseUrl, apiKey, timeScale, requestMs, statusRate, bucket }, bus);
  const controller = followSignal(o.signal);
  try {
    await checkWorkService(pool, run.id, serviceMark(baseUrl, apiKey, false), location.display).catch((err: unknown) => Promise.reject(err instanceof UsageError ? err : reader.failure(err)));
    const store = await PgWorkStore.open({
      pool,
      runId: run.id,
      apiKey,
      leaseMs,
      takeOverMs: Math.max(500, Math.round(leaseMs / 6)),
      statusRatePerSec: statusRate / timeScale,
      uploads: { limit: 5, windowMs: 61_200 * timeScale + 20 },
    }).catch((err: unknown) => Promise.reject(reader.failure(err)));
    const token = o.listen ? await callbackToken(pool) : '';
    const outcome = await workEngine({
      store,
      counts: () => countsOf(pool, run.id),
      filesDone: () => filesDoneOf(pool, run.id),
      firstIds: (state, max) => firstIdsOf(pool, run.id, state, max),
      workLeft: (exclude) => store.workLeft(exclude),
      service: ports.service,
      download: ports.download,
      manifest: run.manifest,
      state: location.display,
      outDir,
      baseUrl,
      concurrency,
      timeScale,
      statusRate,
      callbacks: o.listen ? { publicUrl: o.callbackUrl ?? null, listen: o.listen, token, redact: (value: unknown) => redactDeep(value, apiKey) } : null,
      untilEmpty: o.untilEmpty === true,
      idleMs: workIdleMs(timeScale),
      signal: controller.signal,
      events: bus,
      cap: await (await import('../store/pg/budget.js')).pgCap(pool, run.id, store.worker),
    });
    return { outcome: outcomeName(outcome.exitCode, controller.signal.aborted), exitCode: outcome.exitCode, counts: outcome.counts, statusRequests: outcome.statusRequests, manifest: run.manifest, outDir };
  } finally {
    controller.dispose();
    await ports.close();
    bucket?.close();
    await pool.end().catch(() => undefined);
  }
}
