import { inPipelinedTx, inTx, type Pool, type Queryable } from './db.js';

/** The most moves one transaction carries (each holds its job row's lock until the group's COMMIT). */
export const GROUP_MAX = 64;

interface Member {
  fn: (q: Queryable) => Promise<unknown>;
  durable: boolean;
  /** One statement that may run outside a transaction (its own commit) when the group is this move alone. */
  alone: boolean;
  /** Its statements write only its own job's rows (no graph, budget or error history): it may run beside the group's others. */
  own: boolean;
  done: (err: unknown, out?: unknown) => void;
}

/**
 * A worker's job moves, grouped as the SQLite state's GroupCommit groups its commits: the moves asked for while
 * the previous group is being committed (or in the same turn of the event loop) run one after another in one
 * transaction on one connection, with one COMMIT: one BEGIN, one COMMIT and one WAL flush for the group instead
 * of one per move. Each promise settles after the COMMIT, so the submit intent is still committed before its
 * POST; a durable move makes its group's COMMIT wait for the disk.
 *
 * Moves that write only their own job's rows (most of them: the submit intent, the task id, a result with its
 * file rows, done) are sent together on the connection's pipeline, BEGIN first and COMMIT after all answered:
 * the group costs two round trips, not one per move. A group with any other move (graph effects, the budget,
 * an error history) runs its moves one after another, in the order asked.
 *
 * Moves of their own jobs that need not wait for the disk (a result with its file rows, done) have a lane of their
 * own: their groups commit while a durable group waits for its WAL flush, not after it.
 *
 * One failing move does not undo the others: when a move throws (a job not in the state asked for, a deadlock,
 * a lost connection) the group's transaction is rolled back and each of its moves is made again alone, in its
 * own transaction, so each caller gets what that move alone gives. A group of one move is made as before: its
 * own transaction, or a single statement when it is one.
 */
export class MoveGroup {
  /** Moves that make their COMMIT wait for the disk, and any move that is not its job's own. */
  private readonly main: Lane;
  /**
   * Moves of their own job's rows that need not wait for the disk (a result and its file rows, done): their own
   * groups, on their own connection, so they never wait behind a group's WAL flush. A job's next move is asked for
   * only once its last one settled, so the two lanes write different jobs' rows; where they meet on a row the row
   * lock orders them (a deadlock rolls one group back, and its moves are made again alone).
   */
  private readonly quick: Lane;

  constructor(pool: Pool) {
    this.main = new Lane(pool);
    this.quick = new Lane(pool);
  }

  run<T>(fn: (q: Queryable) => Promise<T>, o: { durable: boolean; alone: boolean; own?: boolean }): Promise<T> {
    return (o.own === true && !o.durable ? this.quick : this.main).run(fn, o);
  }
}

/** One queue of moves: one group in flight at a time; the moves asked for meanwhile form the next group. */
class Lane {
  private queue: Member[] = [];
  /** A flush is due or running: moves asked for meanwhile wait for it to end and form the next group. */
  private busy = false;

  constructor(private readonly pool: Pool) {}

  run<T>(fn: (q: Queryable) => Promise<T>, o: { durable: boolean; alone: boolean; own?: boolean }): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, durable: o.durable, alone: o.alone, own: o.own === true, done: (err, out) => (err === null ? resolve(out as T) : reject(err)) });
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
    const durable = batch.some((m) => m.durable);
    try {
      // Moves of their own jobs only: sent together (two round trips for the group); else one after another.
      if (batch.every((m) => m.own)) outs = await inPipelinedTx(this.pool, batch.map((m) => m.fn), { durable });
      else
        outs = await inTx(
          this.pool,
          async (c) => {
            const got: unknown[] = [];
            for (const m of batch) got.push(await m.fn(c));
            return got;
          },
          { durable },
        );
    } catch {
      // Rolled back: nothing of the group was written. Each move alone, so one failure is its own caller's.
      await Promise.all(batch.map((m) => this.one(m)));
      return;
    }
    batch.forEach((m, i) => m.done(null, outs[i]));
  }
}
