import { reportJobsOf } from '../engine/index.js';
import { PageData, orderedCounts, scriptJson, totalJobs } from '../report/index.js';
import type { Store } from '../store/index.js';
import { headValues, type HeadValues } from './head.js';

/** The most of the view's time its full answers to polls may take. */
export const POLL_SHARE = 0.1;

/**
 * What changed in the state file, for the page's poll (GET /api/jobs?since=<time>&gen=<n>, every second).
 * `gen` counts the changes this server has seen (from its start time in ms, so a page open across a restart is not fooled): SQLite's `PRAGMA data_version` (it moves when another
 * connection, such as a run in another process, commits) and the marks written here. A poll with the
 * current gen costs one pragma and gets no rows. Otherwise the rows of the jobs changed at or after `since`
 * (a job's updated_at, or a mark) come back with the new `since` (the latest change, read before the rows,
 * so a change made while they are read comes again next time: a row sent twice is only replaced).
 *
 * Such an answer reads every job (the changed rows, the counts and the header's sums are scans): about 0.4 s of
 * CPU at 100,000 jobs, so a page polling each second while a run goes on would take 40% of a core from the run it
 * watches. After an answer that took C ms the next one waits until 9 C ms have passed (the view's polls then
 * take at most POLL_SHARE of its time; a change shows within about 4 s instead of 1 s at 100,000 jobs, at once
 * for a few thousand); a poll in between is answered as if nothing changed yet, with the page's own gen, so it
 * asks again and misses nothing. A change this server wrote (a mark made in the page) is answered at once.
 */
export class LiveState {
  private dataVersion: number;
  /** Starts at the start time in ms: a page left open across a restart of the view never holds the new server's gen. */
  private gen = Date.now();
  /** The clock time (ms) before which a poll gets no rows (the last full answer's cost, paced by POLL_SHARE). */
  private quietUntil = -Infinity;
  /** This server wrote since the last full answer: the next poll is answered in full at once. */
  private ownWrite = false;

  constructor(
    private readonly store: Store,
    /** The row builder of the page, kept so that state and model indexes stay the same. */
    readonly pageData: PageData,
    /** Milliseconds, for the pacing of full answers (a test gives its own). */
    private readonly clock: () => number = () => performance.now(),
  ) {
    this.dataVersion = this.readDataVersion();
  }

  private readDataVersion(): number {
    return this.store.db.pragma('data_version', { simple: true }) as number;
  }

  /** The current change counter, after a look at the file. */
  current(): number {
    const v = this.readDataVersion();
    if (v !== this.dataVersion) {
      this.dataVersion = v;
      this.gen++;
    }
    return this.gen;
  }

  /** A write made through this server's own connection (data_version does not move for it). */
  wrote(): void {
    this.gen++;
    this.ownWrite = true;
  }

  /** The point the page starts from: `{since, gen, head}` (`head` read after the other two, by `headOf` when given). */
  start(headOf: () => HeadValues = () => headValues(this.store)): { since: string; gen: number; head: HeadValues } {
    return { gen: this.current(), since: this.store.lastChange(), head: headOf() };
  }

  /** The JSON answer to a poll: `{since, gen, rows, tables, counts, total, head}` (rows, counts and the header's values only when something changed). */
  changes(since: string, gen: number): string {
    const now = this.current();
    if (gen === now) return JSON.stringify({ since, gen: now, rows: [] });
    const began = this.clock();
    if (began < this.quietUntil && !this.ownWrite) return JSON.stringify({ since, gen, rows: [] });
    this.ownWrite = false;
    const latest = this.store.lastChange();
    const rows = reportJobsOf(this.store, this.store.summaryRowsChangedSince(since)).map((j) => this.pageData.row(j));
    const counts = this.store.counts();
    const answer = `{"since":${JSON.stringify(latest)},"gen":${now},"rows":[${rows.join(',')}],"tables":${scriptJson(this.pageData.tables())},"counts":${JSON.stringify(orderedCounts(counts))},"total":${totalJobs(counts)},"head":${scriptJson(headValues(this.store, counts))}}`;
    const ended = this.clock();
    this.quietUntil = ended + (ended - began) * (1 / POLL_SHARE - 1);
    return answer;
  }
}
