import Database from 'better-sqlite3';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { markJobs } from '../src/engine/index.js';
import { PageData } from '../src/report/index.js';
import { Store } from '../src/store/index.js';
import { LiveState, POLL_SHARE } from '../src/view/live.js';
import { bigViewState, jobId } from './helpers/view-state.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The view's full answers to polls take at most POLL_SHARE of its time: after one that took C ms, a poll before
 * 9 C ms have passed gets no rows and its own gen back (so the page asks again and misses nothing); once they have,
 * the rows changed meanwhile all come. A mark made through the view is answered at once. The clock is the test's:
 * each read of it advances it by COST ms, so a full answer "takes" COST ms whatever the machine.
 */
const COST = 40;
const WINDOW = COST * (1 / POLL_SHARE - 1);
let now = 0;
const clock = (): number => {
  const t = now;
  now += COST;
  return t;
};
let store: Store;
let other: Database.Database;
let live: LiveState;
let cleanup: () => void;

type Answer = { since: string; gen: number; rows: unknown[][] };
const ask = (since: string, gen: number): Answer => JSON.parse(live.changes(since, gen)) as Answer;
/** A change made by another connection (as a run in another process makes one), stamped now as a run stamps it. */
const changeFromElsewhere = (i: number): void => {
  other.prepare('UPDATE jobs SET last_error = ?, updated_at = ? WHERE id = ?').run(`note ${i}`, new Date().toISOString(), jobId(i));
};

beforeAll(() => {
  const t = tempDir('genbatch-view-pacing-');
  cleanup = t.cleanup;
  const { statePath } = bigViewState(t.dir, 6);
  store = Store.openForRead(statePath);
  store.useRun(store.runs()[0]!);
  other = new Database(statePath);
  live = new LiveState(store, new PageData('/files/'), clock);
});
afterAll(() => {
  other?.close();
  store?.close();
  cleanup?.();
});

it('answers a poll within 9x the last full answer\'s time with no rows and the page\'s own gen, then every change made meanwhile', () => {
  const start = live.start();
  changeFromElsewhere(1);
  const first = ask(start.since, start.gen);
  expect(first.gen).not.toBe(start.gen);
  expect(first.rows.map((r) => r[0])).toContain(jobId(1));

  // Within the window: nothing yet, and the gen the page sent, so its next poll asks for the same changes again.
  changeFromElsewhere(2);
  changeFromElsewhere(3);
  now += WINDOW - 4 * COST;
  const quiet = ask(first.since, first.gen);
  expect(quiet).toEqual({ since: first.since, gen: first.gen, rows: [] });

  // Past it: both changes come, with a new gen.
  now += WINDOW;
  const later = ask(quiet.since, quiet.gen);
  expect(later.gen).not.toBe(first.gen);
  // (rows changed at or after `since` come: the boundary's too)
  expect(later.rows.map((r) => r[0])).toEqual(expect.arrayContaining([jobId(2), jobId(3)]));
});

it('answers at once after a mark made through this view, whatever the window', () => {
  now += 10 * WINDOW;
  const start = live.start();
  changeFromElsewhere(4);
  const first = ask(start.since, start.gen);
  expect(first.rows.map((r) => r[0])).toContain(jobId(4));
  // A mark as the view's POST /api/marks writes it: through its own connection, then wrote().
  markJobs(store, [jobId(5)], 'approve', null, 'POST /api/marks');
  live.wrote();
  const marked = ask(first.since, first.gen);
  expect(marked.gen).not.toBe(first.gen);
  expect(marked.rows.map((r) => r[0])).toContain(jobId(5));
  // The window starts again from that answer: a change from elsewhere waits for it.
  changeFromElsewhere(0);
  expect(ask(marked.since, marked.gen).rows).toEqual([]);
});
