import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ChangedGuardError, type ChangedFacts } from '../errors.js';
import type { Manifest } from '../manifest/index.js';
import type { ObservedPrices } from '../pricing/index.js';
import { Store } from '../store/index.js';
import { invocationRooms, prepare, type InvocationCaps } from './prepare.js';
import { selectPending } from './select.js';

/**
 * What the next `genbatch run` of a manifest would do with the state it already has (`estimate` with a state,
 * issue #26): which done jobs it keeps, how many done jobs a manifest edit would send again (and whether the
 * guard on mass re-sends stops it), and what this invocation sends under the caps and the balance.
 *
 * Worked out on a copy of the state file (SQLite's VACUUM INTO, which reads the file and leaves it as it is)
 * by the run's own sync (prepare) and choice of jobs (selectPending): the same code, so the same numbers.
 */
export interface StatePlan {
  state: string;
  /** Done jobs kept, not sent: those whose spec the manifest still gives (and, when the guard stops the run, the changed ones). */
  done: number;
  /** Done jobs whose spec changed, and the guard's verdict on them; null when none changed. */
  changed: (ChangedFacts & { stops: boolean }) | null;
  /** Jobs pending after the sync (what a run without caps sends): count, known credits, how many of unknown price. */
  pending: { jobs: number; credits: number; unknown: number };
  /** What this invocation sends under the caps and the balance (when the guard stops the run: what it sends with --keep-changed); `held`: reason -> count. */
  sends: { jobs: number; credits: number; held: Record<string, number>; held_by: { balance: number; cap: number } };
  /** Jobs in flight, uncertain or failed: not sent by a plain run (failed: --redo failed). */
  other: Record<string, number>;
}

export interface PlanOptions {
  userPrices: Record<string, number> | null;
  observed: ObservedPrices | null;
  maxChanged: number;
  caps: InvocationCaps;
  balance: number | null;
}

/** The plan, or null when the state holds no run of this manifest. */
export async function planAgainstState(statePath: string, manifest: Manifest, o: PlanOptions): Promise<StatePlan | null> {
  const dir = mkdtempSync(join(tmpdir(), 'genbatch-plan-'));
  const copy = join(dir, 'state.db');
  try {
    const src = new Database(statePath, { readonly: true, fileMustExist: true });
    try {
      src.prepare('VACUUM INTO ?').run(copy);
    } finally {
      src.close();
    }
    // The copy's lease row is the original's (a live run's, maybe): the copy is this process's alone.
    const raw = new Database(copy);
    raw.exec('DELETE FROM lease');
    raw.close();
    const store = Store.openForWrite(copy);
    try {
      return await plan(store, statePath, manifest, o);
    } finally {
      store.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function plan(store: Store, statePath: string, manifest: Manifest, o: PlanOptions): Promise<StatePlan | null> {
  const run = store.findRun(manifest.path);
  if (!run) return null;
  store.openRun(manifest.path, run.out_dir, run.base_url ?? '', run.sandbox === 1, o.userPrices !== null);
  const quiet = () => undefined;
  // Every changed done job, counted: a guard that stops at the first one (it throws with the facts, rolled back).
  let changed: StatePlan['changed'] = null;
  try {
    await prepare(store, manifest, o.userPrices, quiet, true, false, o.observed, { mode: 'ask', max: -1, yes: false });
  } catch (err) {
    if (!(err instanceof ChangedGuardError)) throw err;
    changed = { ...err.facts, max: o.maxChanged, stops: err.facts.count > o.maxChanged };
  }
  // The run's own sync: it sends the changed jobs again when the guard lets it. When the guard stops the run
  // (nothing is sent), the rest is worked out as --keep-changed would leave it: the changed jobs kept.
  await prepare(store, manifest, o.userPrices, quiet, true, false, o.observed, { mode: changed?.stops ? 'keep' : 'ask', max: o.maxChanged, yes: false });
  const counts = store.counts();
  const all = store.pendingEstimate();
  const sel = selectPending(store, null, null, invocationRooms(store, o.caps, o.balance, null));
  const other = Object.fromEntries(Object.entries(counts).filter(([s, n]) => n > 0 && s !== 'done' && s !== 'pending' && s !== 'skipped'));
  return {
    state: statePath,
    done: counts.done,
    changed,
    pending: { jobs: counts.pending, credits: round6(all.known), unknown: all.unknown },
    sends: { jobs: sel.ids.size, credits: round6(sel.estimate.known), held: Object.fromEntries([...sel.held].map(([r, ids]) => [r, ids.length])), held_by: { ...sel.heldBy } },
    other,
  };
}

function round6(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
