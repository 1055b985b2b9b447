import { UsageError } from '../../errors.js';

/** The environment variable that sets how long a worker's lease on a job lasts, in seconds (default 30). */
export const LEASE_ENV = 'GENBATCH_LEASE_SECONDS';

/**
 * The lease in ms from GENBATCH_LEASE_SECONDS, undefined when it is not set (the default then applies).
 * A short lease lets the others take a dead or paused worker's jobs sooner (tests use 1-2 s); it must
 * outlast the longest pause of a live worker between heartbeats (a third of the lease).
 */
export function leaseMsFromEnv(env: NodeJS.ProcessEnv = process.env): number | undefined {
  const text = env[LEASE_ENV];
  if (text === undefined || text.trim() === '') return undefined;
  const s = Number(text);
  if (!Number.isFinite(s) || s < 0.3 || s > 86_400) throw new UsageError(`${LEASE_ENV} expects a number of seconds from 0.3 to 86400, got ${text}`);
  return Math.round(s * 1000);
}
