import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ChangedGuardError } from '../../errors.js';
import type { Manifest } from '../../manifest/index.js';
import type { ObservedPrices } from '../../pricing/index.js';
import { Store } from '../../store/index.js';
import { invocationRooms, prepare, type InvocationCaps } from './prepare.js';
import { selectPending } from './select.js';
import type { StatePlan } from './plan-types.js';

export type { StatePlan } from './plan-types.js';

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
