import { leaseMsFromEnv } from '../store/pg/lease-env.js';

/** The timing of a worker on a PostgreSQL run, shared by `run` (which works as a worker after the sync) and
 * `work`; apart from both so that neither imports the other. */

/**
 * The lease of a claimed job: GENBATCH_LEASE_SECONDS when set, else 30 s, shorter with a time scale below 1
 * (at least 5 s: a loaded machine may miss a heartbeat or two).
 */
export function workLeaseMs(timeScale: number, env: NodeJS.ProcessEnv = process.env): number {
  return leaseMsFromEnv(env) ?? Math.min(30_000, Math.max(5_000, Math.round(30_000 * timeScale)));
}

/** The pause of an idle worker between two looks for work: 2 s, x the time scale (at least 200 ms). */
export function workIdleMs(timeScale: number): number {
  return Math.max(200, Math.round(2_000 * timeScale));
}
