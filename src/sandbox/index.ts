import { networkInterfaces } from 'node:os';
import { UsageError } from '../errors.js';
import { SandboxContext } from './context.js';
import type { FaultEndpoint, ScriptStep } from './faults.js';
import type { RequestLogEntry } from './stats.js';
import { resolveOptions, type SandboxOptions } from './options.js';
import { statsSnapshot, type SandboxStats } from './routes/admin.js';
import { buildServer } from './server.js';

/**
 * The sandbox: a faithful local implementation of the media-generation
 * service. `startSandbox()` serves it in-process (tests, `run --sandbox`);
 * `genbatch sandbox` serves it standalone. See src/sandbox/README.md.
 */

export type { SandboxOptions } from './options.js';
export type { FaultEndpoint, FaultKind, FaultRule, ScriptStep } from './faults.js';
export type { SandboxStats } from './routes/admin.js';
export type { RequestLogEntry } from './stats.js';
export { parseFaults } from './faults.js';
export { checkAdminToken, checkClockStart, checkConnections, checkImageEdge, checkNonNegative, checkRate, checkTimerMs, checkVideoBytes, parseKeys, parseWords } from './options.js';
export { keyHash } from './accounts.js';

export interface Sandbox {
  /**
   * Base URL of file and upload URLs, e.g. http://127.0.0.1:41234 (no trailing slash):
   * `publicUrl` when given, else built from the bound address (see publicBase).
   */
  url: string;
  /** Where this machine reaches the server: http://<host>:<port>, 127.0.0.1 (or [::1]) for a wildcard host. */
  localUrl: string;
  /** The API keys it accepts, in option order. */
  keys: string[];
  /** The token /__sandbox/* requires in X-Sandbox-Admin-Token (tasks and stats: always; clock and faults: not from loopback to a loopback host). */
  adminToken: string;
  /** The virtual clock: `advance(seconds)` moves it forward; `now()` is virtual epoch ms. */
  clock: { advance(seconds: number): void; now(): number };
  /** The same counters as GET /__sandbox/stats. */
  stats(): SandboxStats;
  /** The latest requests (up to 10,000) in order of arrival: when (epoch ms), endpoint name, path and query. */
  requestLog(): RequestLogEntry[];
  /** Script the next outcomes of an endpoint, e.g. script('submit', ['500-after', 'ok']). */
  script(endpoint: FaultEndpoint | '*', steps: ScriptStep[]): void;
  /** Add credits to a key's balance (a top-up; negative spends them) and return the new balance; throws for an unknown key. */
  topUp(key: string, credits: number): number;
  /** Stop serving, stop callbacks. */
  close(): Promise<void>;
}

function wildcard(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]' || host === '::0';
}

function urlHost(host: string): string {
  const h = host.replace(/^\[|\]$/g, '');
  return h.includes(':') ? `[${h}]` : h;
}

/**
 * The base of file URLs when no publicUrl is given: the bound host; for a wildcard
 * host (0.0.0.0, ::), the first non-internal address of this machine (IPv4 first,
 * or IPv6 for ::), so other machines can fetch the files; 127.0.0.1 when it has none.
 */
export function publicBase(host: string, port: number): string {
  if (!wildcard(host)) return `http://${urlHost(host)}:${port}`;
  const addrs = Object.values(networkInterfaces()).flatMap((l) => l ?? []).filter((a) => !a.internal);
  const v4 = addrs.find((a) => a.family === 'IPv4');
  const v6 = host.includes(':') ? addrs.find((a) => a.family === 'IPv6' && !a.address.startsWith('fe80')) : undefined;
  const pick = v4?.address ?? v6?.address ?? '127.0.0.1';
  return `http://${urlHost(pick)}:${port}`;
}

/** Why the server could not listen, as a UsageError (exit 2) with plain words; other errors unchanged. */
function listenError(err: unknown, host: string, port: number): unknown {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
  const where = `${host}:${port}`;
  switch (code) {
    case 'EADDRINUSE':
      return new UsageError(`cannot listen on ${where}: the port is already in use (choose another --port, or 0 for any free port)`);
    case 'EACCES':
    case 'EPERM':
      return new UsageError(`cannot listen on ${where}: permission denied (ports below 1024 need privileges; choose another --port)`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_NONAME':
      return new UsageError(`cannot listen on ${where}: host "${host}" is not a valid address or name of this machine`);
    case 'EADDRNOTAVAIL':
      return new UsageError(`cannot listen on ${where}: address ${host} does not belong to this machine`);
    case 'ERR_SOCKET_BAD_PORT':
      return new UsageError(`cannot listen on ${where}: port must be an integer from 0 to 65535`);
    default:
      return err;
  }
}

export async function startSandbox(options: SandboxOptions = {}): Promise<Sandbox> {
  const o = resolveOptions(options);
  const ctx = new SandboxContext(o);
  const app = buildServer(ctx);
  try {
    await app.listen({ port: o.port, host: o.host });
  } catch (err) {
    ctx.close();
    await app.close().catch(() => undefined);
    throw listenError(err, o.host, o.port);
  }
  const addr = app.server.address();
  const port = typeof addr === 'object' && addr ? addr.port : o.port;
  ctx.baseUrl = o.publicUrl ?? publicBase(o.host, port);
  const localUrl = `http://${urlHost(wildcard(o.host) ? (o.host.includes(':') ? '::1' : '127.0.0.1') : o.host)}:${port}`;
  let closed: Promise<void> | null = null;
  return {
    url: ctx.baseUrl,
    localUrl,
    keys: ctx.accounts.keys(),
    adminToken: o.adminToken,
    clock: { advance: (s) => ctx.clock.advance(s), now: () => ctx.now() },
    stats: () => statsSnapshot(ctx),
    requestLog: () => ctx.stats.requestLog(),
    script: (endpoint, steps) => ctx.faults.script(endpoint, steps),
    topUp: (key, credits) => {
      const account = ctx.accounts.get(key);
      if (!account) throw new Error('topUp: not a key of this sandbox');
      account.add(credits);
      return account.balance(ctx.now());
    },
    close: () => {
      closed ??= (async () => {
        ctx.close();
        app.server.closeAllConnections?.();
        await app.close();
      })();
      return closed;
    },
  };
}
