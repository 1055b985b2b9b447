import { sleep, throwIfAborted } from '../../client/retry.js';
import type { Queryable } from './db.js';

/**
 * A worker's share of the key's status-read rate, spent locally: no database statement per status read
 * (issue #24: the one shared permit row was the hottest row of a run, 1.07 statements and 2-3 ms of server
 * time per job). Each live worker reads at rate / N, where N is the number of live workers in the database
 * (their heartbeat seen within a lease), counted when the worker opens and again at every heartbeat; reads are
 * evenly spaced, the first one a spacing after the start, so the N shares together never pass the rate while
 * N holds. When a worker joins, the others take the smaller share at their next heartbeat (leaseMs / 3): for
 * that long the reads may pass the rate by the new worker's share, which the service answers with a 429 that
 * the retry layer waits out. A dead worker's share goes back to the others a lease after its last heartbeat.
 * Workers of other runs and other keys in the same database are counted too: their shares are only smaller.
 */
export class ReadShare {
  private workers = 1;
  private nextAt: number;

  constructor(
    private readonly ratePerSec: number,
    private readonly now: () => number = Date.now,
  ) {
    if (!(ratePerSec > 0) || !Number.isFinite(ratePerSec)) throw new RangeError(`Expected ratePerSec to be a finite number > 0, got ${ratePerSec}`);
    this.nextAt = now() + this.spacingMs();
  }

  /** Reads per second this worker may make now. */
  get perSec(): number {
    return this.ratePerSec / this.workers;
  }

  /** The live workers the rate is shared by now. */
  get workersNow(): number {
    return this.workers;
  }

  /** The live workers that share the rate (at least this one). */
  setWorkers(n: number): void {
    this.workers = Math.max(1, Math.floor(n));
  }

  /** Wait for this worker's next read (rejects with the signal's reason on abort). */
  async take(signal?: AbortSignal): Promise<void> {
    throwIfAborted(signal);
    const now = this.now();
    const at = Math.max(now, this.nextAt);
    this.nextAt = at + this.spacingMs();
    if (at > now) await sleep(at - now, signal);
  }

  private spacingMs(): number {
    return 1000 / this.perSec;
  }
}

/** Live workers in the database: those whose heartbeat was seen within `leaseMs`. */
export async function liveWorkers(q: Queryable, leaseMs: number): Promise<number> {
  const r = await q.query<{ n: number }>(`SELECT count(*)::int AS n FROM workers WHERE last_seen > now() - $1::float8 * interval '1 millisecond'`, [leaseMs]);
  return r.rows[0]?.n ?? 1;
}
