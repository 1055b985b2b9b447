import { UsageError } from '../../errors.js';
import {
  checkAdminToken,
  checkClockStart,
  checkConnections,
  checkImageEdge,
  checkNonNegative,
  checkRate,
  checkTimerMs,
  checkVideoBytes,
  parseKeys,
  parseWords,
  startSandbox,
  type SandboxOptions,
} from '../../sandbox/index.js';

/** Flags as commander hands them over; the option flags stay text and are checked here, by the sandbox's own range checks. */
interface SandboxFlags {
  port: number;
  host: string;
  publicUrl?: string;
  keys?: string;
  timeScale: number;
  seed?: number;
  faults?: string;
  failureRate?: string;
  partialRate?: string;
  priceFactor?: string;
  allowLoopback?: boolean;
  bannedWords?: string;
  policyWords?: string;
  slowMs?: string;
  retryAfter?: string;
  imageEdge?: string;
  videoBytes?: string;
  callbackTimeoutMs?: string;
  clockStart?: string;
  adminToken?: string;
  maxConnections?: string;
  maxConnectionsPerClient?: string;
}

type Check = (name: string, v: number, given: string) => number;

/** The number a flag's text holds, checked under the flag's name; errors show the text as given ("" is not 0). */
function numberFlag(flag: string, text: string, check: Check): number {
  return check(flag, text.trim() === '' ? Number.NaN : Number(text), `"${text}"`);
}

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})(T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})?)?$/;

/** `--clock-start`: epoch ms (digits) or an ISO date (a date-time without a zone is UTC, like created_time). */
function parseClockStart(text: string): number {
  const t = text.trim();
  if (/^\d+$/.test(t)) return checkClockStart('--clock-start', Number(t), `"${text}"`);
  const m = ISO_DATE.exec(t);
  const [, y, mo, d, time, zone] = m ?? [];
  const day = new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d)));
  const realDay = day.getUTCMonth() === Number(mo) - 1 && day.getUTCDate() === Number(d);
  const ms = m && realDay ? Date.parse(time && !zone ? `${t}Z` : t) : Number.NaN;
  if (Number.isNaN(ms)) throw new UsageError(`--clock-start expects epoch ms or an ISO date such as 2026-01-01 or 2026-01-01T12:00:00Z (no zone: UTC), got "${text}"`);
  return checkClockStart('--clock-start', ms, `"${text}"`);
}

/** startSandbox options from the flags; every problem is a UsageError naming the flag (exit 2). */
export function sandboxOptions(opts: SandboxFlags): SandboxOptions {
  if (!Number.isInteger(opts.port) || opts.port < 0 || opts.port > 65535) throw new UsageError(`--port expects an integer from 0 to 65535, got ${opts.port}`);
  const o: SandboxOptions = {
    port: opts.port,
    host: opts.host,
    timeScale: opts.timeScale,
    allowLoopback: opts.allowLoopback === true,
  };
  if (opts.publicUrl !== undefined) o.publicUrl = opts.publicUrl;
  if (opts.keys !== undefined) o.keys = parseKeys(opts.keys);
  if (opts.seed !== undefined) o.seed = opts.seed;
  if (opts.faults !== undefined) o.faults = opts.faults;
  if (opts.failureRate !== undefined) o.failureRate = numberFlag('--failure-rate', opts.failureRate, checkRate);
  if (opts.partialRate !== undefined) o.partialRate = numberFlag('--partial-rate', opts.partialRate, checkRate);
  if (opts.priceFactor !== undefined) o.priceFactor = numberFlag('--price-factor', opts.priceFactor, checkNonNegative);
  if (opts.bannedWords !== undefined) o.bannedWords = parseWords(opts.bannedWords);
  if (opts.policyWords !== undefined) o.policyWords = parseWords(opts.policyWords);
  if (opts.slowMs !== undefined) o.slowMs = numberFlag('--slow-ms', opts.slowMs, checkTimerMs);
  if (opts.retryAfter !== undefined) o.retryAfterS = numberFlag('--retry-after', opts.retryAfter, checkNonNegative);
  if (opts.imageEdge !== undefined) o.imageEdge = numberFlag('--image-edge', opts.imageEdge, checkImageEdge);
  if (opts.videoBytes !== undefined) o.videoBytes = numberFlag('--video-bytes', opts.videoBytes, checkVideoBytes);
  if (opts.callbackTimeoutMs !== undefined) o.callbackTimeoutMs = numberFlag('--callback-timeout-ms', opts.callbackTimeoutMs, checkTimerMs);
  if (opts.clockStart !== undefined) o.clockStart = parseClockStart(opts.clockStart);
  if (opts.maxConnections !== undefined || opts.maxConnectionsPerClient !== undefined) {
    o.connections = {
      ...(opts.maxConnections !== undefined ? { total: numberFlag('--max-connections', opts.maxConnections, checkConnections) } : {}),
      ...(opts.maxConnectionsPerClient !== undefined ? { perClient: numberFlag('--max-connections-per-client', opts.maxConnectionsPerClient, checkConnections) } : {}),
    };
  }
  const adminToken = opts.adminToken ?? process.env.GENBATCH_SANDBOX_ADMIN_TOKEN;
  if (adminToken !== undefined) o.adminToken = checkAdminToken(adminToken);
  return o;
}

/** `genbatch sandbox`: serve the sandbox until SIGINT or SIGTERM; prints the base URL and the keys. */
export default async function sandbox(opts: SandboxFlags): Promise<number> {
  const sb = await startSandbox(sandboxOptions(opts));
  process.stdout.write(`genbatch sandbox listening on ${sb.localUrl}\n`);
  if (sb.url !== sb.localUrl) process.stdout.write(`file URLs: ${sb.url}\n`);
  for (const key of sb.keys) process.stdout.write(`key: ${key}\n`);
  // A token the user chose is theirs to know; a generated one is printed, or nobody could use it.
  const chosen = opts.adminToken !== undefined || process.env.GENBATCH_SANDBOX_ADMIN_TOKEN !== undefined;
  process.stdout.write(`admin token (header X-Sandbox-Admin-Token, for /__sandbox/*): ${chosen ? '(as given)' : sb.adminToken}\n`);
  process.stdout.write(`try: curl -s -H "Authorization: Bearer ${sb.keys[0] ?? ''}" ${sb.localUrl}/api/user/balance\n`);
  process.stdout.write('press Ctrl+C to stop\n');
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  await sb.close();
  process.stderr.write(`genbatch sandbox stopped (${signal})\n`);
  return 0;
}
