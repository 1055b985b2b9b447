import Database from 'better-sqlite3';
import type { Pool } from '../../src/store/pg/db.js';
import { MIRRORED_TABLES } from '../../src/store/pg/schema.js';

/**
 * Every row of a SQLite state file's mirrored tables into a PostgreSQL state (same tables, same columns):
 * a run made by `genbatch run` on SQLite, there to be read or worked on.
 */
export async function copyToPostgres(sqlitePath: string, pool: Pool): Promise<void> {
  const lite = new Database(sqlitePath, { readonly: true });
  try {
    for (const table of MIRRORED_TABLES) {
      if (table === 'meta') continue;
      for (const row of lite.prepare(`SELECT * FROM ${table}`).all() as Array<Record<string, unknown>>) {
        const cols = Object.keys(row);
        await pool.query(`INSERT INTO ${table} (${cols.map((c) => `"${c}"`).join(', ')}) VALUES (${cols.map((_, i) => `$${i + 1}`).join(', ')})`, Object.values(row));
      }
    }
  } finally {
    lite.close();
  }
}
