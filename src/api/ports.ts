/**
 * The engine's ports over the HTTP clients, shared by run and work. Kept apart from run.ts so that the
 * library's declarations (dist/api/run.d.ts, reached from the package's index) do not reach the engine's
 * and the store's types (better-sqlite3's among them, which a library user need not have).
 */
import { ChatClient, ServiceClient, UploadLimiter, holdsKey, redact, withRetry, type UploadOptions } from '../client/index.js';
import { cleanupPartials, downloadFile, fsyncDir, isGone, sanitizeName } from '../download/index.js';
import type { DownloadPort, EventBus, ServicePort, UploadCall } from '../engine/index.js';
import type { ObjectOut } from '../storage/object-out.js';
import { resultsBucket } from '../storage/results.js';

/**
 * The engine's ports over the HTTP clients (run and work): the service (submit, status, uploads, chat,
 * balance) and the downloads, every retry reported as an event on `bus`. close() ends both clients.
 */
export function servicePorts(
  s: { baseUrl: string; apiKey: string; timeScale: number; requestMs: number | null; statusRate: number; bucket?: ObjectOut | null },
  bus: EventBus,
): { service: ServicePort; download: DownloadPort; close(): Promise<void> } {
  const { baseUrl, apiKey, timeScale } = s;
  const client = new ServiceClient({
    baseUrl,
    apiKey,
    policy: { baseMs: 1000 * timeScale, maxMs: Math.max(50, 60_000 * timeScale), maxAttempts: 10, jitter: 'full' },
    // 5 uploads per 60 s per key; the window is taken 2% longer (+20 ms) so clock skew and
    // request latency never make the service see a sixth upload inside its minute.
    // Each wait for it is an event: the progress says what holds the run (`waiting for the upload window`).
    uploadLimiter: new UploadLimiter({
      limit: 5,
      windowMs: 61_200 * timeScale + 20,
      onWait: (w) => bus.emit({ type: 'wait', what: 'upload-window', rule: '5 a minute', queued: w.queued, next_in_ms: w.nextInMs }),
    }),
    // The engine spends this many reads per second on the tasks most likely finished; the client's cap (the
    // same) also holds for its retries.
    statusRatePerSec: s.statusRate / timeScale,
    ...(s.requestMs !== null ? { timeouts: { requestMs: s.requestMs } } : {}),
    onRetry: (info) => bus.emit({ type: 'retry', what: info.operation, attempt: info.attempt, delay_ms: info.delayMs, error: info.error.message }),
  });
  // Chat calls: same key, base URL and retry policy; retried like a GET (src/client/chat.ts).
  const chatClient = new ChatClient({
    baseUrl,
    apiKey,
    policy: client.policy,
    ...(s.requestMs !== null ? { timeouts: { requestMs: s.requestMs } } : {}),
    onRetry: (info) => bus.emit({ type: 'retry', what: info.operation, attempt: info.attempt, delay_ms: info.delayMs, error: info.error.message }),
  });
  const service: ServicePort = {
    chat: (req, opts) => chatClient.call(req, opts),
    // A stop never cuts a submit already sent: the run waits for its answer (task id recorded, not uncertain).
    submit: (body, signal) => client.submit(body, signal ? { signal, keepIfSent: true } : {}),
    status: (taskId, signal) => client.status(taskId, signal ? { signal } : {}),
    musicDetail: (taskId, signal) => client.musicDetail(taskId, signal ? { signal } : {}),
    balance: () => client.balance(),
    uploadStream: (file, opts) => client.uploadStream(file, { fileName: opts.fileName, ...uploadCall(opts) }),
    uploadBase64: (data, opts) => client.uploadBase64(data, uploadCall(opts)),
    uploadUrl: (url, opts) => client.uploadUrl(url, uploadCall(opts)),
  };
  const keyless = keyOut(apiKey);
  // Downloads go through the client's one retry layer (GET: 429, 5xx, dropped and truncated bodies).
  const download: DownloadPort = {
    downloadFile: (d) =>
      withRetry(() => downloadFile(d).then((r) => ({ ...r, contentType: keyless.type(r.contentType) }), keyless.error), {
        policy: client.policy,
        method: 'GET',
        ...(d.signal ? { signal: d.signal } : {}),
        onRetry: (info) => bus.emit({ type: 'retry', what: 'download', attempt: info.attempt, delay_ms: info.delayMs, error: info.error.message }),
      }),
    isGone,
    cleanupPartials: (dir) => cleanupPartials(dir),
    syncDir: (dir) => fsyncDir(dir),
    sanitizeName: (name) => sanitizeName(name, 'job'),
  };
  // --out s3://...: results go to the bucket, each file retried as a whole (a new GET and a new upload) by the same layer.
  if (s.bucket) {
    const bucket = resultsBucket(s.bucket, (fn, signal) =>
      withRetry(() => fn().catch(keyless.error), {
        policy: client.policy,
        method: 'GET',
        ...(signal ? { signal } : {}),
        onRetry: (info) => bus.emit({ type: 'retry', what: 'download', attempt: info.attempt, delay_ms: info.delayMs, error: info.error.message }),
      }),
    );
    download.bucket = {
      ...bucket,
      fetchFile: async (o) => {
        const beforeWrite = o.beforeWrite;
        const clean = beforeWrite ? { ...o, beforeWrite: (p: Parameters<typeof beforeWrite>[0]) => beforeWrite({ ...p, contentType: keyless.type(p.contentType) }) } : o;
        const got = await bucket.fetchFile(clean);
        return { ...got, contentType: keyless.type(got.contentType) };
      },
    };
  }

  return {
    service,
    download,
    close: async () => {
      await client.close();
      await chatClient.close();
    },
  };
}

/**
 * The key out of what a download's answer gives. The client redacts the service's answers, but a download
 * is answered by whatever host the file URL (or a redirect) names, and the client never sees that answer:
 * an error names a redirect's target (its Location, which may hold the key), and a Content-Type may be
 * `image/<key>` (a plain media type, kept as the file's type). Errors are redacted before the retry layer
 * reports them; a media type holding the key is dropped (null: none given).
 */
function keyOut(apiKey: string): { error: (err: unknown) => never; type: (contentType: string | null) => string | null } {
  return {
    error: (err) => {
      if (err instanceof Error) err.message = redact(err.message, apiKey);
      throw err;
    },
    type: (contentType) => (contentType !== null && holdsKey(contentType, apiKey) ? null : contentType),
  };
}

/** The client's options of one upload call of the engine: its signal and the store's shared upload slot. */
function uploadCall(opts: UploadCall): UploadOptions {
  const out: UploadOptions = {};
  if (opts.signal) out.signal = opts.signal;
  if (opts.slot) out.slot = opts.slot;
  return out;
}
