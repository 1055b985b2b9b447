import type Database from 'better-sqlite3';
import { FINAL_STATES, PARENT_FAILED_STATES, type JobState } from './states.js';
import type { JobInput, JobPatch } from './types.js';

/**
 * The job graph in the state file: table `job_links` (job_id, parent_id, kind).
 *   needs      written from the manifest at each sync: job_id waits for parent_id (references and `needs:`)
 *   inherited  a for_each child waits for the parents of its for_each job (written once, with the child)
 *   child      job_id was made by the for_each job parent_id (so it is not "removed from the manifest")
 *
 * A pending job is ready when every parent (needs, inherited) is done. When a
 * job ends without results (PARENT_FAILED_STATES), its pending descendants
 * become skipped in the same transaction, with the reason naming the first job.
 * Children are inserted with their derived ids (INSERT OR IGNORE) in one
 * transaction with their for_each job's pending -> done: never made twice.
 */

export interface ChildInput extends JobInput {
  /** Jobs the child waits for (the parents of its for_each job). */
  parents: string[];
}

export interface GraphHost {
  readonly db: Database.Database;
  runId(): number;
  generation(): number;
  nextSeq(): number;
  stmt(sql: string): Database.Statement;
  /** The guarded state change without graph effects. */
  move(jobId: string, from: JobState, to: JobState, patch: JobPatch): void;
  /** A job whose earlier result has files on disk was removed (a for_each child made again): the run moves them aside. */
  replaced(jobId: string): void;
  /** A state change made by a manifest sync (rerunDescendants): recorded for the engine's job events. */
  synced(jobId: string, from: JobState, to: JobState, error: string | null): void;
  /** The sync runs with --uncertain=resubmit (uncertain jobs are sent again: a for_each job's uncertain children are made again). */
  resubmitUncertain(): boolean;
}

/**
 * The reads by parent, through job_links_by_parent (INDEXED BY; CROSS JOIN
 * keeps the links as the outer loop). Left to itself the planner reads every
 * link of the run (primary key prefix run_id), or every pending job, for each
 * call: ~1 ms per call at 10,000 jobs instead of ~4 us, once per finished job
 * of a graph run. The rows come in the same order (by job id either way).
 */
export const GRAPH_SQL = {
  /** The jobs waiting for parent_id (afterMove, rerunDescendants). */
  dependents: `SELECT job_id FROM job_links INDEXED BY job_links_by_parent WHERE run_id = ? AND parent_id = ? AND kind != 'child'`,
  /** Where a rescan of pending jobs starts (firstPendingChild). */
  firstPendingChild: `SELECT MIN(j.seq) AS m FROM job_links l INDEXED BY job_links_by_parent CROSS JOIN jobs j ON j.run_id = l.run_id AND j.id = l.job_id WHERE l.run_id = ? AND l.parent_id = ? AND l.kind != 'child' AND j.state = 'pending'`,
  /** The for_each children of a template that are not in flight (dropChildren). */
  dropChildren: `SELECT j.id AS id FROM job_links l INDEXED BY job_links_by_parent CROSS JOIN jobs j ON j.run_id = l.run_id AND j.id = l.job_id WHERE l.run_id = ? AND l.parent_id = ? AND l.kind = 'child' AND j.state IN ('pending', ${FINAL_STATES.map(() => '?').join(', ')})`,
  /** One for_each child of a template that is in flight (a task may exist: submitting, submitted, downloading, uncertain). */
  childInFlight: `SELECT 1 FROM job_links l INDEXED BY job_links_by_parent CROSS JOIN jobs j ON j.run_id = l.run_id AND j.id = l.job_id WHERE l.run_id = ? AND l.parent_id = ? AND l.kind = 'child' AND j.state IN ('submitting', 'submitted', 'downloading', 'uncertain') LIMIT 1`,
  /** The same, uncertain children apart (--uncertain=resubmit: they are sent again anyway, so they are removed and made again). */
  childSentInFlight: `SELECT 1 FROM job_links l INDEXED BY job_links_by_parent CROSS JOIN jobs j ON j.run_id = l.run_id AND j.id = l.job_id WHERE l.run_id = ? AND l.parent_id = ? AND l.kind = 'child' AND j.state IN ('submitting', 'submitted', 'downloading') LIMIT 1`,
  /** The uncertain for_each children of a template (dropChildren with --uncertain=resubmit). */
  uncertainChildren: `SELECT j.id AS id FROM job_links l INDEXED BY job_links_by_parent CROSS JOIN jobs j ON j.run_id = l.run_id AND j.id = l.job_id WHERE l.run_id = ? AND l.parent_id = ? AND l.kind = 'child' AND j.state = 'uncertain'`,
} as const;

/** Text that starts the last_error of a job skipped because of a parent. */
export const GRAPH_SKIP_PREFIX = 'skipped because job ';

/**
 * Prefix put before the spec hash of a job that must be made again once its work in flight is finished (a job
 * it was made from changed): the next sync finds the hash changed and reruns it then (src/store/sync.ts).
 */
export const RERUN_HASH_PREFIX = 'rerun:';

export class GraphLinks {
  /** Jobs skipped by the graph since the last drain (for events). */
  private skippedNow: Array<{ id: string; reason: string }> = [];
  /** Jobs brought back to pending since the last drain (for events). */
  private revivedNow: string[] = [];
  /** Jobs whose rerun waits for work in flight, since the last drain (rerunDescendants). */
  private deferredNow = 0;

  constructor(private readonly h: GraphHost) {}

  /** True when this run has any links (the pipeline then re-reads a job's state before submitting it). */
  any(): boolean {
    return this.h.stmt('SELECT 1 FROM job_links WHERE run_id = ? LIMIT 1').get(this.h.runId()) !== undefined;
  }

  /** Replace every `needs` link of the run (inside the sync transaction). */
  setManifestLinks(links: ReadonlyMap<string, { parents: readonly string[] }>): void {
    const run = this.h.runId();
    this.h.stmt(`DELETE FROM job_links WHERE run_id = ? AND kind = 'needs'`).run(run);
    const ins = this.h.stmt(`INSERT OR IGNORE INTO job_links (run_id, job_id, parent_id, kind) VALUES (?, ?, ?, 'needs')`);
    for (const [id, l] of links) for (const p of l.parents) ins.run(run, id, p);
  }

  /** The smallest seq of the pending jobs waiting for `parentId`, or null (where a rescan of pending jobs starts). */
  firstPendingChild(parentId: string): number | null {
    const r = this.h.stmt(GRAPH_SQL.firstPendingChild).get(this.h.runId(), parentId) as { m: number | null } | undefined;
    return r?.m ?? null;
  }

  /** True when a for_each child of `templateId` is in flight (the for_each job cannot make its children again yet). */
  childrenInFlight(templateId: string): boolean {
    const sql = this.h.resubmitUncertain() ? GRAPH_SQL.childSentInFlight : GRAPH_SQL.childInFlight;
    return this.h.stmt(sql).get(this.h.runId(), templateId) !== undefined;
  }

  /** Jobs whose rerun waits for work in flight (rerunDescendants) since the last drain: the sync keeps no key then. */
  drainDeferred(): number {
    const n = this.deferredNow;
    this.deferredNow = 0;
    return n;
  }

  /** Parents a job waits for. */
  parentsOf(jobId: string): string[] {
    return (this.h.stmt(`SELECT parent_id FROM job_links WHERE run_id = ? AND job_id = ? AND kind != 'child'`).all(this.h.runId(), jobId) as { parent_id: string }[]).map((r) => r.parent_id);
  }

  /** Ids made by for_each jobs the manifest still names (they are not "removed"). */
  childrenOf(templates: ReadonlySet<string>): Set<string> {
    const out = new Set<string>();
    for (const r of this.h.stmt(`SELECT job_id, parent_id FROM job_links WHERE run_id = ? AND kind = 'child'`).all(this.h.runId()) as { job_id: string; parent_id: string }[]) {
      if (templates.has(r.parent_id)) out.add(r.job_id);
    }
    return out;
  }

  /**
   * The for_each job `templateId` made its children: insert them (derived ids,
   * INSERT OR IGNORE), link them, and move it pending -> done, in one transaction.
   * Returns the ids of children that were new.
   */
  expand(templateId: string, children: readonly ChildInput[], note: string): string[] {
    const run = this.h.runId();
    const made: string[] = [];
    this.h.db.transaction(() => {
      const now = new Date().toISOString();
      const ins = this.h.stmt(
        'INSERT OR IGNORE INTO jobs (run_id, id, seq, model, kind, "where", spec_hash, spec, state, created_at, updated_at, estimated_credits, generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
      );
      const link = this.h.stmt('INSERT OR IGNORE INTO job_links (run_id, job_id, parent_id, kind) VALUES (?, ?, ?, ?)');
      for (const c of children) {
        const r = ins.run(run, c.id, this.h.nextSeq(), c.model, c.kind, c.where, c.specHash, c.spec, 'pending', now, now, c.estimatedCredits, this.h.generation());
        if (r.changes === 1) made.push(c.id);
        link.run(run, c.id, templateId, 'child');
        for (const p of c.parents) link.run(run, c.id, p, 'inherited');
      }
      this.h.move(templateId, 'pending', 'done', { last_error: null, result: JSON.stringify({ children: children.map((c) => c.id), note }) });
    })();
    return made;
  }

  /**
   * After `jobId` moved to `to`: when `to` ends it without results, every
   * pending descendant becomes skipped with the reason. Runs inside the caller's transaction.
   */
  afterMove(jobId: string, to: JobState, lastError: string | null | undefined, from?: JobState): void {
    if (from === 'uncertain' && !PARENT_FAILED_STATES.includes(to)) return this.revive(jobId);
    if (!PARENT_FAILED_STATES.includes(to)) return;
    const why = lastError ? `: ${lastError.startsWith(GRAPH_SKIP_PREFIX) ? lastError.slice(GRAPH_SKIP_PREFIX.length) : lastError}` : '';
    const reason = `${GRAPH_SKIP_PREFIX}${jobId} is ${to}${why}`.slice(0, 2000);
    const state = this.h.stmt('SELECT state FROM jobs WHERE run_id = ? AND id = ?');
    this.walkDescendants(jobId, (id) => {
      const cur = state.get(this.h.runId(), id) as { state: JobState } | undefined;
      if (cur?.state !== 'pending') return false;
      this.h.move(id, 'pending', 'skipped', { last_error: reason });
      this.skippedNow.push({ id, reason });
      return true;
    });
  }

  /**
   * Breadth-first over the dependants of `jobId`, each visited once; `visit` returns true to go on
   * below that job (it changed it), false to stop there.
   */
  private walkDescendants(jobId: string, visit: (id: string) => boolean): void {
    const children = this.h.stmt(GRAPH_SQL.dependents);
    const queue = [jobId];
    const seen = new Set(queue);
    while (queue.length > 0) {
      const id = queue.shift()!;
      for (const r of children.all(this.h.runId(), id) as { job_id: string }[]) {
        if (seen.has(r.job_id)) continue;
        seen.add(r.job_id);
        if (visit(r.job_id)) queue.push(r.job_id);
      }
    }
  }

  /**
   * At the start of a run: pending jobs whose parent ended without results
   * become skipped (a resumed run re-reads them as pending from the manifest).
   */
  settle(): void {
    const rows = this.h
      .stmt(
        `SELECT DISTINCT p.id AS id, p.state AS state, p.last_error AS err FROM job_links l JOIN jobs p ON p.run_id = l.run_id AND p.id = l.parent_id
         JOIN jobs c ON c.run_id = l.run_id AND c.id = l.job_id
         WHERE l.run_id = ? AND l.kind != 'child' AND c.state = 'pending' AND p.state IN (${PARENT_FAILED_STATES.map(() => '?').join(', ')})`,
      )
      .all(this.h.runId(), ...PARENT_FAILED_STATES) as { id: string; state: JobState; err: string | null }[];
    if (rows.length === 0) return;
    this.h.db.transaction(() => {
      for (const r of rows) this.afterMove(r.id, r.state, r.err);
    })();
  }

  /**
   * A finished job's spec changed (it goes back to pending): what was made
   * from its results is made again. Its for_each children that are not in
   * flight are removed (made again from the new list), and every finished
   * descendant goes back to pending with its results cleared. Descendants in
   * flight, and for_each jobs with children in flight, finish what they were
   * sent with and are made again by a later sync (deferRerun: their children
   * not sent yet are removed now). Runs inside the sync transaction.
   * Returns how many jobs were reset or removed.
   */
  rerunDescendants(jobId: string): number {
    const run = this.h.runId();
    let n = this.dropChildren(jobId);
    const dependents = this.h.stmt(GRAPH_SQL.dependents);
    const get = this.h.stmt('SELECT state, kind FROM jobs WHERE run_id = ? AND id = ?');
    const clear = this.h.stmt(
      `UPDATE jobs SET task_id = NULL, submitted_input = NULL, submitted_at = NULL, finished_at = NULL, expires_at = NULL, result = NULL WHERE run_id = ? AND id = ?`,
    );
    const files = this.h.stmt('DELETE FROM files WHERE run_id = ? AND job_id = ?');
    const isChild = this.h.stmt(`SELECT 1 FROM job_links WHERE run_id = ? AND job_id = ? AND kind = 'child' LIMIT 1`);
    const queue = [jobId];
    const seen = new Set(queue);
    while (queue.length > 0) {
      const id = queue.shift()!;
      for (const r of dependents.all(run, id) as { job_id: string }[]) {
        if (seen.has(r.job_id)) continue;
        seen.add(r.job_id);
        const row = get.get(run, r.job_id) as { state: JobState; kind: string } | undefined;
        // A for_each child is made again (or kept, while its siblings run) only through its for_each job.
        if (!row || isChild.get(run, r.job_id) !== undefined) continue;
        // In flight, or a for_each job whose children are: it finishes what it was sent with (its children may not
        // be made again under the same ids while the old ones run), and is made again by the sync of a later run.
        if (!FINAL_STATES.includes(row.state) && row.state !== 'pending') {
          this.deferRerun(r.job_id);
          continue;
        }
        if (row.kind === 'fanout' && this.childrenInFlight(r.job_id)) {
          // Its children not sent yet would go with an item of the old list: removed (made again with the rest).
          n += this.dropChildren(r.job_id, true);
          this.deferRerun(r.job_id);
          continue;
        }
        if (FINAL_STATES.includes(row.state)) {
          const why = `made again: job ${jobId} changed`;
          this.h.move(r.job_id, row.state, 'pending', { last_error: why });
          this.h.synced(r.job_id, row.state, 'pending', why);
          clear.run(run, r.job_id);
          files.run(run, r.job_id);
          n++;
        }
        if (row.kind === 'fanout') n += this.dropChildren(r.job_id);
        queue.push(r.job_id);
      }
    }
    return n;
  }

  /** Mark `jobId` to be made again by a later sync (its spec hash no longer matches the manifest's). */
  private deferRerun(jobId: string): void {
    this.h.stmt(`UPDATE jobs SET spec_hash = ? || spec_hash WHERE run_id = ? AND id = ? AND spec_hash NOT LIKE ?`).run(RERUN_HASH_PREFIX, this.h.runId(), jobId, `${RERUN_HASH_PREFIX}%`);
    this.deferredNow++;
  }

  /**
   * Remove the for_each children of `templateId` that are not in flight (with their file rows and links; only
   * the pending ones with `pendingOnly`). A removed child's files on disk are moved aside by the run (replaced()).
   */
  private dropChildren(templateId: string, pendingOnly = false): number {
    const run = this.h.runId();
    const kids = this.h.stmt(GRAPH_SQL.dropChildren).all(run, templateId, ...(pendingOnly ? FINAL_STATES.map(() => 'pending') : FINAL_STATES)) as { id: string }[];
    // --uncertain=resubmit: an uncertain child would be sent again with an item of the old list and the new parent's values.
    if (this.h.resubmitUncertain()) for (const kid of this.h.stmt(GRAPH_SQL.uncertainChildren).all(run, templateId) as { id: string }[]) kids.push(kid);
    for (const k of kids) {
      if (this.h.stmt(`SELECT 1 FROM files WHERE run_id = ? AND job_id = ? AND state = 'done' LIMIT 1`).get(run, k.id) !== undefined) this.h.replaced(k.id);
      this.h.stmt('DELETE FROM jobs WHERE run_id = ? AND id = ?').run(run, k.id);
      this.h.stmt('DELETE FROM files WHERE run_id = ? AND job_id = ?').run(run, k.id);
      this.h.stmt('DELETE FROM job_links WHERE run_id = ? AND job_id = ?').run(run, k.id);
    }
    return kids.length;
  }

  /**
   * `jobId` left `state` for a state with results to come: uncertain (its task adopted from a late
   * callback: submitted; or --uncertain=resubmit: pending), or failed or expired (`run --redo`: pending).
   * The descendants skipped because it was in `state` go back to pending (they were skipped for that
   * reason only, inside the same transaction as the move to `state`; a descendant skipped because of
   * another parent stays skipped). Runs inside the caller's transaction.
   */
  revive(jobId: string, state: JobState = 'uncertain'): void {
    const reason = `${GRAPH_SKIP_PREFIX}${jobId} is ${state}`;
    const row = this.h.stmt('SELECT state, last_error FROM jobs WHERE run_id = ? AND id = ?');
    this.walkDescendants(jobId, (id) => {
      const cur = row.get(this.h.runId(), id) as { state: JobState; last_error: string | null } | undefined;
      if (cur?.state !== 'skipped' || cur.last_error === null || !cur.last_error.startsWith(reason)) return false;
      this.h.move(id, 'skipped', 'pending', { last_error: null });
      this.revivedNow.push(id);
      return true;
    });
    // A job brought back that also waits for another parent that ended without results is skipped again, naming it.
    if (this.revivedNow.length > 0) this.settle();
  }

  /** Jobs brought back to pending by revive() since the last drain (for events). */
  drainRevived(): string[] {
    const out = this.revivedNow;
    this.revivedNow = [];
    return out;
  }

  drainSkipped(): Array<{ id: string; reason: string }> {
    const out = this.skippedNow;
    this.skippedNow = [];
    return out;
  }
}
