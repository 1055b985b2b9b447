import { randomInt } from 'node:crypto';
import { UsageError } from '../../errors.js';
import { findModel, inputFields } from '../../models/index.js';
import type { JobRow, Store } from '../../store/index.js';
import type { EngineEvent } from '../events.js';
import type { StoredSpec } from '../spec.js';

/**
 * Which jobs a run sends: `--redo` (finished jobs sent again) and `--only` / `--limit` (a subset of the
 * pending jobs; the rest stay pending for a later run).
 *
 *   --redo failed,expired,rejected
 *                          the jobs that ended in these states (rejected: done, marked rejected) go back
 *                          to pending (Store.redo), with the jobs a job graph skipped because of them (or,
 *                          for a rejected one, made from its result); with --only, only those it names
 *   --only <id|glob>       pending jobs whose id matches (`*` any run of characters, `?` one character;
 *                          repeatable and comma separated); a pattern that matches no job is a usage error
 *   --limit N              at most N of them, in manifest order
 *
 * Job graphs: a chosen job whose parents are pending takes those parents (and theirs) along, since it
 * cannot run without them; they count towards --limit (a job whose needs do not fit is left for a later
 * run). The children a chosen for_each job makes run with it (they are not counted).
 */

/**
 * The states `--redo` takes: jobs that ended failed or expired, and done jobs whose current review mark is
 * rejected (`genbatch mark --reject`). `failed` passes over the jobs that failed permanently (the service
 * refused their input, src/engine/submit/permanent.ts) unless `--only` names their id exactly (not by a glob);
 * `failed-permanent` takes those. `changed`: the done jobs whose spec changed are sent again whatever their number
 * (the guard on mass re-sends, src/engine/prepare/changed.ts), also those kept by an earlier `--keep-changed`.
 */
export const REDO_VALUES = ['failed', 'failed-permanent', 'expired', 'rejected', 'changed'] as const;
export type RedoState = (typeof REDO_VALUES)[number];

/** `--redo failed,expired`: the states named (each once, in the order of REDO_VALUES); a usage error for an unknown one. */
export function parseRedo(value: string): RedoState[] {
  const names = value.split(',').map((s) => s.trim());
  const unknown = names.filter((n) => !(REDO_VALUES as readonly string[]).includes(n));
  if (unknown.length > 0 || names.length === 0) {
    throw new UsageError(`--redo expects a comma list of ${REDO_VALUES.join(', ')}, got "${value}" (${unknown.map((u) => (u === '' ? 'an empty value' : `"${u}"`)).join(', ')} is not one of them)`);
  }
  return REDO_VALUES.filter((v) => names.includes(v));
}

/** The patterns of every `--only` (each may be a comma list), trimmed; a usage error for an empty one. */
export function parseOnly(values: readonly string[], flag = '--only'): string[] {
  const out: string[] = [];
  for (const v of values) {
    for (const p of v.split(',').map((s) => s.trim())) {
      if (p === '') throw new UsageError(`${flag} expects job ids or globs (comma separated), got "${v}" (an empty pattern)`);
      if (!out.includes(p)) out.push(p);
    }
  }
  return out;
}

/** A test for one `--only` pattern: the whole id, `*` any run of characters (also none), `?` one character. */
export function globTest(pattern: string): (id: string) => boolean {
  if (!/[*?]/.test(pattern)) return (id) => id === pattern;
  const source = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '[\\s\\S]*').replace(/\?/g, '[\\s\\S]');
  const re = new RegExp(`^${source}$`, 'u');
  return (id) => re.test(id);
}

/**
 * A test for the ids the `--only` patterns name. Every pattern must match a job of the run (any state):
 * otherwise a usage error naming each pattern that matches none.
 */
export function onlyMatcher(store: Store, patterns: readonly string[]): (id: string) => boolean {
  const tests = patterns.map(globTest);
  const used = new Array<boolean>(patterns.length).fill(false);
  let left = patterns.length;
  for (const row of store.summaryRows()) {
    for (let i = 0; i < tests.length && left > 0; i++) {
      if (!used[i] && tests[i]!(row.id)) {
        used[i] = true;
        left--;
      }
    }
    if (left === 0) break;
  }
  const none = patterns.filter((_, i) => !used[i]);
  if (none.length > 0) throw new UsageError(`--only ${none.map((p) => `"${p}"`).join(', ')} ${none.length === 1 ? 'matches' : 'match'} no job of the manifest`);
  return (id) => tests.some((t) => t(id));
}

/**
 * `--redo`: every job in one of `states` (and named by `match`, when given) goes back to pending, as its own
 * transaction. Emits the job events (the job, then the jobs of a graph brought back or skipped again).
 * Returns the ids sent again.
 */
export function redoJobs(store: Store, states: readonly RedoState[], match: ((id: string) => boolean) | null, emit: (e: EngineEvent) => void, named: readonly string[] = []): string[] {
  const out: string[] = [];
  for (const redo of states) {
    if (redo === 'changed') continue; // done jobs whose spec changed: the sync sends them (prepare.ts, changed.ts)
    if (redo === 'rejected') {
      out.push(...redoRejected(store, match, emit));
      continue;
    }
    const state = redo === 'expired' ? 'expired' : 'failed';
    // Which failed jobs: --redo failed those a retry may fix (and permanent ones named by id), failed-permanent the others.
    const takes = (r: JobRow) => state !== 'failed' || (redo === 'failed-permanent') === (r.permanent === 1) || (redo === 'failed' && named.includes(r.id));
    // Read first: the store is not read and written at once.
    const rows = [...store.jobsIn(state)].filter((r) => (match === null || match(r.id)) && takes(r));
    for (const row of rows) {
      store.redo(row.id, state, `sent again (--redo ${redo}); it had ${state}${row.last_error ? `: ${row.last_error}` : ''}`.slice(0, 2000));
      out.push(row.id);
      emit({ type: 'job', id: row.id, from: state, to: 'pending', error: null });
      for (const id of store.graph.drainRevived()) emit({ type: 'job', id, from: 'skipped', to: 'pending', error: null });
      for (const s of store.graph.drainSkipped()) emit({ type: 'job', id: s.id, from: 'pending', to: 'skipped', error: s.reason });
    }
  }
  return out;
}

/**
 * `--redo rejected`: every done job whose current mark is rejected goes back to pending. For a model with a
 * `seed` input field whose manifest input gives none, a new seed goes into the input it is sent with (the
 * same input would often make the same result again); a seed in the manifest is kept. The mark stays
 * until the new result arrives (Store.transition clears it then, kept in the job's history).
 */
function redoRejected(store: Store, match: ((id: string) => boolean) | null, emit: (e: EngineEvent) => void): string[] {
  const out: string[] = [];
  const rejected = [...store.marks()].filter(([id, m]) => m.state === 'rejected' && (match === null || match(id)));
  for (const [id, mark] of rejected) {
    const row = store.getJob(id);
    if (row?.state !== 'done') continue;
    const spec = JSON.parse(row.spec) as StoredSpec;
    const reseed = hasSeedField(spec.model) && !('seed' in spec.input);
    if (reseed) spec.seed = newSeed(spec.seed);
    store.redo(id, 'done', `sent again (--redo rejected)${mark.note ? `: ${mark.note}` : ''}`.slice(0, 2000), reseed ? JSON.stringify(spec) : undefined);
    out.push(id);
    emit({ type: 'job', id, from: 'done', to: 'pending', error: null });
    for (const m of store.drainSyncMoves()) emit({ type: 'job', id: m.id, from: m.from, to: m.to, error: m.error });
  }
  return out;
}

/** True when the model's input has a `seed` field (src/models/fields.ts). */
export function hasSeedField(modelId: string): boolean {
  const model = findModel(modelId);
  return model !== undefined && inputFields(model).fields.some((f) => f.name === 'seed' && f.accepted);
}

/** A random seed in 0..2^31-1 (every seed field takes it), other than `previous`. */
function newSeed(previous: number | undefined): number {
  for (;;) {
    const seed = randomInt(0, 2 ** 31);
    if (seed !== previous) return seed;
  }
}

/** The pending jobs this run sends (--only, --limit), and what it leaves pending. */
export interface Selection {
  /** Ids of the pending jobs chosen, with the pending jobs they need (job graphs). */
  ids: Set<string>;
  /** How many of `ids` were taken only because a chosen job needs them. */
  needed: number;
  /** Pending jobs left for a later run: how many, and their known credits and count of unknown price. */
  leftOut: { jobs: number; known: number; unknown: number };
  /** Known credits and count of unknown price of the jobs chosen. */
  estimate: { known: number; unknown: number };
  /** Pending jobs that match but were left pending because their estimate did not fit a room (fitPending): reason -> ids, in manifest order. */
  held: Map<string, string[]>;
  /** How many jobs were held for the balance, and for a credit cap. */
  heldBy: { balance: number; cap: number };
}

/**
 * Credits this invocation may still spend, by the known estimate: what the balance buys, what a credit cap leaves
 * (`--max-credits` less the estimate of the jobs not pending, `--max-credits-per-invocation`). `reason`: why a job
 * that does not fit stays pending, as the summary shows it.
 */
export interface Room {
  credits: number;
  kind: 'balance' | 'cap';
  reason: string;
}

/**
 * Choose the pending jobs to send: those `match` names (all when null), in manifest order, each with the
 * pending jobs it needs (its pending parents, theirs, ...), at most `limit` in all (a job whose needs do
 * not fit is passed over). With `rooms` (fitPending), a job is taken only when its known estimate, with its
 * needs', fits in every room beside the jobs taken before it; one that does not stays pending, held with the
 * reason of the smallest room it breaks (the balance before a cap of the same size), and later, cheaper jobs
 * may still be taken. A job of unknown price costs 0 here (--yes sent it; the credit cap measures it).
 * Call after the sync, --redo and the graph's settle.
 */
export function selectPending(store: Store, match: ((id: string) => boolean) | null, limit: number | null, rooms: readonly Room[] = []): Selection {
  const ids = new Set<string>();
  const estimate = { known: 0, unknown: 0 };
  const held = new Map<string, string[]>();
  const heldBy = { balance: 0, cap: 0 };
  const take = (id: string, credits: number | null) => {
    ids.add(id);
    if (credits === null) estimate.unknown++;
    else estimate.known += credits;
  };
  /** Whether `cost` more fits every room; else the job is held for the room it breaks. */
  const fits = (id: string, cost: number): boolean => {
    const broken = rooms.filter((r) => estimate.known + cost > r.credits + 1e-9);
    if (broken.length === 0) return true;
    const room = broken.reduce((a, b) => (b.credits < a.credits || (b.credits === a.credits && b.kind === 'balance') ? b : a));
    const list = held.get(room.reason);
    if (list) list.push(id);
    else held.set(room.reason, [id]);
    heldBy[room.kind]++;
    return false;
  };
  let needed = 0;
  if (!store.graph.any()) {
    // No job graph: one pass in manifest order, ended as soon as the limit is reached.
    for (const [id, credits] of store.pendingCredits()) {
      if (limit !== null && ids.size >= limit) break;
      if ((match === null || match(id)) && fits(id, credits ?? 0)) take(id, credits);
    }
  } else {
    // Read first: the parents are read from the store while choosing.
    const pending = new Map(store.pendingCredits());
    for (const [id, credits] of pending) {
      if (limit !== null && ids.size >= limit) break;
      if (ids.has(id) || (match !== null && !match(id))) continue;
      const need = pendingAncestors(store, id, pending, ids);
      if (limit !== null && ids.size + need.length + 1 > limit) continue;
      if (!fits(id, need.reduce((a, n) => a + (pending.get(n) ?? 0), credits ?? 0))) continue;
      for (const a of need) take(a, pending.get(a) ?? null);
      needed += need.filter((a) => match === null || !match(a)).length;
      take(id, credits);
    }
  }
  // A held job taken later as the need of a job that fits (job graphs) is not held.
  for (const [reason, list] of held) {
    const still = list.filter((id) => !ids.has(id));
    const kind = rooms.find((r) => r.reason === reason)!.kind;
    heldBy[kind] -= list.length - still.length;
    if (still.length > 0) held.set(reason, still);
    else held.delete(reason);
  }
  const all = store.pendingEstimate();
  const leftOut = { jobs: store.counts().pending - ids.size, known: all.known - estimate.known, unknown: all.unknown - estimate.unknown };
  return { ids, needed, leftOut, estimate, held, heldBy };
}

/** The pending ancestors of `id` not chosen yet (a job runs only once its parents are done). */
function pendingAncestors(store: Store, id: string, pending: ReadonlyMap<string, unknown>, chosen: ReadonlySet<string>): string[] {
  const out: string[] = [];
  const seen = new Set([id]);
  const queue = [id];
  while (queue.length > 0) {
    for (const parent of store.graph.parentsOf(queue.shift()!)) {
      if (seen.has(parent)) continue;
      seen.add(parent);
      // Done or in flight: it needs nothing more from this run's choice (an in-flight job finishes in any run).
      if (!pending.has(parent)) continue;
      queue.push(parent);
      if (!chosen.has(parent)) out.push(parent);
    }
  }
  return out;
}
