import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Store, type JobInput } from '../src/store/index.js';
import { GRAPH_SQL } from '../src/store/graph.js';
import { FINAL_STATES } from '../src/store/states.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The job graph's reads by parent go through job_links_by_parent: one call
 * reads that parent's links, not every link (or every pending job) of the run.
 */

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

const job = (id: string): JobInput => ({ id, model: 'm', kind: 'submit', where: 'm.yaml:1', specHash: 'h', spec: '{}', estimatedCredits: 1 });

function chain(n: number): Store {
  const t = tempDir();
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  cleanups.push(t.cleanup);
  cleanups.push(() => store.close());
  store.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', true, false);
  store.beginSync();
  for (let i = 0; i < n; i++) store.syncJob(job(`j${i}`));
  // j0 <- j1 <- ... and a fan: every job also waits for j0.
  const links = new Map<string, { parents: string[] }>();
  for (let i = 1; i < n; i++) links.set(`j${i}`, { parents: i === 1 ? ['j0'] : [`j${i - 1}`, 'j0'] });
  store.graph.setManifestLinks(links);
  store.commitSync();
  return store;
}

describe('job graph reads by parent', () => {
  it('use job_links_by_parent with the links as the outer loop', () => {
    const store = chain(50);
    const plan = (sql: string, ...args: unknown[]) => (store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...args) as { detail: string }[]).map((r) => r.detail);
    expect(plan(GRAPH_SQL.dependents, 1, 'j0')).toEqual(['SEARCH job_links USING INDEX job_links_by_parent (run_id=? AND parent_id=?)']);
    expect(plan(GRAPH_SQL.firstPendingChild, 1, 'j0')[0]).toBe('SEARCH l USING INDEX job_links_by_parent (run_id=? AND parent_id=?)');
    expect(plan(GRAPH_SQL.dropChildren, 1, 'j0', ...FINAL_STATES)[0]).toBe('SEARCH l USING INDEX job_links_by_parent (run_id=? AND parent_id=?)');
  });

  it('give what the unforced queries give, in the same order', () => {
    const store = chain(50);
    const db = store.db;
    const unforced = (sql: string) => sql.replace(/ INDEXED BY job_links_by_parent/g, '').replace(/ CROSS JOIN /g, ' JOIN ');
    store.transition('j7', 'pending', 'submitting');
    store.transition('j9', 'pending', 'failed', { last_error: 'x' });
    for (const p of ['j0', 'j1', 'j5', 'j8', 'j49', 'nope']) {
      expect(db.prepare(GRAPH_SQL.dependents).all(1, p)).toEqual(db.prepare(unforced(GRAPH_SQL.dependents)).all(1, p));
      expect(db.prepare(GRAPH_SQL.firstPendingChild).get(1, p)).toEqual(db.prepare(unforced(GRAPH_SQL.firstPendingChild)).get(1, p));
    }
    expect((db.prepare(GRAPH_SQL.dependents).all(1, 'j0') as unknown[]).length).toBe(49);
    expect(store.graph.firstPendingChild('j0')).toBe(2);
    expect(store.graph.firstPendingChild('j6')).toBe(null); // j7 is in flight
    // j9 failed: its pending descendants (j10 .. j49) were skipped in the transition, in job id order per level.
    expect(store.graph.drainSkipped().map((s) => s.id)).toEqual(Array.from({ length: 40 }, (_, i) => `j${i + 10}`));
  });
});
