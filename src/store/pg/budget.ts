import type { Queryable } from './db.js';

/**
 * The credit cap of a run shared by its workers (--max-credits / the manifest's budget): one row per run,
 * cap and reserved. claimPending (src/store/pg/leases.ts) reserves a job's estimated credits when it leases
 * the job, under the row's lock; a job that ends without being charged gives its reservation back
 * (releaseReservation), once: jobs.reserved_credits records what it holds.
 */

/** Set (or change) the run's cap; null removes the row (no cap). */
export async function setBudgetCap(q: Queryable, runId: number, cap: number | null): Promise<void> {
  if (cap === null) await q.query('DELETE FROM budget WHERE run_id = $1', [runId]);
  else await q.query('INSERT INTO budget (run_id, cap) VALUES ($1, $2) ON CONFLICT (run_id) DO UPDATE SET cap = EXCLUDED.cap', [runId, cap]);
}

export async function budgetOf(q: Queryable, runId: number): Promise<{ cap: number; reserved: number } | null> {
  const r = await q.query<{ cap: number; reserved: number }>('SELECT cap, reserved FROM budget WHERE run_id = $1', [runId]);
  return r.rows[0] ?? null;
}

/** The job ended without a charge (refused, definitely not created): its reserved credits go back to the run. Returns them (0 when none). */
export async function releaseReservation(q: Queryable, runId: number, jobId: string): Promise<number> {
  const r = await q.query<{ c: number }>(
    `WITH j AS (
       UPDATE jobs n SET reserved_credits = NULL FROM jobs o
        WHERE n.run_id = $1 AND n.id = $2 AND o.run_id = n.run_id AND o.id = n.id AND o.reserved_credits IS NOT NULL
        RETURNING o.reserved_credits AS c)
     UPDATE budget SET reserved = GREATEST(0, reserved - (SELECT c FROM j)) WHERE run_id = $1 AND EXISTS (SELECT 1 FROM j)
     RETURNING (SELECT c FROM j) AS c`,
    [runId, jobId],
  );
  return r.rows[0]?.c ?? 0;
}
