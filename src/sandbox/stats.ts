/** One request as it arrived: `at` in epoch ms with sub-ms precision (performance.timeOrigin + performance.now()). */
export interface RequestLogEntry {
  at: number;
  endpoint: string;
  /** The request target (path and query), e.g. /api/generate/status/<task id>; a `key=` query value as `***`; at most 1,024 characters, then `…`. */
  path: string;
}

/** Requests kept in the log (the latest; older ones are dropped). */
export const REQUEST_LOG_SIZE = 10_000;

/**
 * Characters of a path kept in the log (twice the longest routed path parameter). The log holds up to
 * 20,000 entries: whole paths of up to 16 KiB (the headers' limit), sent by anyone without a key, held 310 MB.
 */
export const LOGGED_PATH_CHARS = 1024;

/** A path for the log: a key in its query (`?key=`, how Gemini clients may send it) as `***`; at most LOGGED_PATH_CHARS characters, then `…`. */
function loggedPath(target: string): string {
  const path = target.replace(/([?&]key=)[^&#]*/gi, '$1***');
  if (path.length <= LOGGED_PATH_CHARS) return path;
  // A copy: V8 keeps the whole string alive behind a slice of it.
  return `${Buffer.from(path.slice(0, LOGGED_PATH_CHARS)).toString()}…`;
}

/** Counters behind GET /__sandbox/stats. Keys are named by keyHash(), never by the key. */
export class Stats {
  readonly requests: Record<string, number> = {};
  readonly requestsByKey: Record<string, number> = {};
  readonly tasksByKey: Record<string, number> = {};
  /** refused: every upload answered with an error; rate_limited: those of them refused by the upload rate limit (429, not an injected fault). */
  readonly uploads = { accepted: 0, refused: 0, rate_limited: 0 };
  readonly callbacks = { attempted: 0, delivered: 0, failed: 0, abandoned: 0 };
  /** Connection caps (connections.ts): open now, refused past a cap (of which answered 503), idle ones closed to make room. */
  readonly connections = { open: 0, refused: 0, answered_503: 0, evicted: 0 };

  /** The latest requests in order of arrival (in-process: `Sandbox.requestLog()`). */
  private log: RequestLogEntry[] = [];

  request(endpoint: string, path: string): void {
    this.requests[endpoint] = (this.requests[endpoint] ?? 0) + 1;
    this.log.push({ at: performance.timeOrigin + performance.now(), endpoint, path: loggedPath(path) });
    if (this.log.length >= 2 * REQUEST_LOG_SIZE) this.log = this.log.slice(-REQUEST_LOG_SIZE);
  }

  requestLog(): RequestLogEntry[] {
    return this.log.slice(-REQUEST_LOG_SIZE);
  }

  keyRequest(hash: string): void {
    this.requestsByKey[hash] = (this.requestsByKey[hash] ?? 0) + 1;
  }

  taskCreated(hash: string): void {
    this.tasksByKey[hash] = (this.tasksByKey[hash] ?? 0) + 1;
  }
}
