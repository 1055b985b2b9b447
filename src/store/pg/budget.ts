import type { CapLedger, CapTotals } from '../port.js';
import pg from 'pg';
import { fromHold, giveBack, take } from './budget-holds.js';
import { sqlInteger, sqlNumber, sqlText, type Pool, type Queryable } from './db.js';
import { held } from './leases.js';

/**
 * The credit cap of a run shared by its workers (--max-credits / the manifest's budget): one row per run with
 * the cap, `spent` (every drop of the balance since the run began, over all its invocations: one record of
 * what was charged for every worker), the last `balance` read, and `reserved` (the expected prices of the jobs
 * sent and not yet seen charged). A worker reserves a job's expected price when it sends it (PgLedger.reserve,
 * under the row's lock: N workers never reserve past the cap together); the reservation ends with the first
 * balance reading after the job ended (any worker's), or at once when it ended uncharged (releaseReservation,
 * once: jobs.reserved_credits records what it holds). The cap logic is src/engine/cap.ts.
 */

/**
 * Set (or change) the run's cap and how it was given (`--max-credits 300`); null removes the row (no cap). A new
 * invocation clears `stopped`. The last reading is kept: a new invocation's base is set by PgLedger.rebase, from a
 * reading this worker takes before it sends anything (forgetting it here let a worker joining the night drop the
 * charges another made since its last applied reading: pg.credit-cap recorded one task less than was charged).
 */
export async function setBudgetCap(q: Queryable, runId: number, cap: number | null, name: string | null = null): Promise<void> {
  if (cap === null) {
    await q.query('DELETE FROM budget WHERE run_id = $1', [runId]);
    await q.query('DELETE FROM budget_holds WHERE run_id = $1', [runId]);
  }
  else {
    await q.query(
      `INSERT INTO budget (run_id, cap, name) VALUES ($1, $2, $3)
       ON CONFLICT (run_id) DO UPDATE SET cap = EXCLUDED.cap, name = COALESCE(EXCLUDED.name, budget.name), stopped = false`,
      [runId, cap, name],
    );
  }
}

export interface BudgetRow {
  cap: number;
  reserved: number;
  spent: number;
  name: string | null;
  stopped: boolean;
}

export async function budgetOf(q: Queryable, runId: number): Promise<{ cap: number; reserved: number } | null> {
  const r = await q.query<{ cap: number; reserved: number }>('SELECT cap, reserved FROM budget WHERE run_id = $1', [runId]);
  return r.rows[0] ?? null;
}

/** The whole budget row of the run, or null (no cap). */
export async function budgetRow(q: Queryable, runId: number): Promise<BudgetRow | null> {
  const r = await q.query<BudgetRow>('SELECT cap, reserved, spent, name, stopped FROM budget WHERE run_id = $1', [runId]);
  return r.rows[0] ?? null;
}

/** Note that a worker stopped sending at the cap (the reports say so until the next invocation sets the cap). */
export async function markStopped(q: Queryable, runId: number): Promise<void> {
  await q.query('UPDATE budget SET stopped = true WHERE run_id = $1', [runId]);
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

/** The budget row as the CapLedger of every worker of the run. */
export class PgLedger implements CapLedger {
  /** The ticket of this worker's reading in progress (releasable takes it, settle applies it), or null. */
  private ticket: number | null = null;
  /** This worker's hold as its last statement left it (its row in budget_holds is the truth). */
  private hold = 0;

  /** `worker`: the worker's id, whose sends take credits in batches (budget-holds.ts); null: each send takes its own from the row. */
  constructor(
    private readonly pool: Pool,
    private readonly runId: number,
    private readonly worker: string | null = null,
  ) {}

  /**
   * One statement, the budget row locked for that statement alone (every send of every worker passes here): the
   * job's former reservation is replaced by `credits` when the run's spent and reserved credits, less that former
   * reservation, leave room for them (an unknown price: any room at all).
   *
   * Sent as one simple query (its values written as literals), so the server commits it as soon as it ran, with
   * no round trip to this process while the row is locked, and without waiting for the disk: on a busy machine a
   * lock held across a round trip or a WAL flush queued every other worker's send behind it (Lock:transactionid
   * 1.6 with 4 workers in bench/workers.mjs --max-credits). Nothing is lost by not waiting: the job is sent only
   * after its submit intent commits durably, later in the same WAL, which brings this reservation to the disk
   * with it; a server crash before that loses a reservation whose job was never sent.
   */
  async reserve(id: string, credits: number, unknown: boolean): Promise<CapTotals & { ok: boolean }> {
    if (this.worker !== null) {
      const r = (!unknown && credits <= this.hold + 1e-9 ? await fromHold(this.pool, this.runId, this.worker, id, credits) : null) ?? (await take(this.pool, this.runId, this.worker, id, credits, unknown));
      if (!r) return { ok: true, spent: 0, reserved: 0 };
      this.hold = r.hold;
      return { ok: r.ok, spent: r.spent, reserved: r.reserved };
    }
    // An integer literal (bigint), so the jobs and budget keys' indexes serve the lookups.
    const run = sqlInteger(this.runId);
    const job = sqlText(id);
    const c = sqlNumber(credits);
    const text = `SET LOCAL synchronous_commit = off;
      WITH b AS (SELECT cap, spent, reserved FROM budget WHERE run_id = ${run} FOR UPDATE),
           o AS (SELECT COALESCE((SELECT reserved_credits FROM jobs WHERE run_id = ${run} AND id = ${job}), 0) AS old),
           d AS (SELECT b.spent, b.reserved, o.old,
                        ${unknown ? 'b.spent + b.reserved - o.old < b.cap - 1e-9' : `b.spent + b.reserved - o.old + ${c} <= b.cap + 1e-9`} AS ok
                   FROM b, o),
           j AS (UPDATE jobs SET reserved_credits = ${c} WHERE run_id = ${run} AND id = ${job} AND (SELECT ok FROM d) RETURNING 1),
           u AS (UPDATE budget SET reserved = GREATEST(0, reserved + ${c} - (SELECT old FROM d)) WHERE run_id = ${run} AND (SELECT ok FROM d) RETURNING spent, reserved)
      SELECT d.ok, COALESCE(u.spent, d.spent) AS spent, COALESCE(u.reserved, d.reserved) AS reserved FROM d LEFT JOIN u ON true`;
    // A simple query of two statements answers with one result each.
    const results = (await this.pool.query(text)) as unknown as Array<pg.QueryResult<{ ok: boolean; spent: number; reserved: number }>>;
    const row = results[1]?.rows[0];
    // No budget row: the run has no cap.
    if (!row) return { ok: true, spent: 0, reserved: 0 };
    return { ok: row.ok, spent: row.spent, reserved: row.reserved };
  }

  async unreserve(id: string): Promise<void> {
    await releaseReservation(this.pool, this.runId, id);
  }

  /**
   * `own`, and every job of the run holding a reservation that is no longer at the service (nor pending in a live
   * worker's hands). In the same statement the reading about to begin takes its ticket (budget.read_seq): the
   * readings of all the workers are applied in the order of their tickets, and a job released by a reading ended
   * before its ticket, so before every reading with a later ticket was begun.
   */
  async releasable(own: readonly string[]): Promise<string[]> {
    const r = await this.pool.query<{ seq: string | null; ids: string[] }>(
      `WITH t AS (UPDATE budget SET read_seq = read_seq + 1 WHERE run_id = $1 RETURNING read_seq)
       SELECT (SELECT read_seq FROM t) AS seq, COALESCE(array_agg(id), '{}') AS ids FROM jobs
        WHERE run_id = $1 AND reserved_credits IS NOT NULL
          AND (id = ANY($2::text[]) OR (state NOT IN ('submitting', 'submitted') AND NOT (state = 'pending' AND ${held('jobs')})))`,
      [this.runId, [...own]],
    );
    // One row always (a SELECT of aggregates).
    const row = r.rows[0]!;
    this.ticket = row.seq == null ? null : Number(row.seq);
    return row.ids;
  }

  /**
   * A balance reading: the `release` jobs' reservations end; spent grows by the drop since the last reading applied,
   * unless a reading begun later (a higher ticket, another worker's) was applied first: a reading never goes back
   * in time (two workers' readings crossing on the way would count a drop twice, or lose one). Without a ticket
   * (settle called without releasable) the reading counts as the latest.
   */
  async settle(reading: number, release: readonly string[]): Promise<CapTotals> {
    // The budget row first (the order of every statement here: a worker's hold, the budget row, job rows), then
    // the jobs to release that no one is writing now (SKIP LOCKED: a job being moved to done keeps its
    // reservation until the next reading, which only holds back sends, never lets one past the cap). One simple
    // query of literals committed without waiting for the disk: a reading lost to a server crash leaves the
    // last one as the base, so the next counts its drop (releases lost with it only hold back sends).
    const R = sqlInteger(this.runId);
    const ids = `ARRAY[${release.map((id) => sqlText(id)).join(', ')}]::text[]`;
    const ticket = this.ticket === null ? 'NULL::bigint' : `${sqlInteger(this.ticket)}::bigint`;
    const text = `SET LOCAL synchronous_commit = off;
      SELECT 1 FROM budget WHERE run_id = ${R} FOR UPDATE;
      WITH j AS (
         UPDATE jobs n SET reserved_credits = NULL
           FROM (SELECT id, reserved_credits FROM jobs WHERE run_id = ${R} AND id = ANY(${ids}) AND reserved_credits IS NOT NULL FOR UPDATE SKIP LOCKED) o
          WHERE n.run_id = ${R} AND n.id = o.id
          RETURNING o.reserved_credits AS c)
       UPDATE budget SET reserved = GREATEST(0, reserved - COALESCE((SELECT sum(c) FROM j), 0)),
         spent = CASE WHEN balance IS NULL OR ${ticket} <= applied_seq THEN spent ELSE round((spent + balance - ${sqlNumber(reading)})::numeric, 6)::double precision END,
         balance = CASE WHEN ${ticket} <= applied_seq THEN balance ELSE ${sqlNumber(reading)} END,
         applied_seq = GREATEST(applied_seq, COALESCE(${ticket}, applied_seq))
        WHERE run_id = ${R} RETURNING spent, reserved - COALESCE((SELECT sum(credits) FROM budget_holds WHERE run_id = ${R}), 0) AS reserved`;
    const results = (await this.pool.query(text)) as unknown as Array<pg.QueryResult<CapTotals>>;
    this.ticket = null;
    return results[2]?.rows[0] ?? { spent: 0, reserved: 0 };
  }
  /**
   * A new invocation's base: `reading` (taken after releasable() gave this worker its ticket, before it sends
   * anything) becomes the last reading, so what the key spent between invocations is not the run's. Only when no
   * job of the run is at the service or holds a reservation (every charge of the run is then in spent: nothing
   * is lost), and no reading begun later was applied. Else the last reading stays the base: a joining worker's
   * reading would at worst count a charge twice, never drop one. True when it became the base.
   */
  async rebase(reading: number): Promise<boolean> {
    const r = await this.pool.query(
      `UPDATE budget SET balance = $2, applied_seq = $3
        WHERE run_id = $1 AND $3::bigint > applied_seq
          AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.run_id = $1 AND (j.state IN ('submitting', 'submitted') OR j.reserved_credits IS NOT NULL))`,
      [this.runId, reading, this.ticket],
    );
    this.ticket = null;
    return (r.rowCount ?? 0) > 0;
  }

  /** This worker's hold goes back to the run (at its end). */
  async close(): Promise<void> {
    if (this.worker === null) return;
    await giveBack(this.pool, this.runId, this.worker);
    this.hold = 0;
  }
}

/** The run's cap as a worker uses it (src/engine/work.ts), or null when the run has none. */
export interface PgCap {
  credits: number;
  name: string;
  ledger: CapLedger;
  /** What the run was charged so far (the row's spent). */
  spent(): Promise<number>;
  /** At a worker's end: the row's `stopped` set when it stopped at the cap, and the cap, the charge and the stop noted in meta `credit_cap:<run id>` for the readers (status, report). */
  note(stopped: boolean): Promise<void>;
}

/** `worker`: the id of the worker using it (its sends take credits in batches); null: one send at a time. */
export async function pgCap(pool: Pool, runId: number, worker: string | null = null): Promise<PgCap | null> {
  const row = await budgetRow(pool, runId);
  if (!row) return null;
  return {
    credits: row.cap,
    name: row.name ?? `the run's credit cap of ${row.cap}`,
    ledger: new PgLedger(pool, runId, worker),
    spent: async () => (await budgetRow(pool, runId))?.spent ?? 0,
    note: async (stopped) => {
      if (stopped) await markStopped(pool, runId);
      const b = await budgetRow(pool, runId);
      if (!b) return;
      const value = JSON.stringify({ credits: b.cap, name: b.name ?? `the run's credit cap of ${b.cap}`, stopped: b.stopped, charged: b.spent });
      await pool.query('INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value', [`credit_cap:${runId}`, value]);
    },
  };
}
