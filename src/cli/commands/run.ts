import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { ChatClient, ServiceClient, UploadLimiter, redact, serviceConfigFromEnv, withRetry } from '../../client/index.js';
import { cleanupPartials, downloadFile, fsyncDir, isGone, sanitizeName } from '../../download/index.js';
import { EventBus, runEngine, type DownloadPort, type ServicePort } from '../../engine/index.js';
import { UsageError } from '../../errors.js';
import { loadPrices } from '../../pricing/index.js';
import { attachProgress, flushed, ignoreBrokenPipe } from '../progress.js';
import { confineWanted } from '../confine.js';

/**
 * `genbatch run <manifest>`: the checkpointed pipeline. Rerunning the same
 * command resumes from the state file.
 *
 * --sandbox starts the sandbox in this process with a fresh key and
 * SANDBOX_TIME_SCALE (0.02: a 15-60 s image takes 0.3-1.2 s, a 90-300 s video
 * 1.8-6 s, the upload window of 60 s becomes 1.2 s), so the demo finishes in
 * well under a minute. --time-scale overrides it; against another server it
 * scales the runner's own waits (poll interval, first poll, backoff, upload
 * window) to match a sandbox started with the same --time-scale.
 */
export const SANDBOX_TIME_SCALE = 0.02;
/** Credits of the fresh sandbox key (plenty for any demo). */
export const SANDBOX_CREDITS = 1_000_000;

export interface RunFlags {
  sandbox?: boolean;
  out?: string;
  state?: string;
  concurrency: number;
  yes?: boolean;
  maxCredits?: number;
  json?: boolean;
  baseUrl?: string;
  prices?: string;
  uncertain: 'skip' | 'resubmit';
  callbackUrl?: string;
  listen?: string;
  timeScale?: number;
  confine?: boolean;
}

/** Default output folder: `<manifest dir>/genbatch-out/<manifest name>/`. */
export function defaultOutDir(manifest: string): string {
  const abs = resolve(manifest);
  return join(dirname(abs), 'genbatch-out', basename(abs, extname(abs)));
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

export default async function run(manifest: string, flags: RunFlags): Promise<number> {
  ignoreBrokenPipe();
  if (flags.callbackUrl && !flags.listen) throw new UsageError('--callback-url needs --listen HOST:PORT (the receiver that URL reaches)');
  if (flags.callbackUrl !== undefined) checkCallbackUrl(flags.callbackUrl);
  if (flags.listen !== undefined) (await import('../../engine/callbacks.js')).parseListen(flags.listen);
  if (flags.concurrency < 1) throw new UsageError(`--concurrency expects an integer >= 1, got ${flags.concurrency}`);
  const outDir = resolve(flags.out ?? defaultOutDir(manifest));
  const statePath = resolve(flags.state ?? join(outDir, 'state.db'));
  const timeScale = flags.timeScale ?? (flags.sandbox ? SANDBOX_TIME_SCALE : 1);
  if (!(timeScale > 0)) throw new UsageError(`--time-scale expects a number > 0, got ${timeScale}`);
  const userPrices = flags.prices ? await loadPrices(flags.prices) : null;

  let sandbox: { url: string; close(): Promise<void> } | null = null;
  let baseUrl: string;
  let apiKey: string;
  if (flags.sandbox) {
    const { startSandbox } = await import('../../sandbox/index.js');
    apiKey = `sk-sandbox-${randomBytes(16).toString('hex')}`;
    // Loopback callbacks allowed: with --listen, the receiver is on this machine.
    sandbox = await startSandbox({ port: 0, keys: { [apiKey]: SANDBOX_CREDITS }, timeScale, allowLoopback: flags.listen !== undefined });
    baseUrl = sandbox.url;
  } else {
    ({ baseUrl, apiKey } = serviceConfigFromEnv({ ...(flags.baseUrl !== undefined ? { baseUrl: flags.baseUrl } : {}) }));
  }

  const bus = new EventBus();
  const stopProgress = attachProgress(bus, { json: flags.json === true, tty: process.stderr.isTTY === true && flags.json !== true });
  // The report writers are loaded once the run has work to do, not when the reports are written: a run can last
  // hours, and a rebuild or upgrade of genbatch meanwhile replaces dist/bundle/ (chunks under new hashed names),
  // so a chunk first imported at the end would be gone. A run that changes nothing still never loads them.
  type ReportModule = typeof import('../../report/index.js');
  let reportModule: Promise<ReportModule> | null = null;
  const loadReports = (): Promise<ReportModule> => (reportModule ??= import('../../report/index.js'));
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
  const client = new ServiceClient({
    baseUrl,
    apiKey,
    policy: { baseMs: 1000 * timeScale, maxMs: Math.max(50, 60_000 * timeScale), maxAttempts: 10, jitter: 'full' },
    // 5 uploads per 60 s per key; the window is taken 2% longer (+20 ms) so clock skew and
    // request latency never make the service see a sixth upload inside its minute.
    uploadLimiter: new UploadLimiter({ limit: 5, windowMs: 61_200 * timeScale + 20 }),
    statusRatePerSec: 10 / timeScale,
    onRetry: (info) => bus.emit({ type: 'retry', what: info.operation, attempt: info.attempt, delay_ms: info.delayMs, error: info.error.message }),
  });
  // Chat calls: same key, base URL and retry policy; retried like a GET (src/client/chat.ts).
  const chatClient = new ChatClient({
    baseUrl,
    apiKey,
    policy: client.policy,
    onRetry: (info) => bus.emit({ type: 'retry', what: info.operation, attempt: info.attempt, delay_ms: info.delayMs, error: info.error.message }),
  });
  const service: ServicePort = {
    chat: (req, o) => chatClient.call(req, o),
    // A stop never cuts a submit already sent: the run waits for its answer (task id recorded, not uncertain).
    submit: (body, signal) => client.submit(body, signal ? { signal, keepIfSent: true } : {}),
    status: (taskId, signal) => client.status(taskId, signal ? { signal } : {}),
    musicDetail: (taskId, signal) => client.musicDetail(taskId, signal ? { signal } : {}),
    balance: () => client.balance(),
    uploadStream: (file, o) => client.uploadStream(file, { fileName: o.fileName, ...(o.signal ? { signal: o.signal } : {}) }),
    uploadBase64: (data, o) => client.uploadBase64(data, o.signal ? { signal: o.signal } : {}),
    uploadUrl: (url, o) => client.uploadUrl(url, o.signal ? { signal: o.signal } : {}),
  };
  // Downloads go through the client's one retry layer (GET: 429, 5xx, dropped and truncated bodies).
  const download: DownloadPort = {
    downloadFile: (o) =>
      withRetry(() => downloadFile(o), {
        policy: client.policy,
        method: 'GET',
        ...(o.signal ? { signal: o.signal } : {}),
        onRetry: (info) => bus.emit({ type: 'retry', what: 'download', attempt: info.attempt, delay_ms: info.delayMs, error: info.error.message }),
      }),
    isGone,
    cleanupPartials: (dir) => cleanupPartials(dir),
    syncDir: (dir) => fsyncDir(dir),
    sanitizeName: (name) => sanitizeName(name, 'job'),
  };

  // First SIGINT/SIGTERM: stop submitting, finish what is in flight, write the report.
  // Second SIGINT: give the signal back to Node's default handler, which ends the process at once.
  const controller = new AbortController();
  // Every request in flight listens to this one signal.
  setMaxListeners(0, controller.signal);
  const onSignal = (sig: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      process.removeListener('SIGINT', onSignal);
      process.removeListener('SIGTERM', onSignal);
      // Events still queued for the next write go out first (the default handler ends the process at once).
      stopProgress();
      process.kill(process.pid, sig);
      return;
    }
    controller.abort(sig);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    const outcome = await runEngine({
      manifestPath: manifest,
      outDir,
      statePath,
      service,
      download,
      baseUrl,
      sandbox: sandbox !== null,
      concurrency: flags.concurrency,
      yes: flags.yes === true,
      maxCredits: flags.maxCredits ?? null,
      uncertain: flags.uncertain,
      timeScale,
      callbacks: flags.listen ? { publicUrl: flags.callbackUrl ?? null, listen: flags.listen, redact: (text: string) => redact(text, apiKey) } : null,
      userPrices,
      confine: confineWanted(flags.confine),
      signal: controller.signal,
      events: bus,
      writeReports: async (dir, data) => (await loadReports()).writeReports(dir, data),
    });
    return outcome.exitCode;
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
    stopProgress();
    await client.close();
    await chatClient.close();
    await sandbox?.close();
    await flushed(process.stdout);
    await flushed(process.stderr);
  }
}
