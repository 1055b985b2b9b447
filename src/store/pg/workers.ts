import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Queryable } from './db.js';
import { renewUploadSlots } from './upload-slots.js';

/**
 * A worker process of a PostgreSQL state: its id (hostname:pid:random), its row in `workers`, and its
 * heartbeat (last_seen and lease_expires of that row, which holds every job the worker owns whose own lease ran
 * out (src/store/pg/leases.ts), and the upload slots it holds, renewed on the database clock).
 */
export interface WorkerIdentity {
  id: string;
  hostname: string;
  pid: number;
}

export function newWorkerId(): WorkerIdentity {
  const host = hostname();
  return { id: `${host}:${process.pid}:${randomBytes(4).toString('hex')}`, hostname: host, pid: process.pid };
}

const UNTIL = `now() + $2::float8 * interval '1 millisecond'`;

/** The worker's row, live for `leaseMs` from now. */
export async function registerWorker(q: Queryable, w: WorkerIdentity, leaseMs: number): Promise<void> {
  await q.query(
    `INSERT INTO workers (id, hostname, pid, lease_expires) VALUES ($1, $3, $4, ${UNTIL})
     ON CONFLICT (id) DO UPDATE SET last_seen = now(), lease_expires = EXCLUDED.lease_expires`,
    [w.id, leaseMs, w.hostname, w.pid],
  );
}

/**
 * One heartbeat: the worker's row renewed (one statement, however many jobs it holds). False when the row is gone.
 * `slots`: this worker holds upload slots (else their statement is skipped).
 */
export async function heartbeat(q: Queryable, workerId: string, leaseMs: number, slots = true): Promise<boolean> {
  const r = await q.query(`UPDATE workers SET last_seen = now(), lease_expires = ${UNTIL} WHERE id = $1`, [workerId, leaseMs]);
  if (slots) await renewUploadSlots(q, workerId, leaseMs);
  return r.rowCount === 1;
}
