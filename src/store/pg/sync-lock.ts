import { inTx, type Client, type Pool } from './db.js';
import { LOCK } from './schema.js';

/**
 * The manifest sync of a run with many workers: exactly one process inserts and updates the run's job rows;
 * the others wait on the run's advisory lock and join the run once it committed. The sync is done inside
 * the lock's transaction and recorded in meta under `pg-sync:<run id>` with its key (what the sync depends
 * on: src/engine/sync-key.ts); a process that takes the lock and finds its own key there does not sync again.
 */
export type SyncOutcome = 'synced' | 'joined';

/**
 * A transaction-local setting: set (to 'yes') by a sync that could not apply everything (WorkingCopy's
 * write-back met jobs workers had moved meanwhile); its key is then not recorded, so the next run syncs again.
 */
export const INCOMPLETE = 'genbatch.sync_incomplete';

export async function syncOnce(pool: Pool, runId: number, key: string, sync: (c: Client) => Promise<void>): Promise<SyncOutcome> {
  return inTx(pool, async (c) => {
    await c.query('SELECT pg_advisory_xact_lock($1, $2)', [LOCK.sync, runId]);
    const r = await c.query<{ value: string }>('SELECT value FROM meta WHERE key = $1', [`pg-sync:${runId}`]);
    if (r.rows[0]?.value === key) return 'joined';
    await sync(c);
    const incomplete = await c.query<{ v: string | null }>(`SELECT current_setting('${INCOMPLETE}', true) AS v`);
    if (incomplete.rows[0]?.v === 'yes') return 'synced';
    await c.query('INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value', [`pg-sync:${runId}`, key]);
    return 'synced';
  });
}
