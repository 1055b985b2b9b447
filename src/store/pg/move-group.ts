import { inTx, type Pool, type Queryable } from './db.js';

/** The most moves one transaction carries (each holds its job row's lock until the group's COMMIT). */
export const GROUP_MAX = 64;

interface Member {
  fn: (q: Queryable) => Promise<unknown>;
  durable: boolean;
  /** One statement that may run outside a transaction (its own commit) when the group is this move alone. */
  alone: boolean;
  done: (err: unknown, out?: unknown) => void;
}

/**
 * A worker's job moves, grouped as the SQLite state's GroupCommit groups its commits: the moves asked for while
 * the previous group is being committed (or in the same turn of the event loop) run one after another in one
 * transaction on one connection, with one COMMIT: one BEGIN, one COMMIT and one WAL flush for the group instead
 * of one per move. Each promise settles after the COMMIT, so the submit intent is still committed before its
 * POST; a durable move makes its group's COMMIT wait for the disk.
 *
 * One failing move does not undo the others: when a move throws (a job not in the state asked for, a deadlock,
 * a lost connection) the group's transaction is rolled back and each of its moves is made again alone, in its
 * own transaction, so each caller gets what that move alone gives. A group of one move is made as before: its
 * own transaction, or a single statement when it is one.
 */
export class MoveGroup {
  private queue: Member[] = [];
  /** A flush is due or running: moves asked for meanwhile wait for it to end and form the next group. */
  private busy = false;

  constructor(private readonly pool: Pool) {}

  run<T>(fn: (q: Queryable) => Promise<T>, o: { durable: boolean; alone: boolean }): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, durable: o.durable, alone: o.alone, done: (err, out) => (err === null ? resolve(out as T) : reject(err)) });
      if (!this.busy) {
        this.busy = true;
        setImmediate(() => void this.flush());
      }
    });
  }

  private async flush(): Promise<void> {
    const batch = this.queue.splice(0, GROUP_MAX);
    try {
      if (batch.length === 1) await this.one(batch[0]!);
      else await this.many(batch);
    } finally {
      // Moves asked for during this group's commit form the next group.
      if (this.queue.length > 0) setImmediate(() => void this.flush());
      else this.busy = false;
    }
  }

  private async one(m: Member): Promise<void> {
    try {
      m.done(null, m.alone ? await m.fn(this.pool) : await inTx(this.pool, m.fn, { durable: m.durable }));
    } catch (err) {
      m.done(err);
    }
  }

  private async many(batch: Member[]): Promise<void> {
    let outs: unknown[];
    try {
      outs = await inTx(
        this.pool,
        async (c) => {
          const got: unknown[] = [];
          for (const m of batch) got.push(await m.fn(c));
          return got;
        },
        { durable: batch.some((m) => m.durable) },
      );
    } catch {
      // Rolled back: nothing of the group was written. Each move alone, so one failure is its own caller's.
      await Promise.all(batch.map((m) => this.one(m)));
      return;
    }
    batch.forEach((m, i) => m.done(null, outs[i]));
  }
}
