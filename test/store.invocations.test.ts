import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { buildReportData } from '../src/engine/finish/report-data.js';
import { Store } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The balance readings of each invocation of a run (table `invocations`) and the run's charge made of
 * them (report-data.ts): a sum over the invocations, an invocation without a closing reading measured to
 * the next opening reading, and the readings an older state file kept on its `runs` row taken as invocation 1.
 */

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function paths(): { state: string; manifest: string; dir: string } {
  const t = tempDir('genbatch-invocations-');
  cleanups.push(t.cleanup);
  return { state: join(t.dir, 'state.db'), manifest: join(t.dir, 'm.yaml'), dir: t.dir };
}

/** One `genbatch run` as runEngine records it: open the run, an opening reading, a closing one (null: killed before it). */
function invocation(state: string, manifest: string, dir: string, before: number | null, after: number | null | 'killed', submits = 1): void {
  const store = Store.openForWrite(state);
  try {
    store.openRun(manifest, dir, 'http://x', false, false);
    const n = store.startInvocation(before, before === null ? null : new Date().toISOString());
    if (after !== 'killed') store.finishInvocation(n, after, after === null ? null : new Date().toISOString(), submits);
  } finally {
    store.close();
  }
}

function credits(state: string, manifest: string) {
  const store = Store.openForRead(state);
  try {
    store.useRun(store.findRun(manifest)!);
    return buildReportData(store).summary.credits;
  } finally {
    store.close();
  }
}

describe('invocations and the run charge', () => {
  it('sums the invocations, measures one killed before its closing reading to the next opening reading, and leaves the total unknown while the last has none', () => {
    const p = paths();
    invocation(p.state, p.manifest, p.dir, 1000, 'killed');
    // Killed, nothing after it yet: the run's charge is not known.
    expect(credits(p.state, p.manifest)).toMatchObject({ charged: null, balance_before: 1000, balance_after: null });
    // Other use of the key between the invocations (1000 -> 900 while nothing ran, after the kill) is in the
    // killed invocation's measure: a difference of readings.
    invocation(p.state, p.manifest, p.dir, 900, 880);
    invocation(p.state, p.manifest, p.dir, 870.2, 870.1);
    const c = credits(p.state, p.manifest);
    expect(c.invocations.map((i) => [i.n, i.charged, i.charged_to])).toEqual([
      [1, 100, 'next-start'],
      [2, 20, 'end'],
      [3, 0.1, 'end'],
    ]);
    expect(c.charged).toBe(120.1);
    expect(c.balance_before).toBe(1000);
    expect(c.balance_after).toBe(870.1);
  });

  it('an invocation that could not read the balance before its work leaves the run charge unknown; a run with no invocation charged 0', () => {
    const p = paths();
    const store = Store.openForWrite(p.state);
    store.openRun(p.manifest, p.dir, 'http://x', false, false);
    store.close();
    expect(credits(p.state, p.manifest)).toMatchObject({ charged: 0, invocations: [] });
    invocation(p.state, p.manifest, p.dir, 500, 490);
    invocation(p.state, p.manifest, p.dir, null, 480);
    const c = credits(p.state, p.manifest);
    expect(c.invocations.map((i) => i.charged)).toEqual([10, null]);
    expect(c.charged).toBeNull();
  });

  it('a state file written before the invocations table: its run row readings are invocation 1, read by `report` and kept when the run is resumed', () => {
    const p = paths();
    invocation(p.state, p.manifest, p.dir, 1000, 'killed');
    // As an older genbatch left it: no invocations table; the last invocation's readings on the runs row.
    const db = new Database(p.state);
    db.exec('DROP TABLE invocations');
    db.prepare('UPDATE runs SET balance_before = 1000, balance_after = 990').run();
    db.close();
    const old = credits(p.state, p.manifest);
    expect(old.invocations).toMatchObject([{ n: 1, balance_before: 1000, balance_after: 990, submits: null, charged: 10, charged_to: 'end' }]);
    expect(old.charged).toBe(10);
    invocation(p.state, p.manifest, p.dir, 990, 950);
    const c = credits(p.state, p.manifest);
    expect(c.invocations.map((i) => [i.n, i.balance_before, i.balance_after, i.charged])).toEqual([
      [1, 1000, 990, 10],
      [2, 990, 950, 40],
    ]);
    expect(c.charged).toBe(50);
  });
});
