import { TransitionError } from '../../errors.js';
import { TRANSITIONS, type JobState } from '../states.js';
import { PATCH_COLUMNS, type JobPatch, type JobRow, type TakenJob } from '../types.js';
import { named, type Queryable } from './db.js';
import { NOW_ISO } from './schema.js';

/**
 * Jobs held by one worker under a lease, on the database clock only (now()):
 *
 *   claim      pending jobs whose parents are done, in manifest order, `FOR UPDATE SKIP LOCKED` (two
 *              workers never get the same row, and neither waits for the other), not leased by a live
 *              worker: lease_owner = the worker, lease_expires = now() + lease, lease_epoch + 1
 *   held       while the job's own lease_expires is ahead (every move renews it: a job in active work is
 *              held by its own row) or its owner's row in `workers` has lease_expires ahead (the heartbeat
 *              renews that one row: a job waiting at the service is held by its worker's row, and a
 *              heartbeat costs one statement however many jobs the worker holds)
 *   heartbeat  renews the worker's row (and its upload slot holds); no job row is written
 *   move       a state change guarded by the lease: WHERE state = from AND lease_owner = me AND
 *              lease_epoch = mine AND held. A worker paused past its lease writes nothing, whether or not
 *              another took the job over; it is told (`lost`) and drops the job
 *   takeover   the jobs no one holds (both leases run out): `submitting` -> `uncertain` (the POST may have
 *              reached the service: never sent again blindly); `submitted` / `downloading` -> leased to the
 *              caller, which polls and downloads them
 *
 * The allowed changes are src/store/states.ts' TRANSITIONS.
 */

/** A worker's hold on one job: a state change is written only while both still match the row. */
export interface JobLease {
  owner: string;
  epoch: number;
}

/** A job row with the epoch of the lease just taken on it. */
export type LeasedJob = JobRow & { lease_epoch: number };
/** A job taken over: what resuming it needs (not its spec, input and result), with its seq and new epoch. */
export type TakenLeased = TakenJob & { seq: number; lease_epoch: number };

/** The columns of a JobRow (alias j). */
export const ROW_COLUMNS =
  'j.id, j.seq, j.model, j.kind, j."where", j.spec_hash, j.spec, j.submitted_input, j.state, j.task_id, j.attempts, j.created_at, j.updated_at, j.submitted_at, j.finished_at, j.expires_at, j.last_error, j.result, j.estimated_credits, j.permanent, j.uncertain_at';
const JOB_COLUMNS = `${ROW_COLUMNS}, j.lease_epoch`;

/** A pending job is ready when every parent it waits for (needs, inherited; not `child`) is done (as SQLite's nextPending). */
export const READY = `NOT EXISTS (SELECT 1 FROM job_links l JOIN jobs p ON p.run_id = l.run_id AND p.id = l.parent_id
  WHERE l.run_id = j.run_id AND l.job_id = j.id AND l.kind <> 'child' AND p.state <> 'done')`;

/**
 * Held by a live lease (table alias or name `a`): the job's own lease, or its owner's row in `workers` (see above).
 * A job with no owner, or an owner with no row (a worker of an older genbatch), is held by its own lease alone.
 */
export const held = (a: string) =>
  `(COALESCE(${a}.lease_expires > now(), false) OR EXISTS (SELECT 1 FROM workers lw WHERE lw.id = ${a}.lease_owner AND lw.lease_expires > now()))`;
/** Not held by a live lease (table alias or name `a`). */
export const free = (a: string) => `NOT ${held(a)}`;
const FREE = free('j');

const leaseUntil = (param: string) => `now() + ${param} * interval '1 millisecond'`;

export interface Claim {
  jobs: LeasedJob[];
  /** Always false: a claim reserves no credits (under a cap a job's expected price is reserved when it is sent: src/store/pg/budget.ts). */
  heldByBudget: boolean;
}

/**
 * Lease up to `n` ready pending jobs to `owner`, in manifest order, in one statement (its own transaction,
 * or the caller's). No credits are reserved here: a claimed job may wait in its worker's hands, and under a
 * cap only what is sent counts (PgLedger.reserve).
 */
export async function claimPending(
  q: Queryable,
  runId: number,
  owner: string,
  leaseMs: number,
  n: number,
  only: readonly string[] | null = null,
  skip: readonly string[] | null = null,
): Promise<Claim> {
  const text = `WITH cand AS (
       SELECT j.id FROM jobs j
        WHERE j.run_id = $1 AND j.state = 'pending' AND ${FREE} AND ${READY} ${only ? 'AND j.id = ANY($5::text[])' : ''} ${skip ? `AND j.id <> ALL($${only ? 6 : 5}::text[])` : ''}
        ORDER BY j.seq LIMIT $2 FOR UPDATE OF j SKIP LOCKED)
     UPDATE jobs j SET lease_owner = $3, lease_expires = ${leaseUntil('$4')}, lease_epoch = j.lease_epoch + 1
       FROM cand WHERE j.run_id = $1 AND j.id = cand.id
       RETURNING ${JOB_COLUMNS}`;
  const res = await q.query<LeasedJob>(named(text, [runId, n, owner, leaseMs, ...(only ? [only] : []), ...(skip ? [skip] : [])]));
  return { jobs: res.rows.sort((a, b) => a.seq - b.seq), heldByBudget: false };
}

/** Drop the lease on a job (it stays in its state for any worker to take). False when the lease was no longer ours. */
export async function releaseLease(q: Queryable, runId: number, jobId: string, lease: JobLease): Promise<boolean> {
  const r = await q.query(`UPDATE jobs SET lease_owner = NULL, lease_expires = NULL WHERE run_id = $1 AND id = $2 AND lease_owner = $3 AND lease_epoch = $4`, [
    runId,
    jobId,
    lease.owner,
    lease.epoch,
  ]);
  return r.rowCount === 1;
}

/** States in which the worker keeps its lease after a move (it works on the job); any other state ends it (pending: any worker may claim it). */
const LEASED_STATES: readonly JobState[] = ['submitting', 'submitted', 'downloading'];

export type MoveResult = 'moved' | 'lost';

/**
 * A write made with a move, in the move's own statement (a data-modifying WITH query): a statement over
 * `moved` (the job's run_id and id; no row when the move was refused, so then it writes nothing), its values
 * through `p` (which answers their placeholder).
 */
export type WithMove = (p: (v: unknown) => string) => string;

/**
 * Move a job from `from` to `to`, setting `patch`, guarded by the lease (see above). A successful move
 * also renews the lease (or ends it, in a state no worker works on). 'lost': the lease is no longer the
 * caller's (expired, or taken over: owner or epoch changed), nothing was written. Throws TransitionError
 * when the change is not in TRANSITIONS, or the lease is ours and the job is not in `from` (a bug).
 */
export async function guardedMove(
  q: Queryable,
  runId: number,
  jobId: string,
  lease: JobLease,
  from: JobState,
  to: JobState,
  patch: JobPatch,
  leaseMs: number,
  also: readonly WithMove[] = [],
): Promise<MoveResult> {
  assertAllowed(jobId, from, to);
  const { sql, values } = moveSql(runId, jobId, from, to, patch, lease.owner, leaseMs, `lease_owner = $4 AND lease_epoch = $5 AND ${held('jobs')}`, [lease.epoch], false, also);
  for (let again = false; ; again = true) {
    const r = await q.query<{ n: number }>(named(sql, values));
    if (also.length === 0 ? r.rowCount === 1 : r.rows[0]?.n === 1) return 'moved';
    const cur = await q.query<{ state: string; mine: boolean }>(
      `SELECT state, (lease_owner IS NOT DISTINCT FROM $3 AND lease_epoch = $4 AND ${held('jobs')}) AS mine FROM jobs WHERE run_id = $1 AND id = $2`,
      [runId, jobId, lease.owner, lease.epoch],
    );
    const row = cur.rows[0];
    if (row && !row.mine) return 'lost';
    // Ours, live and in `from` now: the lease had run out at the UPDATE and this worker's heartbeat renewed its
    // row before this read (nobody took the job: owner and epoch unchanged), so the move is made once more. Read as
    // a bug, it threw TransitionError from a status poll and left the job held by this worker and never polled.
    if (row && row.state === from && !again) continue;
    throw new TransitionError(`job ${jobId}: expected state ${from} for ${from} -> ${to}, found ${row ? row.state : 'no such job'}`);
  }
}

/**
 * Move a job that no worker holds (an `uncertain` one whose task a callback adopts), guarded by its state
 * alone, and lease it to `owner` (epoch raised). Returns the new epoch; throws TransitionError when the job
 * is not in `from`.
 */
export async function adoptMove(q: Queryable, runId: number, jobId: string, owner: string, from: JobState, to: JobState, patch: JobPatch, leaseMs: number): Promise<number> {
  assertAllowed(jobId, from, to);
  const { sql, values } = moveSql(runId, jobId, from, to, patch, owner, leaseMs, 'true', [], true);
  const r = await q.query<{ lease_epoch: number }>(`${sql} RETURNING lease_epoch`, values);
  const row = r.rows[0];
  if (row) return row.lease_epoch;
  const cur = await q.query<{ state: string }>('SELECT state FROM jobs WHERE run_id = $1 AND id = $2', [runId, jobId]);
  throw new TransitionError(`job ${jobId}: expected state ${from} for ${from} -> ${to}, found ${cur.rows[0]?.state ?? 'no such job'}`);
}

/**
 * The UPDATE of one move: $1 run, $2 job, $3 from, $4 owner, then `extra` guard values, then the lease length and the patch.
 * With `also`: one statement that writes them too, answering `n`, the rows moved (0 or 1).
 */
function moveSql(runId: number, jobId: string, from: JobState, to: JobState, patch: JobPatch, owner: string, leaseMs: number, guard: string, extra: unknown[], adopt = false, also: readonly WithMove[] = []) {
  const values: unknown[] = [runId, jobId, from, owner, ...extra];
  const p = (v: unknown) => {
    values.push(v);
    return `$${values.length}`;
  };
  const sets = [`state = ${p(to)}`, `updated_at = ${NOW_ISO}`];
  if (LEASED_STATES.includes(to)) {
    sets.push(`lease_expires = ${leaseUntil(p(leaseMs))}`);
    if (adopt) sets.push('lease_owner = $4', 'lease_epoch = lease_epoch + 1');
  } else sets.push('lease_owner = NULL', 'lease_expires = NULL');
  for (const col of PATCH_COLUMNS) if (col in patch) sets.push(`"${col}" = ${p(patch[col] ?? null)}`);
  // What every move into failed or uncertain writes (types.ts impliedPatch), uncertain_at from the database clock.
  if ((to === 'failed' || to === 'pending') && !('permanent' in patch)) sets.push('permanent = 0');
  if (to === 'uncertain' && !('uncertain_at' in patch)) sets.push(`uncertain_at = ${NOW_ISO}`);
  if (patch.attemptsInc) sets.push(`attempts = attempts + ${p(patch.attemptsInc)}`);
  // $4 must appear in the statement for its type to be known.
  const ownerUsed = guard.includes('$4') || (adopt && LEASED_STATES.includes(to)) ? '' : ' AND $4::text IS NOT NULL';
  const update = `UPDATE jobs SET ${sets.join(', ')} WHERE run_id = $1 AND id = $2 AND state = $3 AND ${guard}${ownerUsed}`;
  if (also.length === 0) return { sql: update, values };
  return { sql: `WITH moved AS (${update} RETURNING jobs.run_id, jobs.id), ${clauses(also, p)} SELECT count(*)::int AS n FROM moved`, values };
}

/** The writes of `also` for a job moved otherwise (adopted): one statement, `moved` being the job. */
export async function writeWith(q: Queryable, runId: number, jobId: string, also: readonly WithMove[]): Promise<void> {
  if (also.length === 0) return;
  const values: unknown[] = [runId, jobId];
  const p = (v: unknown) => `$${values.push(v)}`;
  await q.query(named(`WITH moved AS (SELECT $1::bigint AS run_id, $2::text AS id), ${clauses(also, p)} SELECT 1`, values));
}

/** The WITH clauses of `also`, after `moved`. */
const clauses = (also: readonly WithMove[], p: (v: unknown) => string): string => also.map((w, i) => `w${i} AS (${w(p)})`).join(', ');

export function assertAllowed(jobId: string, from: JobState, to: JobState): void {
  if (!TRANSITIONS[from].includes(to)) throw new TransitionError(`job ${jobId}: ${from} -> ${to} is not an allowed state change`);
}

/** What takeOver found: jobs of dead workers. */
export interface TakeOver {
  /** submitting -> uncertain (a chat job: -> pending, its call is simply made again). */
  uncertain: string[];
  /** submitting chat jobs sent back to pending. */
  pending: string[];
  /** submitted / downloading jobs now leased to the caller. */
  adopted: TakenLeased[];
}

export const DEAD_SUBMIT_ERROR = 'the worker that sent this submit stopped (its lease expired) before the answer was recorded; the task may exist';
export const DEAD_CHAT_ERROR = 'the worker making this chat call stopped (its lease expired); the call is made again';

/**
 * The jobs no one holds (their own lease and their owner's row run out): a `submitting` one becomes `uncertain` (chat: `pending`), its lease ended
 * and its epoch raised (the dead worker's late writes are refused); up to `n` `submitted` / `downloading`
 * ones are leased to `owner`. Rows another worker is taking over at the same moment are skipped (SKIP
 * LOCKED). `q` must be a client inside a transaction.
 */
export async function takeOver(q: Queryable, runId: number, owner: string, leaseMs: number, n: number, skip: readonly string[] = []): Promise<TakeOver> {
  assertAllowed('(takeover)', 'submitting', 'uncertain');
  assertAllowed('(takeover)', 'submitting', 'pending');
  const dead = await q.query<{ id: string; kind: string }>(
    `UPDATE jobs j SET state = CASE WHEN j.kind = 'chat' THEN 'pending' ELSE 'uncertain' END,
        last_error = CASE WHEN j.kind = 'chat' THEN $2 ELSE $3 END,
        uncertain_at = CASE WHEN j.kind = 'chat' THEN j.uncertain_at ELSE ${NOW_ISO} END,
        updated_at = ${NOW_ISO}, lease_owner = NULL, lease_expires = NULL, lease_epoch = j.lease_epoch + 1
       FROM (SELECT f.run_id, f.id FROM jobs f WHERE f.run_id = $1 AND f.state = 'submitting' AND ${free('f')} FOR UPDATE SKIP LOCKED) c
      WHERE j.run_id = c.run_id AND j.id = c.id
      RETURNING j.id, j.kind`,
    [runId, DEAD_CHAT_ERROR, DEAD_SUBMIT_ERROR],
  );
  // Joined to the picked rows (an IN (subquery) read the whole table), picked through jobs_leased in any
  // order (ordering by seq walked the run's finished jobs): handed over in manifest order below.
  const adopted = await q.query<TakenLeased>(
    `UPDATE jobs j SET lease_owner = $2, lease_expires = ${leaseUntil('$3')}, lease_epoch = j.lease_epoch + 1
       FROM (SELECT f.run_id, f.id FROM jobs f WHERE f.run_id = $1 AND f.state IN ('submitted', 'downloading') AND ${free('f')}
              AND NOT (f.id = ANY($5::text[])) LIMIT $4 FOR UPDATE SKIP LOCKED) c
      WHERE j.run_id = c.run_id AND j.id = c.id
      RETURNING j.id, j.seq, j.state, j.task_id, j.model, j.submitted_at, j.expires_at, j.lease_epoch`,
    [runId, owner, leaseMs, n, [...skip]],
  );
  return {
    uncertain: dead.rows.filter((r) => r.kind !== 'chat').map((r) => r.id),
    pending: dead.rows.filter((r) => r.kind === 'chat').map((r) => r.id),
    adopted: adopted.rows.sort((a, b) => a.seq - b.seq),
  };
}

/**
 * Job `id`, `submitted` with task `taskId` and held by another worker (or by none), leased to `worker` now
 * (epoch + 1: the former holder's writes are refused); null when the job is not so.
 */
export async function adoptWaiting(q: Queryable, runId: number, worker: string, leaseMs: number, id: string, taskId: string): Promise<TakenLeased | null> {
  const r = await q.query<TakenLeased>(
    `UPDATE jobs SET lease_owner = $3, lease_expires = ${leaseUntil('$4')}, lease_epoch = lease_epoch + 1
      WHERE run_id = $1 AND id = $2 AND state = 'submitted' AND task_id = $5 AND lease_owner IS DISTINCT FROM $3
      RETURNING id, seq, state, task_id, model, submitted_at, expires_at, lease_epoch`,
    [runId, id, worker, leaseMs, taskId],
  );
  return r.rows[0] ?? null;
}
