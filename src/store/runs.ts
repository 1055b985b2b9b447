import type Database from 'better-sqlite3';
import { nowIso } from './clock.js';
import { adoptRunReadings } from './invocations.js';
import type { Prepare } from './reads.js';
import type { RunRow } from './types.js';

/**
 * The `runs` rows (one per manifest, by absolute path) and the `meta` table
 * of small named values. Store calls these with its cached statements.
 */

/** Create the run of this manifest (absolute path) when new, start a new sync generation, and return its row. */
export function openRun(db: Database.Database, stmt: Prepare, abs: string, outDir: string, baseUrl: string, sandbox: boolean, userPrices: boolean): RunRow {
  db.transaction(() => {
    stmt('INSERT INTO runs (manifest, out_dir) VALUES (?, ?) ON CONFLICT(manifest) DO NOTHING').run(abs, outDir);
    adoptRunReadings(stmt, abs);
    stmt('UPDATE runs SET out_dir = ?, base_url = ?, sandbox = ?, user_prices = ?, generation = generation + 1, started_at = ?, finished_at = NULL WHERE manifest = ?').run(
      outDir,
      baseUrl,
      sandbox ? 1 : 0,
      userPrices ? 1 : 0,
      nowIso(),
      abs,
    );
  })();
  return stmt('SELECT * FROM runs WHERE manifest = ?').get(abs) as RunRow;
}

/** The highest job sequence number of a run (0 when it has no jobs). */
export function maxSeq(stmt: Prepare, runId: number): number {
  const max = stmt('SELECT MAX(seq) AS m FROM jobs WHERE run_id = ?').get(runId) as { m: number | null };
  return max.m ?? 0;
}

/** Every run in this state file (status/report without a manifest). */
export function runs(stmt: Prepare): RunRow[] {
  return stmt('SELECT * FROM runs ORDER BY id').all() as RunRow[];
}

/** The run of this manifest (absolute path), without starting a new generation (status, report). */
export function findRun(stmt: Prepare, abs: string): RunRow | undefined {
  return stmt('SELECT * FROM runs WHERE manifest = ?').get(abs) as RunRow | undefined;
}

export function runById(stmt: Prepare, runId: number): RunRow {
  return stmt('SELECT * FROM runs WHERE id = ?').get(runId) as RunRow;
}

export function setRunFields(stmt: Prepare, runId: number, fields: { finished_at?: string | null }): void {
  for (const [k, v] of Object.entries(fields)) {
    if (!['finished_at'].includes(k)) continue;
    stmt(`UPDATE runs SET ${k} = ? WHERE id = ?`).run(v ?? null, runId);
  }
}

// ---- small named values (meta table) ----

/** A value stored under `key` (e.g. what the last manifest sync depended on), or null. */
export function getMeta(stmt: Prepare, key: string): string | null {
  const r = stmt('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined;
  return r?.value ?? null;
}

/** Store `value` under `key`; null removes it. */
export function setMeta(stmt: Prepare, key: string, value: string | null): void {
  if (value === null) stmt('DELETE FROM meta WHERE key = ?').run(key);
  else stmt('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value').run(key, value);
}
