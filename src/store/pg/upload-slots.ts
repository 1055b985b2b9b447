import { sleep } from '../../client/retry.js';
import type { Queryable } from './db.js';

/**
 * The uploads-per-minute limit of one API key, shared by every worker (the key is never stored: `key` is
 * its fingerprint). One row per slot n = 0..limit-1. A slot is taken for one upload: held_by, started_at
 * and held_until (renewed by the holder's heartbeat) while the upload is in flight; ended_at once it ended.
 * A slot is free again only a whole window after its last upload ended (or after an expired hold: its
 * holder died mid-upload), so two uploads of one slot reach the service a window apart, and no window
 * holds more than `limit` uploads, however long each took. (A slot taken only at the start of an upload
 * lets a slow upload and a later one land in one window.) Slot -1 is the key's cool-down: a 429 sets its
 * held_until and no slot is taken before it. Times are the database's clock.
 */
export interface SlotOptions {
  /** Fingerprint of the API key. */
  key: string;
  worker: string;
  /** Uploads per window (the service: 5). */
  limit: number;
  /** The window (the service: 60,000 ms; scaled in tests). */
  windowMs: number;
  /** How long a hold lasts without a heartbeat renewing it. */
  holdMs: number;
}

export interface HeldSlot {
  slot: number;
  /** ms since epoch, database clock. */
  startedAt: number;
}

const COOL_DOWN = -1;
const ms = (p: string) => `${p} * interval '1 millisecond'`;

/** Take a free slot now, or learn how long until one may free (ms). */
export async function tryUploadSlot(q: Queryable, o: SlotOptions): Promise<HeldSlot | { waitMs: number }> {
  await q.query(
    `INSERT INTO upload_slots (key, slot) SELECT $1, n FROM generate_series(-1, $2 - 1) AS n ON CONFLICT DO NOTHING`,
    [o.key, o.limit],
  );
  const got = await q.query<{ slot: number; started_at: number }>(
    `UPDATE upload_slots s SET held_by = $2, started_at = now(), held_until = now() + ${ms('$4')}, ended_at = NULL
      WHERE (s.key, s.slot) = (
        SELECT key, slot FROM upload_slots f
         WHERE f.key = $1 AND f.slot BETWEEN 0 AND $5 - 1
           AND ((f.held_by IS NULL AND (f.ended_at IS NULL OR f.ended_at <= now() - ${ms('$3')}))
             OR (f.held_by IS NOT NULL AND f.held_until <= now() - ${ms('$3')}))
         ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED)
        AND NOT EXISTS (SELECT 1 FROM upload_slots c WHERE c.key = $1 AND c.slot = ${COOL_DOWN} AND c.held_until > now())
      RETURNING s.slot, (extract(epoch FROM s.started_at) * 1000)::bigint AS started_at`,
    [o.key, o.worker, o.windowMs, o.holdMs, o.limit],
  );
  const row = got.rows[0];
  if (row) return { slot: row.slot, startedAt: row.started_at };
  const wait = await q.query<{ w: number | null }>(
    `SELECT GREATEST(
        (SELECT extract(epoch FROM held_until - now()) * 1000 FROM upload_slots WHERE key = $1 AND slot = ${COOL_DOWN}),
        (SELECT MIN(extract(epoch FROM (CASE WHEN held_by IS NULL THEN ended_at ELSE held_until END) + ${ms('$2')} - now()) * 1000)
           FROM upload_slots WHERE key = $1 AND slot BETWEEN 0 AND $3 - 1)) AS w`,
    [o.key, o.windowMs, o.limit],
  );
  return { waitMs: Math.max(1, Math.ceil(wait.rows[0]?.w ?? 1)) };
}

/** The upload on `slot` ended (whatever its outcome): stamped now. Returns the end stamp (ms since epoch), or null if the hold was lost. */
export async function endUploadSlot(q: Queryable, key: string, slot: number, worker: string): Promise<number | null> {
  const r = await q.query<{ ended_at: number }>(
    `UPDATE upload_slots SET held_by = NULL, held_until = NULL, ended_at = now() WHERE key = $1 AND slot = $2 AND held_by = $3
      RETURNING (extract(epoch FROM ended_at) * 1000)::bigint AS ended_at`,
    [key, slot, worker],
  );
  return r.rows[0]?.ended_at ?? null;
}

/** A 429 from the service: no worker starts an upload with this key for `waitMs`. */
export async function coolDownUploads(q: Queryable, key: string, waitMs: number): Promise<void> {
  await q.query(
    `INSERT INTO upload_slots (key, slot, held_until) VALUES ($1, ${COOL_DOWN}, now() + ${ms('$2')})
      ON CONFLICT (key, slot) DO UPDATE SET held_until = GREATEST(COALESCE(upload_slots.held_until, now()), EXCLUDED.held_until)`,
    [key, waitMs],
  );
}

/** The holder is alive: its holds last another `holdMs`. */
export async function renewUploadSlots(q: Queryable, worker: string, holdMs: number): Promise<void> {
  await q.query(`UPDATE upload_slots SET held_until = now() + ${ms('$2')} WHERE held_by = $1 AND slot >= 0`, [worker, holdMs]);
}

/** Wait for a slot (polling the database; at most `pollMs` between tries). */
export async function takeUploadSlot(q: Queryable, o: SlotOptions, signal?: AbortSignal, pollMs = 1000): Promise<HeldSlot> {
  for (;;) {
    signal?.throwIfAborted();
    const r = await tryUploadSlot(q, o);
    if ('slot' in r) return r;
    await sleep(Math.min(r.waitMs, pollMs), signal);
  }
}
