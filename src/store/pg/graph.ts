import { GRAPH_SKIP_PREFIX, type ChildInput } from '../graph.js';
import type { SideMove } from '../port.js';
import { PARENT_FAILED_STATES, type JobState } from '../states.js';
import type { Queryable } from './db.js';
import { assertAllowed } from './leases.js';
import { NOW_ISO } from './schema.js';

/**
 * The job graph of a PostgreSQL run (table job_links, as in SQLite: src/store/graph.ts), for the moves of
 * the work loop, inside the caller's transaction:
 *   afterMove  a job that ends without results (PARENT_FAILED_STATES) skips its pending descendants, naming
 *              it; one that leaves `uncertain` for a state with results to come brings back the descendants
 *              skipped for it (revive), and any of those with another parent that ended without results is
 *              skipped again, naming that one (settle)
 *   expand     a for_each job's children inserted (derived ids: never made twice) and linked
 * Descendants are walked with one recursive query, going below a job only when it changed; the moves come
 * breadth first (by depth, then id). These moves are of jobs no worker holds (a pending job is claimable
 * only once every parent is done), guarded by their state.
 */

/**
 * Dependants (needs, inherited) reached from $2 through jobs matching `cond` (alias j), with their depth. A manifest
 * makes no cycle, but job_links rows written by another client may hold one: each lap round it is a new depth, which
 * UNION keeps, so the walk stops at the run's number of links (no path without a cycle is longer; before, it went on
 * until the server's temporary files filled its disk, the worker waiting on the move).
 */
const walk = (cond: string) => `WITH RECURSIVE d(id, depth) AS (
    SELECT l.job_id, 1 FROM job_links l JOIN jobs j ON j.run_id = l.run_id AND j.id = l.job_id
     WHERE l.run_id = $1 AND l.parent_id = $2 AND l.kind <> 'child' AND ${cond}
    UNION
    SELECT l.job_id, d.depth + 1 FROM d JOIN job_links l ON l.run_id = $1 AND l.parent_id = d.id AND l.kind <> 'child'
      JOIN jobs j ON j.run_id = l.run_id AND j.id = l.job_id
     WHERE ${cond} AND d.depth < (SELECT count(*) FROM job_links n WHERE n.run_id = $1 AND n.kind <> 'child')),
  first AS (SELECT id, MIN(depth) AS depth FROM d GROUP BY id)`;

export async function afterMove(q: Queryable, runId: number, jobId: string, from: JobState, to: JobState, lastError: string | null | undefined): Promise<SideMove[]> {
  if (from === 'uncertain' && !PARENT_FAILED_STATES.includes(to)) return revive(q, runId, jobId, 'uncertain');
  if (!PARENT_FAILED_STATES.includes(to)) return [];
  return skipDescendants(q, runId, jobId, to, lastError ?? null);
}

async function skipDescendants(q: Queryable, runId: number, jobId: string, state: JobState, lastError: string | null): Promise<SideMove[]> {
  assertAllowed(jobId, 'pending', 'skipped');
  const why = lastError ? `: ${lastError.startsWith(GRAPH_SKIP_PREFIX) ? lastError.slice(GRAPH_SKIP_PREFIX.length) : lastError}` : '';
  const reason = `${GRAPH_SKIP_PREFIX}${jobId} is ${state}${why}`.slice(0, 2000);
  const r = await q.query<{ id: string; depth: number }>(
    `${walk(`j.state = 'pending'`)}
     UPDATE jobs u SET state = 'skipped', last_error = $3, updated_at = ${NOW_ISO}, lease_owner = NULL, lease_expires = NULL
       FROM first WHERE u.run_id = $1 AND u.id = first.id AND u.state = 'pending'
       RETURNING u.id, first.depth`,
    [runId, jobId, reason],
  );
  return byDepth(r.rows).map((id) => ({ id, from: 'pending', to: 'skipped', error: reason }));
}

/** The descendants skipped because `jobId` was in `state` go back to pending (see above). */
export async function revive(q: Queryable, runId: number, jobId: string, state: JobState): Promise<SideMove[]> {
  assertAllowed(jobId, 'skipped', 'pending');
  const reason = `${GRAPH_SKIP_PREFIX}${jobId} is ${state}`;
  const r = await q.query<{ id: string; depth: number }>(
    `${walk(`j.state = 'skipped' AND starts_with(j.last_error, $3)`)}
     UPDATE jobs u SET state = 'pending', last_error = NULL, updated_at = ${NOW_ISO}
       FROM first WHERE u.run_id = $1 AND u.id = first.id AND u.state = 'skipped'
       RETURNING u.id, first.depth`,
    [runId, jobId, reason],
  );
  const side: SideMove[] = byDepth(r.rows).map((id) => ({ id, from: 'skipped', to: 'pending', error: null }));
  if (side.length > 0) side.push(...(await settle(q, runId)));
  return side;
}

/** Pending jobs of the run whose parent ended without results become skipped, naming it. */
export async function settle(q: Queryable, runId: number): Promise<SideMove[]> {
  const parents = await q.query<{ id: string; state: JobState; err: string | null }>(
    `SELECT DISTINCT p.id, p.state, p.last_error AS err FROM job_links l JOIN jobs p ON p.run_id = l.run_id AND p.id = l.parent_id
       JOIN jobs c ON c.run_id = l.run_id AND c.id = l.job_id
      WHERE l.run_id = $1 AND l.kind <> 'child' AND c.state = 'pending' AND p.state = ANY($2::text[]) ORDER BY p.id`,
    [runId, PARENT_FAILED_STATES],
  );
  const side: SideMove[] = [];
  for (const p of parents.rows) side.push(...(await skipDescendants(q, runId, p.id, p.state, p.err)));
  return side;
}

function byDepth(rows: Array<{ id: string; depth: number }>): string[] {
  return rows.sort((a, b) => a.depth - b.depth || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)).map((r) => r.id);
}

/** Insert the for_each children of `templateId` after every job of the run, and link them. Returns the ids that were new. */
export async function insertChildren(q: Queryable, runId: number, templateId: string, children: readonly ChildInput[], generation: number): Promise<string[]> {
  if (children.length === 0) return [];
  const r = await q.query<{ id: string }>(
    `INSERT INTO jobs (run_id, id, seq, model, kind, "where", spec_hash, spec, state, created_at, updated_at, estimated_credits, generation)
     SELECT $1, c.id, (SELECT COALESCE(MAX(seq), 0) FROM jobs WHERE run_id = $1) + c.ord, c.model, c.kind, c.w, c.h, c.spec, 'pending', ${NOW_ISO}, ${NOW_ISO}, c.credits, $8
       FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $9::float8[]) WITH ORDINALITY AS c(id, model, kind, w, h, spec, credits, ord)
     ON CONFLICT (run_id, id) DO NOTHING RETURNING id`,
    [
      runId,
      children.map((c) => c.id),
      children.map((c) => c.model),
      children.map((c) => c.kind),
      children.map((c) => c.where),
      children.map((c) => c.specHash),
      children.map((c) => c.spec),
      generation,
      children.map((c) => c.estimatedCredits),
    ],
  );
  const links: Array<[string, string, string]> = [];
  for (const c of children) {
    links.push([c.id, templateId, 'child']);
    for (const p of c.parents) links.push([c.id, p, 'inherited']);
  }
  await q.query(
    `INSERT INTO job_links (run_id, job_id, parent_id, kind) SELECT $1, l.j, l.p, l.k FROM unnest($2::text[], $3::text[], $4::text[]) AS l(j, p, k) ON CONFLICT DO NOTHING`,
    [runId, links.map((l) => l[0]), links.map((l) => l[1]), links.map((l) => l[2])],
  );
  const made = new Set(r.rows.map((x) => x.id));
  return children.map((c) => c.id).filter((id) => made.has(id));
}
