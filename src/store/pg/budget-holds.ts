import pg from 'pg';
import { sqlInteger, sqlNumber, sqlText, type Pool } from './db.js';

/**
 * Credits a worker takes from its run's budget row for its next sends (`budget_holds`, one row per run and
 * worker), so that most sends touch the worker's own row and the job's, not the row every worker shares.
 *
 *   budget.reserved = the jobs' reservations + every worker's hold, so spent + reserved <= cap holds exactly
 *   as before: a hold is room taken from the cap, only not yet given to a job.
 *
 *   fromHold  a send whose price the hold covers: the hold shrinks by it, the job's reservation is set (one
 *             statement on the worker's hold row and the job's row)
 *   take      any other send: under the budget row's lock, the job fits when its price is at most the room
 *             left plus this worker's hold; the worker then takes what its hold lacks plus a batch (BATCH_JOBS
 *             more of that price, at most a quarter of the room left after it). A send that does not fit gives
 *             the whole hold back in the same statement: a worker at the cap holds nothing, and the others
 *             see the room it held. Holds of workers whose row in `workers` ran out are given back too.
 *   giveBack  at the worker's end, its hold goes back to the row.
 *
 * The bound this costs, said in the README: with several workers, one may stop at the cap while others still
 * hold room (at most a quarter of what was left when they took it, each); they spend it or give it back.
 * Lock order: a worker's hold row, then the budget row (`take`); a dead worker's hold row is taken SKIP LOCKED.
 * Every statement is a simple query of literals committed without waiting for the disk (see PgLedger.reserve).
 */
export const BATCH_JOBS = 15;

export interface HoldResult {
  ok: boolean;
  spent: number;
  /** The jobs' reservations (holds not counted). */
  reserved: number;
  /** This worker's hold after the statement. */
  hold: number;
}

type Rows = Array<pg.QueryResult<{ ok: boolean; spent: number; reserved: number; hold: number }>>;

/** The job's price from the worker's hold; null when the hold (its row, the truth) does not cover it. */
export async function fromHold(pool: Pool, runId: number, worker: string, id: string, credits: number): Promise<HoldResult | null> {
  const R = sqlInteger(runId);
  const W = sqlText(worker);
  const J = sqlText(id);
  const C = sqlNumber(credits);
  const text = `SET LOCAL synchronous_commit = off;
    WITH o AS (SELECT ${C} - COALESCE((SELECT reserved_credits FROM jobs WHERE run_id = ${R} AND id = ${J}), 0) AS need),
         h AS (UPDATE budget_holds SET credits = credits - (SELECT need FROM o)
                WHERE run_id = ${R} AND worker = ${W} AND credits >= (SELECT need FROM o) - 1e-9 RETURNING credits),
         j AS (UPDATE jobs SET reserved_credits = ${C} WHERE run_id = ${R} AND id = ${J} AND EXISTS (SELECT 1 FROM h) RETURNING 1),
         b AS (SELECT spent, reserved FROM budget WHERE run_id = ${R})
    SELECT true AS ok, b.spent, b.reserved - (COALESCE((SELECT sum(credits) FROM budget_holds WHERE run_id = ${R}), 0) - (SELECT need FROM o)) AS reserved,
           GREATEST(0, h.credits) AS hold
      FROM h, b`;
  const row = ((await pool.query(text)) as unknown as Rows)[1]?.rows[0];
  return row ?? null;
}

/** The send of job `id` under the budget row's lock (see above); null when the run has no budget row. `unknown`: the price is not known (credits 0, fits while any room is left). */
export async function take(pool: Pool, runId: number, worker: string, id: string, credits: number, unknown: boolean, leaseCheck = true): Promise<HoldResult | null> {
  const R = sqlInteger(runId);
  const W = sqlText(worker);
  const J = sqlText(id);
  const C = sqlNumber(credits);
  // free: the room no one holds (a dead worker's hold given back counted in); an unknown price fits while any
  // room is left counting this worker's hold and the job's former reservation, a known one when it fits in them.
  const fits = unknown ? 'd0.free + d0.old + d0.h > 1e-9' : 'd0.need <= d0.free + d0.h + 1e-9';
  const extra = unknown ? '0' : `LEAST(${sqlNumber(credits * BATCH_JOBS)}, GREATEST(0, d1.free - d1.lack) / 4)`;
  const dead = leaseCheck ? `NOT EXISTS (SELECT 1 FROM workers w WHERE w.id = y.worker AND w.lease_expires > now())` : 'false';
  const text = `SET LOCAL synchronous_commit = off;
    SELECT 1 FROM budget_holds WHERE run_id = ${R} AND worker = ${W} FOR UPDATE;
    WITH b AS (SELECT cap, spent, reserved FROM budget WHERE run_id = ${R} FOR UPDATE),
         gone AS (DELETE FROM budget_holds x WHERE x.run_id = ${R} AND x.worker <> ${W} AND EXISTS (SELECT 1 FROM b)
                    AND (x.run_id, x.worker) IN (SELECT y.run_id, y.worker FROM budget_holds y WHERE y.run_id = ${R} AND y.worker <> ${W} AND ${dead} FOR UPDATE SKIP LOCKED)
                  RETURNING x.worker, x.credits),
         hh AS (SELECT COALESCE((SELECT credits FROM budget_holds WHERE run_id = ${R} AND worker = ${W}), 0) AS h),
         o AS (SELECT COALESCE((SELECT reserved_credits FROM jobs WHERE run_id = ${R} AND id = ${J}), 0) AS old),
         d0 AS (SELECT b.spent, b.reserved - COALESCE((SELECT sum(credits) FROM gone), 0) AS reserved, hh.h, o.old,
                       ${C} - o.old AS need, b.cap - b.spent - b.reserved + COALESCE((SELECT sum(credits) FROM gone), 0) AS free FROM b, hh, o),
         d1 AS (SELECT d0.*, ${fits} AS ok, GREATEST(0, d0.need - d0.h) AS lack FROM d0),
         d AS (SELECT d1.*, CASE WHEN d1.ok THEN LEAST(GREATEST(0, d1.free), d1.lack + ${extra}) ELSE -d1.h END AS took FROM d1),
         j AS (UPDATE jobs SET reserved_credits = ${C} WHERE run_id = ${R} AND id = ${J} AND (SELECT ok FROM d) RETURNING 1),
         u AS (UPDATE budget SET reserved = GREATEST(0, (SELECT reserved + took FROM d)) WHERE run_id = ${R} RETURNING spent, reserved),
         keep AS (INSERT INTO budget_holds (run_id, worker, credits) SELECT ${R}, ${W}, GREATEST(0, d.h + d.took - d.need) FROM d WHERE d.ok
                  ON CONFLICT (run_id, worker) DO UPDATE SET credits = EXCLUDED.credits RETURNING credits),
         freed AS (DELETE FROM budget_holds WHERE run_id = ${R} AND worker = ${W} AND NOT (SELECT ok FROM d) RETURNING 1)
    SELECT d.ok, u.spent,
           u.reserved - COALESCE((SELECT sum(credits) FROM budget_holds WHERE run_id = ${R} AND worker <> ${W}), 0)
             + COALESCE((SELECT sum(credits) FROM gone), 0) - COALESCE((SELECT credits FROM keep), 0) AS reserved,
           COALESCE((SELECT credits FROM keep), 0) AS hold
      FROM d, u`;
  const row = ((await pool.query(text)) as unknown as Rows)[2]?.rows[0];
  return row ?? null;
}

/** The worker's hold back to its run's budget row (at its end). */
export async function giveBack(pool: Pool, runId: number, worker: string): Promise<void> {
  const R = sqlInteger(runId);
  const W = sqlText(worker);
  await pool.query(`SET LOCAL synchronous_commit = off;
    SELECT 1 FROM budget_holds WHERE run_id = ${R} AND worker = ${W} FOR UPDATE;
    WITH b AS (SELECT 1 FROM budget WHERE run_id = ${R} FOR UPDATE),
         gone AS (DELETE FROM budget_holds WHERE run_id = ${R} AND worker = ${W} RETURNING credits)
    UPDATE budget SET reserved = GREATEST(0, reserved - (SELECT sum(credits) FROM gone)) WHERE run_id = ${R} AND EXISTS (SELECT 1 FROM b) AND EXISTS (SELECT 1 FROM gone)`);
}
