import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type Database from 'better-sqlite3';
import { StateError } from '../errors.js';
import { pidAlive } from '../lib/pid.js';

/**
 * One writer per state file. The holder records pid, hostname and a heartbeat
 * (ms since epoch) refreshed every `heartbeatMs`. Another process takes the
 * lease over when the holder is dead: same host and its pid no longer exists
 * (or is only a zombie: exited, not yet reaped by its parent), or its heartbeat
 * is older than `staleMs` (covers other hosts and pid reuse).
 * A live holder makes acquire throw StateError.
 */
export interface LeaseOptions {
  heartbeatMs?: number;
  staleMs?: number;
}

interface LeaseRow {
  pid: number;
  hostname: string;
  token: string;
  heartbeat: number;
}

export class Lease {
  readonly token = randomBytes(12).toString('hex');
  private timer: NodeJS.Timeout | null = null;
  /** Set when the lease was taken over from a dead holder: "pid 123 on host". */
  takenOverFrom: string | null = null;
  /** True once a heartbeat found another holder: the engine stops at once. */
  lost = false;

  constructor(
    private readonly db: Database.Database,
    private readonly opts: LeaseOptions = {},
  ) {}

  acquire(): void {
    const staleMs = this.opts.staleMs ?? 60_000;
    const host = hostname();
    const take = this.db.transaction(() => {
      const row = this.db.prepare('SELECT pid, hostname, token, heartbeat FROM lease WHERE id = 1').get() as LeaseRow | undefined;
      if (row) {
        const stale = Date.now() - row.heartbeat > staleMs;
        const dead = row.hostname === host && (row.pid === process.pid ? false : !pidAlive(row.pid));
        if (!stale && !dead) {
          throw new StateError(
            `state file is in use by pid ${row.pid} on ${row.hostname} (heartbeat ${Math.round((Date.now() - row.heartbeat) / 1000)} s ago); wait for it to finish or stop it`,
          );
        }
        this.takenOverFrom = `pid ${row.pid} on ${row.hostname}`;
      }
      this.db
        .prepare('INSERT INTO lease (id, pid, hostname, token, heartbeat) VALUES (1, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET pid = excluded.pid, hostname = excluded.hostname, token = excluded.token, heartbeat = excluded.heartbeat')
        .run(process.pid, host, this.token, Date.now());
    });
    take.immediate();
    const every = this.opts.heartbeatMs ?? 10_000;
    this.timer = setInterval(() => {
      try {
        this.beat();
      } catch (err) {
        // Only a beat that finds another holder loses the lease. Any other failure (the connection busy
        // with a read cursor held across awaits, as the report pass does; a locked file) skips this beat:
        // the next one tries again, and a holder silent for staleMs can be taken over as documented.
        if (err instanceof StateError) this.lost = true;
      }
    }, every);
    this.timer.unref();
  }

  /** Refresh the heartbeat; throws StateError when another process took the lease. */
  beat(): void {
    if (!this.db.open) return;
    const res = this.db.prepare('UPDATE lease SET heartbeat = ? WHERE id = 1 AND token = ?').run(Date.now(), this.token);
    if (res.changes === 0) {
      this.stop();
      throw new StateError('lost the state file lease to another process');
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  release(): void {
    this.stop();
    if (this.db.open) this.db.prepare('DELETE FROM lease WHERE id = 1 AND token = ?').run(this.token);
  }
}

/**
 * True when a writer holds the state file's lease now (its heartbeat fresher than `staleMs` and, on this host,
 * its pid alive): a run is going on. For readers (the view), which take no lease. False without a lease table.
 */
export function writerActive(db: Database.Database, staleMs = 60_000): boolean {
  let row: LeaseRow | undefined;
  try {
    row = db.prepare('SELECT pid, hostname, token, heartbeat FROM lease WHERE id = 1').get() as LeaseRow | undefined;
  } catch {
    return false;
  }
  if (!row || Date.now() - row.heartbeat > staleMs) return false;
  return row.hostname !== hostname() || pidAlive(row.pid);
}
