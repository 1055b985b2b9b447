import type Database from 'better-sqlite3';
import { nowIso } from './clock.js';
import { hasJobSendColumns } from './schema.js';
import type { Prepare } from './reads.js';
import type { InvocationRow, RunRow } from './types.js';

/**
 * The `invocations` rows: one per `genbatch run` of a run (manifest) that had work that can move
 * the balance (jobs to submit or tasks to wait for), numbered 1, 2, ... within the run, with the
 * balance read before its work and after it. The run's charge is the sum of their differences
 * (engine/report-data.ts). An invocation with nothing to do leaves no row (and reads no balance).
 */

/**
 * State files written before this table kept one pair of readings on the run row (those of the
 * run's last invocation that read them): it becomes invocation 1 when such a run is opened for
 * writing, so a resumed run keeps it. Inside openRun's transaction, before started_at changes.
 */
export function adoptRunReadings(stmt: Prepare, abs: string): void {
  stmt(
    `INSERT INTO invocations (run_id, n, started_at, finished_at, balance_before, balance_after)
     SELECT id, 1, COALESCE(started_at, ''), finished_at, balance_before, balance_after FROM runs r
     WHERE manifest = ? AND balance_before IS NOT NULL AND NOT EXISTS (SELECT 1 FROM invocations i WHERE i.run_id = r.id)`,
  ).run(abs);
}

/** Record the start of an invocation with its opening reading (null: not read); returns its number. */
export function startInvocation(db: Database.Database, stmt: Prepare, run: RunRow, balance: number | null, readAt: string | null): number {
  return db.transaction(() => {
    const max = stmt('SELECT MAX(n) AS m FROM invocations WHERE run_id = ?').get(run.id) as { m: number | null };
    const n = (max.m ?? 0) + 1;
    stmt('INSERT INTO invocations (run_id, n, started_at, balance_before, balance_before_at) VALUES (?, ?, ?, ?, ?)').run(run.id, n, run.started_at ?? nowIso(), balance, readAt);
    // Kept on the run row too, as before this table (an older genbatch reads them there).
    stmt('UPDATE runs SET balance_before = ?, balance_after = NULL WHERE id = ?').run(balance, run.id);
    return n;
  })();
}

/** Record the end of invocation `n` with its closing reading (null: not read) and the submit requests it sent. */
export function finishInvocation(db: Database.Database, stmt: Prepare, runId: number, n: number, balance: number | null, readAt: string | null, submits: number): void {
  db.transaction(() => {
    stmt('UPDATE invocations SET finished_at = ?, balance_after = ?, balance_after_at = ?, submits = ? WHERE run_id = ? AND n = ?').run(nowIso(), balance, readAt, submits, runId, n);
    stmt('UPDATE runs SET balance_after = ? WHERE id = ?').run(balance, runId);
  })();
}

/**
 * The invocations of a run, in order. A state file without the table (written before it, opened
 * to read) gives the readings kept on the run row as invocation 1, as adoptRunReadings would.
 */
export function invocations(db: Database.Database, run: RunRow): InvocationRow[] {
  const table = db.prepare(`SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'invocations'`).get();
  const rows = table ? (db.prepare('SELECT * FROM invocations WHERE run_id = ? ORDER BY n').all(run.id) as InvocationRow[]) : [];
  if (rows.length > 0 || run.balance_before === null) return rows;
  return [
    {
      run_id: run.id,
      n: 1,
      started_at: run.started_at ?? '',
      finished_at: run.finished_at,
      balance_before: run.balance_before,
      balance_before_at: null,
      balance_after: run.balance_after,
      balance_after_at: null,
      submits: null,
    },
  ];
}

/** What became of the jobs each invocation sent last (jobs.sent_by): by invocation number, sent and how many of them are done or failed now. */
export interface InvocationJobs {
  sent: number;
  done: number;
  failed: number;
}

export function jobsByInvocation(db: Database.Database, runId: number): Map<number, InvocationJobs> {
  const out = new Map<number, InvocationJobs>();
  if (!hasJobSendColumns(db)) return out;
  const rows = db.prepare('SELECT sent_by, state, COUNT(*) FROM jobs WHERE run_id = ? AND sent_by IS NOT NULL GROUP BY sent_by, state').raw(true).all(runId) as Array<[number, string, number]>;
  for (const [n, state, count] of rows) {
    const j = out.get(n) ?? { sent: 0, done: 0, failed: 0 };
    j.sent += count;
    if (state === 'done') j.done += count;
    if (state === 'failed') j.failed += count;
    out.set(n, j);
  }
  return out;
}
