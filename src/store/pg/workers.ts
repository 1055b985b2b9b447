import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Queryable } from './db.js';
import { renewLeases } from './leases.js';
import { renewUploadSlots } from './upload-slots.js';

/**
 * A worker process of a PostgreSQL state: its id (hostname:pid:random), its row in `workers`, and its
 * heartbeat (last_seen, every job lease and upload slot it holds renewed on the database clock).
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

export async function registerWorker(q: Queryable, w: WorkerIdentity): Promise<void> {
  await q.query('INSERT INTO workers (id, hostname, pid) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET last_seen = now()', [w.id, w.hostname, w.pid]);
}

/** One heartbeat: the count of job leases renewed. `slots`: this worker holds upload slots (else their statement is skipped). */
export async function heartbeat(q: Queryable, workerId: string, leaseMs: number, slots = true): Promise<number> {
  await q.query('UPDATE workers SET last_seen = now() WHERE id = $1', [workerId]);
  if (slots) await renewUploadSlots(q, workerId, leaseMs);
  return renewLeases(q, workerId, leaseMs);
}
