import { randomBytes } from 'node:crypto';
import { UsageError } from '../errors.js';
import { DEFAULT_CONNECTION_CAPS, type ConnectionCaps } from './connections.js';
import { parseFaults, type FaultRule } from './faults.js';
import { systemResolver } from './guard.js';

/** Options of startSandbox() and `genbatch sandbox`. Every field is optional. */
export interface SandboxOptions {
  /** Port to listen on; 0 (default) picks a free port. */
  port?: number;
  /** Host to bind; default 127.0.0.1. */
  host?: string;
  /**
   * Base URL that clients use to reach the sandbox (put in file_url and upload URLs), e.g.
   * `https://sandbox.example.com` behind a proxy: http or https, an origin only (no path, query
   * or credentials). Default: from the bound address (see publicBase in index.ts).
   */
  publicUrl?: string;
  /** API keys and their starting credits, e.g. `{ k1: 1000 }`. Default: one generated key with 10000 credits. */
  keys?: Record<string, number>;
  /** Multiplies every duration (task times, callback retry delays); 0.01 makes a 60 s task take 0.6 s. Default 1. */
  timeScale?: number;
  /** Seed for every random draw (durations, failures, ids, faults). Default: random. */
  seed?: number;
  /** Fault injection: a spec string (see parseFaults) or parsed rules. Default: none. */
  faults?: string | FaultRule[];
  /** Share of tasks that fail, 0..1. Default 0. */
  failureRate?: number;
  /** Share of multi-output tasks (n > 1) that return fewer outputs than asked (the rest refunded). Default 0. */
  partialRate?: number;
  /**
   * Multiplies every charge (tasks and chat calls) by this factor: a service that charges more (or less) than its
   * published prices, e.g. 18.5 charges 37 credits for a task published at 2. Refunds follow the charge. Default 1.
   */
  priceFactor?: number;
  /** Allow http:// and loopback callback URLs (and, for uploads, loopback remote URLs). Default false. */
  allowLoopback?: boolean;
  /** Words that trigger content_moderation_error when found in any string of `input` (case-insensitive, whole words). Default ["forbidden"]. */
  bannedWords?: string[];
  /** Words that make an accepted task fail later with a content-policy error_message (then refunded). Default ["unsafe-output"]. */
  policyWords?: string[];
  /** Words that make an accepted task fail later with the plain failure-rate error_message (a retry may succeed; then refunded). Default ["fail-output"]. */
  failWords?: string[];
  /** Delay of a `slow` fault in milliseconds (not scaled). Default 2000. */
  slowMs?: number;
  /** Retry-After seconds sent with a 429 fault. Default 1. */
  retryAfterS?: number;
  /** Longest edge in pixels of the image files actually served (the nominal size is in metadata). Default 128. */
  imageEdge?: number;
  /**
   * Every video (MP4) result file is served exactly this many bytes: the generated MP4, then a `free` box of
   * padding, generated as it is sent (never held in memory), so a client can be tried on files of any size.
   * A value below the MP4's own size plus the box header serves the MP4 as it is. Default: none (MP4s as generated).
   */
  videoBytes?: number;
  /** Virtual clock start, epoch ms. Default: now. */
  clockStart?: number;
  /**
   * Connection caps against a slowloris (connections.ts): at most `perClient` open connections per client
   * address (default 1024) and `total` in all (default 2048; the oldest idle one makes room), headers within
   * `headersMs` (default 10000), a whole request within `requestMs` (default 600000); a connection past a cap
   * is answered 503 if it sends its request within `overMs` (default 2000), at most `overMax` (default 256)
   * waiting at once.
   */
  connections?: Partial<ConnectionCaps>;
  /** How long a callback receiver may take to answer, in real ms. Default 10000 x timeScale, at least 1000. */
  callbackTimeoutMs?: number;
  /**
   * How host names of callback and upload/url URLs are resolved (every address is checked before
   * connecting). Default: the system resolver. Tests pass a fixed table here.
   */
  resolveHost?: (host: string) => Promise<string[]>;
  /**
   * The token that /__sandbox/* (stats, tasks, clock, faults) requires in the X-Sandbox-Admin-Token
   * header. Default: a random one. Without the token these endpoints answer only when the sandbox
   * listens on a loopback host and the request comes from a loopback address.
   */
  adminToken?: string;
}

/** Options with every default applied. */
export interface ResolvedOptions {
  port: number;
  host: string;
  publicUrl: string | null;
  keys: Record<string, number>;
  timeScale: number;
  seed: number;
  seeded: boolean;
  faults: FaultRule[];
  failureRate: number;
  partialRate: number;
  priceFactor: number;
  allowLoopback: boolean;
  bannedWords: string[];
  policyWords: string[];
  failWords: string[];
  slowMs: number;
  retryAfterS: number;
  imageEdge: number;
  videoBytes: number | null;
  clockStart: number;
  callbackTimeoutMs: number;
  resolveHost: (host: string) => Promise<string[]>;
  adminToken: string;
  connections: ConnectionCaps;
}

export const DEFAULT_CREDITS = 10000;

/*
 * Range checks of the options, one place for both callers: resolveOptions names the option
 * (`partialRate`), `genbatch sandbox` names its flag (`--partial-rate`) and passes the text given.
 * Each returns the value or throws a UsageError naming the expected range and the value given.
 */

/** Longest delay a Node timer keeps (2^31 - 1 ms, about 24.8 days); a longer one fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;
/** Latest clockStart: 100 years of advance (MAX_ADVANCE_S) later the year still has four digits. */
export const MAX_CLOCK_START = Date.UTC(9899, 0, 1);
/** Smallest longest edge of a served image, in pixels. */
export const MIN_IMAGE_EDGE = 8;

/** A number from 0 to 1 (a share of tasks). */
export function checkRate(name: string, v: number, given: string = String(v)): number {
  if (!Number.isFinite(v) || v < 0 || v > 1) throw new UsageError(`${name} expects a number from 0 to 1, got ${given}`);
  return v;
}

/** A finite number >= 0. */
export function checkNonNegative(name: string, v: number, given: string = String(v)): number {
  if (!Number.isFinite(v) || v < 0) throw new UsageError(`${name} expects a non-negative number, got ${given}`);
  return v;
}

/** A delay in ms that a Node timer keeps: 0 to MAX_TIMER_MS. */
export function checkTimerMs(name: string, v: number, given: string = String(v)): number {
  if (!Number.isFinite(v) || v < 0 || v > MAX_TIMER_MS) throw new UsageError(`${name} expects a number from 0 to ${MAX_TIMER_MS} ms, got ${given}`);
  return v;
}

/** The longest edge of served images: an integer >= MIN_IMAGE_EDGE. */
export function checkImageEdge(name: string, v: number, given: string = String(v)): number {
  if (!Number.isInteger(v) || v < MIN_IMAGE_EDGE) throw new UsageError(`${name} expects an integer number of pixels >= ${MIN_IMAGE_EDGE}, got ${given}`);
  return v;
}

/** A byte count for videoBytes: an integer from 1 to 2^53 - 1. */
export function checkVideoBytes(name: string, v: number, given: string = String(v)): number {
  if (!Number.isSafeInteger(v) || v < 1) throw new UsageError(`${name} expects a whole number of bytes from 1 to ${Number.MAX_SAFE_INTEGER}, got ${given}`);
  return v;
}

/** A virtual clock start in epoch ms, from 1970-01-01 to MAX_CLOCK_START (9899-01-01). */
export function checkClockStart(name: string, v: number, given: string = String(v)): number {
  if (!Number.isFinite(v) || v < 0 || v > MAX_CLOCK_START) {
    throw new UsageError(`${name} expects epoch ms from 0 (1970-01-01T00:00:00Z) to ${MAX_CLOCK_START} (9899-01-01T00:00:00Z), got ${given}`);
  }
  return v;
}

const optional = (v: number | undefined, dflt: number, check: (name: string, v: number) => number, name: string): number =>
  v === undefined ? dflt : check(name, v);

/** A public base URL: http(s) origin only; returned without a trailing slash. */
function checkPublicUrl(v: string): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new UsageError(`publicUrl expects an absolute http or https URL, got "${v}"`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError(`publicUrl must be http or https, got "${v}"`);
  if (u.username || u.password || u.search || u.hash || (u.pathname !== '/' && u.pathname !== '')) {
    throw new UsageError(`publicUrl must be an origin such as https://sandbox.example.com:8443 (no path, query or credentials), got "${v}"`);
  }
  return u.origin;
}

export function resolveOptions(o: SandboxOptions = {}): ResolvedOptions {
  let keys = o.keys;
  if (!keys || Object.keys(keys).length === 0) keys = { [`sk-sandbox-${randomBytes(12).toString('hex')}`]: DEFAULT_CREDITS };
  for (const [k, credits] of Object.entries(keys)) {
    if (!/^[\x21-\x7e]+$/.test(k)) throw new UsageError(`key "${k.slice(0, 4)}…" must be printable ASCII without spaces`);
    if (!Number.isFinite(credits) || credits < 0) throw new UsageError(`credits of a key must be a non-negative number, got ${String(credits)}`);
  }
  const seeded = o.seed !== undefined;
  const seed = seeded ? (o.seed as number) >>> 0 : randomBytes(4).readUInt32LE(0);
  const timeScale = optional(o.timeScale, 1, checkNonNegative, 'timeScale');
  const port = o.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`port expects an integer from 0 to 65535, got ${String(port)}`);
  return {
    port,
    host: o.host ?? '127.0.0.1',
    publicUrl: o.publicUrl === undefined ? null : checkPublicUrl(o.publicUrl),
    keys,
    timeScale,
    seed,
    seeded,
    faults: typeof o.faults === 'string' ? parseFaults(o.faults) : (o.faults ?? []),
    failureRate: optional(o.failureRate, 0, checkRate, 'failureRate'),
    partialRate: optional(o.partialRate, 0, checkRate, 'partialRate'),
    priceFactor: optional(o.priceFactor, 1, checkNonNegative, 'priceFactor'),
    allowLoopback: o.allowLoopback ?? false,
    bannedWords: (o.bannedWords ?? ['forbidden']).map((w) => w.toLowerCase()).filter((w) => w.length > 0),
    policyWords: (o.policyWords ?? ['unsafe-output']).map((w) => w.toLowerCase()).filter((w) => w.length > 0),
    failWords: (o.failWords ?? ['fail-output']).map((w) => w.toLowerCase()).filter((w) => w.length > 0),
    slowMs: optional(o.slowMs, 2000, checkTimerMs, 'slowMs'),
    retryAfterS: optional(o.retryAfterS, 1, checkNonNegative, 'retryAfterS'),
    imageEdge: optional(o.imageEdge, 128, checkImageEdge, 'imageEdge'),
    videoBytes: o.videoBytes === undefined ? null : checkVideoBytes('videoBytes', o.videoBytes),
    clockStart: optional(o.clockStart, Date.now(), checkClockStart, 'clockStart'),
    callbackTimeoutMs: optional(o.callbackTimeoutMs, Math.min(MAX_TIMER_MS, Math.max(1000, 10000 * timeScale)), checkTimerMs, 'callbackTimeoutMs'),
    resolveHost: o.resolveHost ?? systemResolver,
    adminToken: o.adminToken === undefined ? randomBytes(18).toString('base64url') : checkAdminToken(o.adminToken),
    connections: checkCaps({ ...DEFAULT_CONNECTION_CAPS, ...o.connections }),
  };
}

/** Connection caps: positive integers, the headers deadline within the request deadline. */
function checkCaps(c: ConnectionCaps): ConnectionCaps {
  for (const [name, v] of Object.entries(c)) {
    if (!Number.isInteger(v) || v < 1) throw new UsageError(`connections.${name} expects an integer >= 1, got ${String(v)}`);
  }
  if (c.headersMs > c.requestMs) throw new UsageError(`connections.headersMs (${c.headersMs}) must be at most connections.requestMs (${c.requestMs})`);
  return c;
}

/** A connection count (`--max-connections`, `--max-connections-per-client`): an integer from 1 to 1,000,000. */
export function checkConnections(name: string, v: number, given: string = String(v)): number {
  if (!Number.isInteger(v) || v < 1 || v > 1_000_000) throw new UsageError(`${name} expects an integer from 1 to 1000000, got ${given}`);
  return v;
}

/** An admin token: 16 to 256 printable ASCII characters without spaces (a short one is guessable). */
export function checkAdminToken(token: string): string {
  if (!/^[\x21-\x7e]{16,256}$/.test(token)) throw new UsageError('--admin-token must be 16 to 256 printable ASCII characters without spaces');
  return token;
}

/** Parse `--keys k1=1000,k2=50` (a key without `=` gets the default 10000 credits). */
export function parseKeys(spec: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const part of spec.split(',').map((s) => s.trim()).filter(Boolean)) {
    const eq = part.lastIndexOf('=');
    const key = eq < 0 ? part : part.slice(0, eq);
    const credits = eq < 0 ? DEFAULT_CREDITS : Number(part.slice(eq + 1));
    if (!key) throw new UsageError(`--keys: empty key in "${part}"`);
    if (!Number.isFinite(credits) || credits < 0) throw new UsageError(`--keys: credits must be a non-negative number in "${key.slice(0, 4)}…=${part.slice(eq + 1)}"`);
    out[key] = credits;
  }
  if (Object.keys(out).length === 0) throw new UsageError('--keys: expected key=credits[,key=credits...]');
  return out;
}

/**
 * Parse a word list such as `--banned-words dragon,castle`: comma-separated, each word trimmed,
 * empty entries dropped; so an empty value (`--banned-words ""`) is an empty list: no word at all.
 */
export function parseWords(spec: string): string[] {
  return spec
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}
