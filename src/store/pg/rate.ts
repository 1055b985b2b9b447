import { sleep } from '../../client/retry.js';
import type { Queryable } from './db.js';

/**
 * The cap on status reads per second of one API key, shared by every worker: a token bucket row per key
 * fingerprint (tokens, at), refilled at `ratePerSec` up to `burst` on the database clock. A permit takes
 * one token under the row's lock.
 */
export interface RateOptions {
  key: string;
  ratePerSec: number;
  burst: number;
}

/** Take a permit now (0), or learn how long until one is due (ms). */
export async function tryPermit(q: Queryable, o: RateOptions): Promise<number> {
  await q.query('INSERT INTO rate (key, tokens, at) VALUES ($1, $2, now()) ON CONFLICT (key) DO NOTHING', [o.key, o.burst]);
  const r = await q.query<{ r: number }>(
    `WITH cur AS (SELECT LEAST($3::float8, tokens + extract(epoch FROM now() - at)::float8 * $2) AS r FROM rate WHERE key = $1 FOR UPDATE)
     UPDATE rate SET tokens = cur.r - CASE WHEN cur.r >= 1 THEN 1 ELSE 0 END, at = now() FROM cur WHERE rate.key = $1
     RETURNING cur.r`,
    [o.key, o.ratePerSec, o.burst],
  );
  const tokens = r.rows[0]?.r ?? 0;
  return tokens >= 1 ? 0 : Math.max(1, Math.ceil(((1 - tokens) * 1000) / o.ratePerSec));
}

/** Wait for a permit. */
export async function takePermit(q: Queryable, o: RateOptions, signal?: AbortSignal): Promise<void> {
  for (;;) {
    const wait = await tryPermit(q, o);
    if (wait === 0) return;
    await sleep(wait, signal);
  }
}
