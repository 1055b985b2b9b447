import { UsageError } from '../../errors.js';
import type { Store } from '../../store/index.js';
import type { EngineEvent } from '../events.js';

/** How many job ids a warning names. */
const NAMED = 20;

/**
 * `--uncertain POLICY` (issue #26 item 4): what a run does with jobs whose submit had an unknown outcome.
 *
 *   skip                    (default) they stay uncertain: a person decides (the summary prints the command)
 *   resubmit                every uncertain job is sent again now (its first task may exist: a charge may double)
 *   resubmit-after=DURATION an uncertain job is sent again once it has been uncertain for DURATION (jobs.uncertain_at;
 *                           `24h`, `90m`, `1h30m`, `2d`, `45s`) with no sign of its task: no callback adopted one
 *                           (that would have made it submitted). A warning says a charge may be doubled.
 *
 * The service gives no way to find a task whose submit answer was lost (no client-chosen id, no idempotency key,
 * no task listing: service-interface.md), so a resubmit can only be a new task.
 */
export interface UncertainPolicy {
  policy: 'skip' | 'resubmit';
  /** resubmit-after: the age (ms, real time) after which an uncertain job is sent again; null: not this policy. */
  afterMs: number | null;
}

const UNIT_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration such as `24h`, `90m`, `1h30m`, `2d`, `45s` in ms; a usage error for anything else (or 0). */
export function parseDuration(text: string, flag: string): number {
  const parts = /^(\d+(?:\.\d+)?[smhd])+$/.test(text) ? [...text.matchAll(/(\d+(?:\.\d+)?)([smhd])/g)] : [];
  const ms = parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_MS[p[2]!]!, 0);
  if (parts.length === 0 || !(ms > 0) || !Number.isFinite(ms)) throw new UsageError(`${flag} expects a duration such as 24h, 90m, 1h30m, 2d or 45s, got "${text}"`);
  return ms;
}

/** `--uncertain` as typed: skip, resubmit or resubmit-after=DURATION; a usage error otherwise. */
export function parseUncertain(value: string | undefined): UncertainPolicy {
  if (value === undefined || value === 'skip') return { policy: 'skip', afterMs: null };
  if (value === 'resubmit') return { policy: 'resubmit', afterMs: null };
  const m = /^resubmit-after=(.*)$/.exec(value);
  if (m) return { policy: 'skip', afterMs: parseDuration(m[1]!, '--uncertain resubmit-after') };
  throw new UsageError(`--uncertain expects skip, resubmit or resubmit-after=DURATION (e.g. resubmit-after=24h), got "${value}"`);
}

/** True when a job uncertain since `since` (ISO-8601; null: unknown) has been so for at least `afterMs` at `now`. */
export function uncertainLongEnough(since: string | null, afterMs: number, now: number): boolean {
  if (since === null) return false;
  const t = Date.parse(since);
  return Number.isFinite(t) && now - t >= afterMs;
}

/**
 * --uncertain resubmit-after: the uncertain jobs uncertain for at least `afterMs` (jobs.uncertain_at; no callback
 * adopted a task for them meanwhile, or they would be submitted) go back to pending, with a warning that a charge
 * may be doubled. Jobs no longer in the manifest stay uncertain.
 */
export function resubmitAged(store: Store, afterMs: number, emit: (e: EngineEvent) => void): void {
  const removed = store.removedInFlight();
  const now = Date.now();
  const aged = [...store.jobsIn('uncertain')].filter((r) => !removed?.has(r.id) && uncertainLongEnough(r.uncertain_at, afterMs, now));
  for (const row of aged) {
    store.transition(row.id, 'uncertain', 'pending', { last_error: `resubmitted (--uncertain resubmit-after): no sign of its task since ${row.uncertain_at}; after: ${row.last_error ?? 'unknown outcome'}`.slice(0, 2000) });
    emit({ type: 'job', id: row.id, from: 'uncertain', to: 'pending' });
    for (const id of store.graph.drainRevived()) emit({ type: 'job', id, from: 'skipped', to: 'pending' });
  }
  if (aged.length > 0) {
    emit({ type: 'warning', message: `${aged.length} uncertain job(s) showed no sign of their task within ${formatAge(afterMs)} and are sent again (--uncertain resubmit-after): if their first task was created after all, it is charged too (a charge may be doubled): ${aged.slice(0, NAMED).map((r) => r.id).join(', ')}` });
  }
}

function formatAge(ms: number): string {
  return ms % 3_600_000 === 0 ? `${ms / 3_600_000}h` : ms % 60_000 === 0 ? `${ms / 60_000}m` : `${ms / 1000}s`;
}
