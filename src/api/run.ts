import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { join, resolve } from 'node:path';
import { redactDeep, serviceConfigFromEnv } from '../client/index.js';
import { DEFAULT_STATUS_RATE, EventBus, parseOnly, parseRedo, planProbes, runEngine, type RedoState } from '../engine/index.js';
import { learnPrices as learnEach } from './learn-prices.js';
import { servicePorts } from './ports.js';
import type { EngineEvent } from '../engine/events.js';
import type { RunOutcome } from '../engine/index.js';
import { parseUncertain } from '../engine/prepare/uncertain.js';
import type { UploadJournal } from '../engine/ports.js';
import type { ReportData } from '../report/types.js';
import { EXIT, UsageError } from '../errors.js';
import { openManifest } from '../manifest/index.js';
import { defaultBookPath, loadPriceFile, observedPrices, PriceBook, type PriceBook as Book } from '../pricing/index.js';
import { defaultOutDir, defaultStateBeside } from './paths.js';
import { isS3Url, parseS3Url, s3UrlOf } from '../storage/url.js';
import type { ObjectOut } from '../storage/object-out.js';
import { parseStateLocation } from '../store/location.js';
import { callbackUrlProblem, isLoopbackHost } from '../lib/address.js';
import { serviceMark } from '../engine/prepare/same-service.js';
import type { JobState } from '../store/states.js';

/**
 * A whole run of a manifest, as `genbatch run` does it (the CLI calls this): validate, estimate and check the
 * budget, upload, submit, wait, download, report, checkpointed in the state file. Calling it again with the
 * same manifest and state resumes. Wires the HTTP client and the downloader into the engine's ports.
 */

/** Time scale of an in-process sandbox (0.02: a 15-60 s image takes 0.3-1.2 s). */
export const SANDBOX_TIME_SCALE = 0.02;
/** Credits of the fresh sandbox key (plenty for any demo). */
export const SANDBOX_CREDITS = 1_000_000;

export interface RunOptions {
  /** Start the sandbox in this process with a fresh key and run against it (no key or base URL needed). */
  sandbox?: boolean;
  /**
   * Output folder; default `<manifest dir>/genbatch-out/<manifest name>` (with `sandbox`: `<manifest name>.sandbox`). Or `s3://bucket/prefix`: results
   * and reports in that bucket (credentials, region and endpoint from the standard AWS environment).
   */
  out?: string;
  /**
   * State file (a path), or a PostgreSQL database (a `postgres://` URL); default `<out>/state.db`, or with
   * `out` in a bucket `<manifest dir>/genbatch-state/<manifest name>.db` (never a SQLite file in the bucket).
   */
  state?: string;
  /** Submit requests in flight at once; default 8. */
  concurrency?: number;
  /** Proceed although some prices are unknown. Default false (the run is refused with a BudgetError). */
  yes?: boolean;
  /** The guard on mass re-sends: more done jobs than this (default 10) whose spec changed stop the run (exit 4). */
  maxChanged?: number;
  /** Done jobs whose spec changed keep their results (changed-not-sent) instead of being sent again. */
  keepChanged?: boolean;
  /**
   * A cap on what the run is charged (measured by the balance, over all its invocations): refused when the known
   * estimate exceeds it; no job is sent whose expected price would take the charge past it, so the run is charged
   * at most this plus one task per process; then it stops sending (exit code 5, outcome `incomplete`).
   */
  maxCredits?: number;
  /**
   * A cap on what this invocation is charged, measured as maxCredits is (at most this plus one task): only the jobs
   * this invocation sends count. When tonight's work does not fit, the pending jobs that fit are sent in manifest
   * order and the rest stay pending (exit code 5). SQLite state only (a UsageError with PostgreSQL).
   */
  maxCreditsPerInvocation?: number;
  /** Service base URL; default $GENBATCH_BASE_URL. Ignored with `sandbox`. */
  baseUrl?: string;
  /** API key; default $GENBATCH_API_KEY. Ignored with `sandbox`. */
  apiKey?: string;
  /** A prices file (YAML or JSON: model id -> credits), as `--prices`. */
  prices?: string;
  /** Submits of unknown outcome: left `uncertain` (default), sent again, or `resubmit-after=DURATION` (src/engine/prepare/uncertain.ts). */
  uncertain?: string;
  /** Public URL that reaches the `listen` receiver (needs `listen`). */
  callbackUrl?: string;
  /** Start a callback receiver at HOST:PORT. */
  listen?: string;
  /** Scale every wait (default 1; 0.02 with `sandbox`). */
  timeScale?: number;
  /** The manifest may name only files inside its folder (`--confine`). */
  confine?: boolean;
  /**
   * Learn prices on the way: before the run, the first pending job of each price class of unknown price
   * is sent alone (one sub-run each, concurrency 1), and the charge the balance shows for it is kept in
   * the price book when it is attributable to that job and can be true (src/api/learn-prices.ts). No extra
   * task is made. Ignored with `sandbox`.
   */
  learnPrices?: boolean;
  /** Status reads per second at most, in the service's time (divided by timeScale); default 10. */
  statusRate?: number | string;
  /** Seconds: the total deadline of one API request (default 60, a chat call 300; or $GENBATCH_REQUEST_TIMEOUT). */
  requestTimeout?: number | string;
  /** Send again the jobs that ended in these states: a comma list or an array of `failed`, `expired`. */
  redo?: string | ReadonlyArray<'failed' | 'expired' | 'rejected'>;
  /** Send only the pending jobs whose id matches one of these patterns (`*`, `?`; each may be a comma list). */
  only?: readonly string[];
  /** Send at most this many pending jobs. */
  limit?: number;
  /** Each engine event as it happens (the events `genbatch run --json` prints). Must not throw. */
  onEvent?: (event: EngineEvent) => void;
  /** Abort: stop submitting, finish what is in flight, write the reports; the outcome is then `interrupted`. */
  signal?: AbortSignal;
}

/** How a run ended: every job done, some failed, work left for a later run, or stopped by the signal. */
export type RunOutcomeName = 'done' | 'failed' | 'incomplete' | 'interrupted';

export interface RunSummary {
  outcome: RunOutcomeName;
  /** The exit code `genbatch run` gives this outcome (src/errors.ts EXIT: 0, 1, 3, 4, 5, 6, 7; 130 for a signal aborted with reason 'SIGINT', 143 for 'SIGTERM'). */
  exitCode: number;
  /** Jobs by state at the end. */
  counts: Record<JobState, number>;
  statusRequests: number;
  outDir: string;
  statePath: string;
}

/**
 * The total deadline of one API request in ms: --request-timeout, else GENBATCH_REQUEST_TIMEOUT, else null
 * (the clients' defaults: 60 s, a chat call 300 s). Seconds, fractions allowed, more than 0.
 */
export function requestTimeoutMs(flag: number | string | undefined, env: string | undefined): number | null {
  const [value, name] = flag !== undefined ? [String(flag), '--request-timeout'] : [env, 'GENBATCH_REQUEST_TIMEOUT'];
  if (value === undefined || value.trim() === '') return null;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new UsageError(`${name} expects a number of seconds > 0, got "${value}"`);
  return Math.round(n * 1000);
}

/** --callback-url is the public base of the receiver: an absolute http(s) URL (each submit's URL is made from it). */
function checkCallbackUrl(value: string): void {
  let url: URL | null = null;
  try {
    url = new URL(value);
  } catch {
    url = null;
  }
  if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
    throw new UsageError(`--callback-url expects an absolute http:// or https:// URL, got "${value}"`);
  }
}

/**
 * Before anything is sent: the callback URL the service would be given must be one it takes (the contract: HTTPS
 * only, publicly reachable, no private or internal address), or every submit is refused with a 400 and every job
 * fails (--listen 127.0.0.1:0 alone gives http://127.0.0.1:PORT/). A service on a loopback address is a sandbox
 * on this machine, which may take loopback callbacks (`genbatch sandbox --allow-loopback`): not checked.
 */
export function checkCallbackTarget(o: Pick<RunOptions, 'listen' | 'callbackUrl'>, baseUrl: string): void {
  if (o.listen === undefined || !URL.canParse(baseUrl) || isLoopbackHost(new URL(baseUrl).hostname)) return;
  const why = o.callbackUrl === undefined ? 'must be an HTTPS URL' : callbackUrlProblem(o.callbackUrl, false);
  if (why === null) return;
  const given = o.callbackUrl === undefined ? `--listen ${o.listen} without --callback-url gives the service http://${o.listen}/ to call back` : `--callback-url ${o.callbackUrl}`;
  throw new UsageError(
    `${given}, which it refuses (a callback URL ${why}; the service takes only public HTTPS callback URLs): give --callback-url https://... (a public address that reaches the receiver on ${o.listen}: a reverse proxy or a tunnel), or leave out --listen (results are polled)`,
  );
}

/** The options about the service and its callbacks that run and work share, checked (UsageError naming the flag). */
export type ServiceOptions = Pick<RunOptions, 'concurrency' | 'callbackUrl' | 'listen' | 'timeScale' | 'sandbox' | 'requestTimeout' | 'statusRate'>;

/** Check the service options: the concurrency, the time scale (0.02 with sandbox, else 1), the request deadline (ms, null: defaults), status reads per second. */
export async function checkServiceOptions(o: ServiceOptions): Promise<{ concurrency: number; timeScale: number; requestMs: number | null; statusRate: number }> {
  const concurrency = o.concurrency ?? 8;
  if (o.callbackUrl && !o.listen) throw new UsageError('--callback-url needs --listen HOST:PORT (the receiver that URL reaches)');
  if (o.callbackUrl !== undefined) checkCallbackUrl(o.callbackUrl);
  if (o.listen !== undefined) (await import('../engine/pipeline/receiver.js')).parseListen(o.listen);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new UsageError(`--concurrency expects an integer >= 1, got ${concurrency}`);
  const timeScale = o.timeScale ?? (o.sandbox ? SANDBOX_TIME_SCALE : 1);
  if (!(timeScale > 0)) throw new UsageError(`--time-scale expects a number > 0, got ${timeScale}`);
  const requestMs = requestTimeoutMs(o.requestTimeout, process.env.GENBATCH_REQUEST_TIMEOUT);
  const statusRate = o.statusRate === undefined ? DEFAULT_STATUS_RATE : Number(o.statusRate);
  if (!(statusRate > 0) || !Number.isFinite(statusRate) || String(o.statusRate).trim() === '') {
    throw new UsageError(`--status-rate expects a number > 0 (status reads per second), got "${String(o.statusRate)}"`);
  }
  return { concurrency, timeScale, requestMs, statusRate };
}

/**
 * Run a manifest. Throws before anything is spent: ManifestError (invalid manifest), BudgetError (over budget,
 * balance or maxCredits, or unknown prices without `yes`), UsageError (bad option, missing key or base URL, the
 * state file held by a live run). Failed jobs are not errors: see the summary's outcome and counts.
 */
export async function run(manifest: string, o: RunOptions = {}): Promise<RunSummary> {
  const { concurrency, timeScale, requestMs, statusRate } = await checkServiceOptions(o);
  const bucketUrl = o.out !== undefined && isS3Url(o.out) ? o.out : null;
  // A --sandbox run's default output (and state) is its own: sandbox results never land where a real run's go.
  const sandboxed = o.sandbox === true;
  const outDir = bucketUrl !== null ? s3UrlOf(parseS3Url(bucketUrl)) : resolve(o.out ?? defaultOutDir(manifest, sandboxed));
  // The state of a run to a bucket stays on this machine (or in PostgreSQL): never a SQLite file in the bucket.
  const location = parseStateLocation(o.state ?? (bucketUrl !== null ? defaultStateBeside(manifest, sandboxed) : join(outDir, 'state.db')));
  const pg = location.kind === 'postgres' ? { url: location.url, display: location.display } : null;
  if (pg) {
    const unbuilt = [o.only !== undefined && o.only.length > 0 && '--only', o.limit !== undefined && '--limit', o.learnPrices && '--learn-prices', o.maxCreditsPerInvocation !== undefined && '--max-credits-per-invocation'].filter(Boolean);
    if (unbuilt.length > 0) throw new UsageError(`${unbuilt.join(', ')} with a PostgreSQL state (${pg.display}) is not built yet`);
  }
  const statePath = location.kind === 'postgres' ? location.display : location.path;
  const redo = o.redo === undefined ? [] : typeof o.redo === 'string' ? parseRedo(o.redo) : parseRedo(o.redo.join(','));
  const only = o.only && o.only.length > 0 ? parseOnly([...o.only]) : null;
  if (o.limit !== undefined && (!Number.isInteger(o.limit) || o.limit < 1)) throw new UsageError(`--limit expects an integer >= 1, got ${o.limit}`);
  const priceFile = o.prices ? await loadPriceFile(o.prices) : { user: null, book: null };
  const userPrices = priceFile.user;

  let sandbox: { url: string; close(): Promise<void> } | null = null;
  let baseUrl: string;
  let apiKey: string;
  if (o.sandbox) {
    const { startSandbox } = await import('../sandbox/index.js');
    apiKey = `sk-sandbox-${randomBytes(16).toString('hex')}`;
    // Loopback callbacks allowed: with --listen, the receiver is on this machine.
    sandbox = await startSandbox({ port: 0, keys: { [apiKey]: SANDBOX_CREDITS }, timeScale, allowLoopback: o.listen !== undefined });
    baseUrl = sandbox.url;
  } else {
    ({ baseUrl, apiKey } = serviceConfigFromEnv({ ...(o.baseUrl !== undefined ? { baseUrl: o.baseUrl } : {}), ...(o.apiKey !== undefined ? { apiKey: o.apiKey } : {}) }));
    checkCallbackTarget(o, baseUrl);
  }
  let bucket: ObjectOut | null = null;
  try {
    if (bucketUrl !== null) bucket = await openWritableBucket(bucketUrl);
    const settings = { outDir, statePath, pg, timeScale, concurrency, userPrices, baseUrl, apiKey, sandbox: sandbox !== null, redo, only, requestMs, statusRate, bucket };
    const book = sandbox ? null : (priceFile.book ?? PriceBook.load(defaultBookPath()));
    if (o.learnPrices && book) {
      const stopped = await learnPrices(manifest, o, { ...settings, book });
      if (stopped) return stopped;
    }
    return await runAgainst(manifest, o, { ...settings, book });
  } finally {
    bucket?.close();
    await sandbox?.close();
  }
}

/** The bucket of `--out s3://...`, checked writable: one that is not stops here (exit 74, naming it), before anything is sent. */
export async function openWritableBucket(url: string): Promise<ObjectOut> {
  const bucket = await (await import('../storage/index.js')).openBucket(url);
  try {
    await bucket.checkWritable();
  } catch (err) {
    bucket.close();
    throw err;
  }
  return bucket;
}

interface Settings {
  outDir: string;
  /** The state file, or the PostgreSQL URL with its password hidden. */
  statePath: string;
  /** A PostgreSQL state (src/engine/run-pg.ts); null: the SQLite state file statePath. */
  pg: { url: string; display: string } | null;
  timeScale: number;
  concurrency: number;
  userPrices: Record<string, number> | null;
  baseUrl: string;
  apiKey: string;
  sandbox: boolean;
  redo: RedoState[];
  only: string[] | null;
  /** The total deadline of one API request, ms; null: the clients' defaults. */
  requestMs: number | null;
  /** Status reads per second, in the service's time. */
  statusRate: number;
  /** Prices observed on the account (none for an in-process sandbox, whose address is new each time). */
  book: Book | null;
  /** `--out s3://...`: the bucket (checked writable); null: the disk. */
  bucket: ObjectOut | null;
}

/**
 * --learn-prices: each class's first job sent alone (the run's other jobs wait) and measured as a price probe
 * measures (src/api/learn-prices.ts). Returns the summary when a sub-run was stopped (the caller returns it).
 */
async function learnPrices(manifest: string, o: RunOptions, s: Settings & { book: Book }): Promise<RunSummary | null> {
  const m = await openManifest(manifest, { confine: o.confine === true });
  const prices = m.pricing || s.userPrices ? { ...(m.pricing ?? {}), ...(s.userPrices ?? {}) } : null;
  const plan = await planProbes(m, prices, observedPrices(s.book, s.baseUrl));
  if (plan.problems.length > 0) return null; // the run itself reports them
  return learnEach(plan.classes, {
    baseUrl: s.baseUrl,
    apiKey: s.apiKey,
    timeScale: s.timeScale,
    requestMs: s.requestMs,
    book: s.book,
    signal: o.signal,
    emit: (e) => o.onEvent?.(e),
    runAlone: (entry, onEvent) =>
      runAgainst(manifest, { ...o, limit: undefined, redo: undefined, onEvent }, { ...s, only: [entry.job.id.replace(/[*?]/g, '?')], concurrency: 1, redo: [] }),
    stopped: (summary) => summary.outcome === 'interrupted',
  });
}

/** The run once the service is known: the clients, the engine's ports, the engine. */
async function runAgainst(manifest: string, o: RunOptions, s: Settings): Promise<RunSummary> {
  const { outDir, statePath, timeScale, concurrency, userPrices, baseUrl, apiKey } = s;
  const bus = new EventBus();
  if (o.onEvent) bus.on(o.onEvent);
  // The report writers are loaded once the run has work to do, not when the reports are written: a run can last
  // hours, and a rebuild or upgrade of genbatch meanwhile replaces dist/bundle/ (chunks under new hashed names),
  // so a chunk first imported at the end would be gone. A run that changes nothing still never loads them.
  type ReportModule = typeof import('../report/index.js');
  let reportModule: Promise<ReportModule> | null = null;
  const loadReports = (): Promise<ReportModule> => (reportModule ??= import('../report/index.js'));
  const FINAL: ReadonlySet<string> = new Set(['done', 'failed', 'uncertain', 'expired', 'skipped', 'exists']);
  const offPreload = bus.on((e) => {
    const work =
      e.type === 'job' ||
      (e.type === 'synced' && (e.new + e.changed + e.skipped > 0 || Object.entries(e.counts).some(([state, n]) => n > 0 && !FINAL.has(state))));
    if (!work) return;
    // A failed load is tried again by writeReports, which reports its error as before.
    loadReports().catch(() => {
      reportModule = null;
    });
    offPreload();
  });
  const { service, download, close } = servicePorts({ baseUrl, apiKey, timeScale, requestMs: s.requestMs, statusRate: s.statusRate, bucket: s.bucket }, bus);

  const controller = followSignal(o.signal);
  try {
    // What both engines take (SQLite: runEngine; PostgreSQL: runOnPostgres).
    const common = {
      manifestPath: manifest,
      outDir,
      service,
      download,
      baseUrl,
      sandbox: s.sandbox,
      serviceMark: serviceMark(baseUrl, apiKey, s.sandbox),
      concurrency,
      yes: o.yes === true,
      maxCredits: o.maxCredits ?? null,
      uncertain: parseUncertain(o.uncertain).policy,
      timeScale,
      statusRate: s.statusRate,
      confine: o.confine === true,
      callbacks: o.listen ? { publicUrl: o.callbackUrl ?? null, listen: o.listen, redact: (value: unknown) => redactDeep(value, apiKey) } : null,
      userPrices,
      observedPrices: s.book ? observedPrices(s.book, baseUrl) : null,
      signal: controller.signal,
      events: bus,
      writeReports: async (dir: string, data: ReportData, journal?: UploadJournal) => (await loadReports()).writeReports(dir, data, s.bucket && journal ? { bucket: { out: s.bucket, journal } } : {}),
    };
    let outcome: RunOutcome;
    if (s.pg) {
      const { runOnPostgres } = await import('../engine/run-pg.js');
      const { workIdleMs, workLeaseMs } = await import('./lease.js');
      outcome = await runOnPostgres({ ...common, stateUrl: s.pg.url, stateDisplay: s.pg.display, apiKey, redo: s.redo, leaseMs: workLeaseMs(timeScale), idleMs: workIdleMs(timeScale) });
    } else {
      outcome = await runEngine({ ...common, statePath, redo: s.redo, only: s.only, limit: o.limit ?? null, changed: { max: o.maxChanged ?? null, keep: o.keepChanged === true }, uncertainAfterMs: parseUncertain(o.uncertain).afterMs, maxCreditsPerInvocation: o.maxCreditsPerInvocation ?? null });
    }
    return { outcome: outcomeName(outcome.exitCode, controller.signal.aborted), exitCode: outcome.exitCode, counts: outcome.counts, statusRequests: outcome.statusRequests, outDir, statePath };
  } finally {
    controller.dispose();
    await close();
  }
}

/**
 * The engine listens to one signal of its own (every request in flight listens to it), aborted with the
 * caller's reason; dispose() stops following the caller's.
 */
export function followSignal(outer: AbortSignal | undefined): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  setMaxListeners(0, controller.signal);
  const abort = () => controller.abort(outer?.reason);
  if (outer?.aborted) abort();
  else outer?.addEventListener('abort', abort, { once: true });
  return { signal: controller.signal, dispose: () => outer?.removeEventListener('abort', abort) };
}

export function outcomeName(exitCode: number, aborted: boolean): RunOutcomeName {
  if (aborted || exitCode === EXIT.sigint || exitCode === EXIT.sigterm) return 'interrupted';
  if (exitCode === EXIT.ok) return 'done';
  // 6: done apart from jobs the service refused for their input.
  if (exitCode === EXIT.jobsFailed || exitCode === EXIT.failedPermanent) return 'failed';
  return 'incomplete';
}
