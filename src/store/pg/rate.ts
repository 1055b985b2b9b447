import { sleep, throwIfAborted } from '../../client/retry.js';
import type { Queryable } from './db.js';

/**
 * The cap on status reads per second of one API key, shared by every worker: a token bucket row per key
 * fingerprint (tokens, at), refilled at `ratePerSec` up to `burst` on the database clock. A permit is
 * reserved in one statement under the row's lock: one token is taken even when the bucket holds less,
 * so the count may go below zero, and the caller waits until its token would have come ((0 - tokens) /
 * rate); permits are thus handed out in order, evenly spaced, one round trip each.
 */
export interface RateOptions {
  key: string;
  ratePerSec: number;
  /** Tokens the bucket holds at most (1: evenly spaced, as the client's own bucket). */
  burst: number;
}

/** Reserve a permit: how long (ms) to wait before using it (0: now). */
export async function reservePermit(q: Queryable, o: RateOptions): Promise<number> {
  const r = await q.query<{ tokens: number }>(
    `INSERT INTO rate (key, tokens, at) VALUES ($1, $3::float8 - 1, now())
     ON CONFLICT (key) DO UPDATE SET tokens = LEAST($3::float8, rate.tokens + extract(epoch FROM now() - rate.at)::float8 * $2) - 1, at = now()
     RETURNING tokens`,
    [o.key, o.ratePerSec, o.burst],
  );
  const tokens = r.rows[0]?.tokens ?? 0;
  return tokens >= 0 ? 0 : Math.ceil((-tokens * 1000) / o.ratePerSec);
}

/** Wait for a permit (rejects with the signal's reason on abort). */
export async function takePermit(q: Queryable, o: RateOptions, signal?: AbortSignal): Promise<void> {
  throwIfAborted(signal);
  const wait = await reservePermit(q, o);
  if (wait > 0) await sleep(wait, signal);
}
