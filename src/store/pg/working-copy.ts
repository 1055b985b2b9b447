import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { Store } from '../store.js';
import type { Queryable } from './db.js';
import { free, held } from './leases.js';
import { INCOMPLETE } from './sync-lock.js';

/**
 * A run of a PostgreSQL state worked on by the existing synchronous code (the manifest sync, --redo, the
 * job graph's settle, the checks before a run), unchanged: the run is copied into a temporary SQLite
 * state file (the same tables: src/store/pg/schema.ts), changed there through Store, and what changed is
 * written back, inside the caller's transaction (the sync lock's: src/store/pg/sync-lock.ts). Workers go
 * on meanwhile, so the write-back of a job is guarded by the row as it was copied (state, updated_at,
 * lease epoch): a job a worker moved since is left as the worker made it, counted in `conflicts` (the
 * caller then keeps no sync key, so the next run syncs it again). A pending job changed by the copy (spec,
 * skipped) loses its lease (epoch raised): a worker that claimed it and had not sent it yet is refused and
 * drops it. A job in flight keeps its worker: the copy may move it (recoverSubmitting: submitting ->
 * uncertain, as after a crash of one machine) only when no live worker holds it (counted in `held`).
 */

export interface TableSpec {
  name: string;
  key: readonly string[];
  /** The column naming the run (null: shared by every run: meta). */
  run: string | null;
}

export const TABLES: readonly TableSpec[] = [
  { name: 'runs', key: ['id'], run: 'id' },
  { name: 'invocations', key: ['run_id', 'n'], run: 'run_id' },
  { name: 'jobs', key: ['run_id', 'id'], run: 'run_id' },
  { name: 'files', key: ['run_id', 'job_id', 'idx'], run: 'run_id' },
  { name: 'job_links', key: ['run_id', 'job_id', 'parent_id'], run: 'run_id' },
  { name: 'marks', key: ['run_id', 'job_id', 'n'], run: 'run_id' },
  { name: 'job_errors', key: ['run_id', 'job_id', 'n'], run: 'run_id' },
  { name: 'meta', key: ['key'], run: null },
];

type Row = Record<string, unknown>;

export interface WriteBack {
  inserted: number;
  updated: number;
  deleted: number;
  /** Jobs a worker moved after the copy was made: left as the worker made them. */
  conflicts: number;
  /** Jobs in flight that the copy moved (recoverSubmitting, returnInFlight) but a live worker holds: left to it. */
  held: number;
}

const IN_FLIGHT = ['submitting', 'submitted', 'downloading'];

async function heldNow(q: Queryable, runId: number, id: string): Promise<boolean> {
  const r = await q.query(`SELECT 1 FROM jobs WHERE run_id = $1 AND id = $2 AND lease_owner IS NOT NULL AND ${held('jobs')}`, [runId, id]);
  return (r.rowCount ?? 0) > 0;
}

const quote = (c: string) => `"${c}"`;
const keyOf = (t: TableSpec, r: Row) => JSON.stringify(t.key.map((k) => r[k]));

export class WorkingCopy {
  /** Rows as copied, per table, by primary key; jobs with their lease epoch. */
  private readonly before = new Map<string, Map<string, Row>>();
  private readonly columns = new Map<string, string[]>();

  private constructor(
    readonly store: Store,
    private readonly dir: string,
    private readonly runId: number,
  ) {}

  /** Copy run `runId` (and the meta table) into a new temporary state file, opened for writing. */
  static async load(q: Queryable, runId: number): Promise<WorkingCopy> {
    const dir = mkdtempSync(join(tmpdir(), 'genbatch-pg-copy-'));
    const store = Store.openForWrite(join(dir, 'state.db'));
    const copy = new WorkingCopy(store, dir, runId);
    try {
      for (const t of TABLES) await copy.copyIn(q, t);
    } catch (err) {
      copy.close();
      throw err;
    }
    return copy;
  }

  private async copyIn(q: Queryable, t: TableSpec): Promise<void> {
    const db = this.store.db;
    const cols = (db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all(t.name) as string[]).filter((c) => !(t.name === 'meta' && c === ''));
    this.columns.set(t.name, cols);
    const extra = t.name === 'jobs' ? ', lease_epoch' : '';
    const where = t.run ? `WHERE ${quote(t.run)} = $1` : '';
    const r = await q.query<Row>(`SELECT ${cols.map(quote).join(', ')}${extra} FROM ${t.name} ${where}`, t.run ? [this.runId] : []);
    // The copy's own schema_version row stays; every other row comes from PostgreSQL.
    const ins = db.prepare(`INSERT OR REPLACE INTO ${t.name} (${cols.map(quote).join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`);
    const rows = new Map<string, Row>();
    db.transaction(() => {
      for (const row of r.rows) {
        ins.run(...cols.map((c) => row[c] ?? null));
        rows.set(keyOf(t, row), row);
      }
    })();
    this.before.set(t.name, rows);
  }

  /** Write what the copy changed back into PostgreSQL (inside the caller's transaction). */
  async writeBack(q: Queryable): Promise<WriteBack> {
    const out: WriteBack = { inserted: 0, updated: 0, deleted: 0, conflicts: 0, held: 0 };
    for (const t of TABLES) {
      // meta comes last: with conflicts the sync was not applied whole, so what it recorded (the engine's sync
      // key) is not written, and the transaction is marked so that syncOnce keeps no key either: the next
      // run syncs again.
      if (t.name === 'meta' && out.conflicts > 0) {
        await q.query(`SELECT set_config('${INCOMPLETE}', 'yes', true)`);
        continue;
      }
      await this.writeTable(q, t, out);
    }
    return out;
  }

  private async writeTable(q: Queryable, t: TableSpec, out: WriteBack): Promise<void> {
    const cols = this.columns.get(t.name)!;
    const before = this.before.get(t.name)!;
    const db: Database.Database = this.store.db;
    const where = t.run ? `WHERE ${quote(t.run)} = ?` : '';
    const after = db.prepare(`SELECT ${cols.map(quote).join(', ')} FROM ${t.name} ${where}`).all(...(t.run ? [this.runId] : [])) as Row[];
    const seen = new Set<string>();
    const fresh: Row[] = [];
    for (const row of after) {
      const k = keyOf(t, row);
      seen.add(k);
      const old = before.get(k);
      if (!old) {
        fresh.push(row);
        continue;
      }
      const changed = cols.filter((c) => !same(row[c], old[c]));
      if (changed.length === 0) continue;
      const values: unknown[] = changed.map((c) => row[c] ?? null);
      const p = (v: unknown) => {
        values.push(v);
        return `$${values.length}`;
      };
      const sets = changed.map((c, i) => `${quote(c)} = $${i + 1}`);
      const guard = t.key.map((c) => `${quote(c)} = ${p(row[c])}`);
      const moved = t.name === 'jobs' && row.state !== old.state;
      if (t.name === 'jobs') {
        guard.push(`state = ${p(old.state)}`, `updated_at = ${p(old.updated_at)}`, `lease_epoch = ${p(old.lease_epoch)}`);
        if (old.state === 'pending' || moved) sets.push('lease_owner = NULL', 'lease_expires = NULL', 'lease_epoch = lease_epoch + 1');
        // A job in flight changes state only when no live worker holds it (the copy's recoverSubmitting is then
        // the takeover of a dead worker's submit); a live worker's job keeps its state.
        if (moved && IN_FLIGHT.includes(String(old.state))) guard.push(`(lease_owner IS NULL OR ${free('jobs')})`);
      }
      const r = await q.query(`UPDATE ${t.name} SET ${sets.join(', ')} WHERE ${guard.join(' AND ')}`, values);
      if (r.rowCount === 1) out.updated++;
      else if (t.name === 'jobs' && moved && IN_FLIGHT.includes(String(old.state)) && (await heldNow(q, this.runId, String(row.id)))) out.held++;
      else if (t.name === 'jobs') out.conflicts++;
    }
    await insertRows(q, t.name, cols, fresh);
    out.inserted += fresh.length;
    for (const [k, old] of before) {
      if (seen.has(k)) continue;
      const values: unknown[] = t.key.map((c) => old[c]);
      const guard = t.key.map((c, i) => `${quote(c)} = $${i + 1}`);
      // A removed job (a for_each child made again) only as copied: not one a worker has moved since.
      if (t.name === 'jobs') {
        values.push(old.state, old.updated_at);
        guard.push(`state = $${values.length - 1}`, `updated_at = $${values.length}`);
      }
      const r = await q.query(`DELETE FROM ${t.name} WHERE ${guard.join(' AND ')}`, values);
      if (r.rowCount === 1) out.deleted++;
      else if (t.name === 'jobs') out.conflicts++;
    }
  }

  close(): void {
    this.store.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** New rows, many to a statement (a manifest's 100,000 new jobs in 100 statements, not 100,000 round trips). */
async function insertRows(q: Queryable, table: string, cols: readonly string[], rows: readonly Row[]): Promise<void> {
  // At most 1,000 rows and 60,000 values a statement (the protocol's limit is 65,535 parameters).
  const per = Math.max(1, Math.min(1000, Math.floor(60_000 / cols.length)));
  for (let i = 0; i < rows.length; i += per) {
    const chunk = rows.slice(i, i + per);
    const values: unknown[] = [];
    const tuples = chunk.map((row) => `(${cols.map((c) => `$${values.push(row[c] ?? null)}`).join(', ')})`);
    await q.query(`INSERT INTO ${table} (${cols.map(quote).join(', ')}) VALUES ${tuples.join(', ')} ON CONFLICT DO NOTHING`, values);
  }
}

function same(a: unknown, b: unknown): boolean {
  return (a ?? null) === (b ?? null);
}

/** The id of the run of this manifest (absolute path), its row made when new (its fields are set by Store.openRun on a copy). */
export async function ensureRun(q: Queryable, manifestAbs: string, outDir: string): Promise<number> {
  await q.query('INSERT INTO runs (manifest, out_dir) VALUES ($1, $2) ON CONFLICT (manifest) DO NOTHING', [manifestAbs, outDir]);
  const r = await q.query<{ id: number }>('SELECT id FROM runs WHERE manifest = $1', [manifestAbs]);
  return r.rows[0]!.id;
}
