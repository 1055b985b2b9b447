import { createHash } from 'node:crypto';
import pg from 'pg';
import { StateError } from '../../errors.js';
import { displayUrl } from '../location.js';

/**
 * The connection pool of a PostgreSQL state and one transaction helper.
 * BIGINT columns (seq, sizes, expires_at in ms, lease_epoch) are read as
 * numbers, as SQLite gives them (pg's default is a string); the pool's own
 * type parsers, so other users of `pg` in the process are not affected.
 */
export type Pool = pg.Pool;
export type Client = pg.PoolClient;
/** A pool or a client inside a transaction: anything that runs one query. */
export type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

const INT8 = 20;
const NUMERIC = 1700;

const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8 || oid === NUMERIC) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

/**
 * `idleInTransactionMs`: the server ends a session left idle inside a transaction this long (a worker's, with
 * the lease: idleInTransactionMs()): a worker paused mid-transaction (SIGSTOP, a suspended VM) would otherwise
 * keep its row locks, and every other worker's FOR UPDATE SKIP LOCKED would pass over those jobs for as long
 * as it sleeps, past its lease.
 */
export function openPool(url: string, opts: { max?: number; idleInTransactionMs?: number } = {}): Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.max ?? 10,
    types,
    // Statements asked for on one connection before the answer to the previous one are sent at once
    // (inPipelinedTx: a group of moves in one round trip); used one statement after another, as everywhere
    // else, a connection behaves exactly as without it.
    pipeline: true,
    application_name: 'genbatch',
    ...(opts.idleInTransactionMs ? { idle_in_transaction_session_timeout: opts.idleInTransactionMs } : {}),
  });
  // An idle client losing its connection (server restart) emits 'error' on the pool: without a listener the
  // process would exit. The next query gets a new connection or reports the failure itself.
  pool.on('error', () => undefined);
  return pool;
}

/** A worker's idle-in-transaction limit for a lease: half of it, at least 5 s (a live worker short of CPU is not cut off). */
export function idleInTransactionMs(leaseMs: number): number {
  return Math.max(5_000, Math.floor(leaseMs / 2));
}

/**
 * Values written into a simple query (one that carries several statements, which takes no parameters): text
 * through pg's escaping, numbers only when finite (an integer as one, so a key's index serves a comparison).
 */
export const sqlText = (s: string): string => pg.escapeLiteral(s);
export function sqlNumber(n: number): string {
  if (!Number.isFinite(n)) throw new RangeError(`not a finite number: ${n}`);
  return `${n}::float8`;
}
export function sqlInteger(n: number): string {
  if (!Number.isSafeInteger(n)) throw new RangeError(`not an integer: ${n}`);
  return String(n);
}

const names = new Map<string, string>();

/**
 * A statement the server prepares once per connection (named by its text) and then only binds and runs:
 * the hot statements of a worker (claims, moves, file rows), whose parse and plan cost more server CPU
 * than their execution.
 */
export function named(text: string, values: unknown[]): pg.QueryConfig {
  let name = names.get(text);
  if (name === undefined) {
    name = `gb_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
    names.set(text, name);
  }
  return { name, text, values };
}

const begin = (o: { durable?: boolean }): string => (o.durable === false ? 'BEGIN; SET LOCAL synchronous_commit = off' : 'BEGIN');

/**
 * fn inside BEGIN ... COMMIT on one client; ROLLBACK and rethrow on a throw. `durable: false`: the COMMIT
 * does not wait for the WAL to reach the disk (synchronous_commit off for this transaction: a server crash
 * may lose the last fraction of a second of such commits, never a client's crash), as the SQLite state's
 * synchronous=NORMAL commits; the submit intent and the task id are durable.
 */
export function inTx<T>(pool: Pool, fn: (c: Client) => Promise<T>, o: { durable?: boolean } = {}): Promise<T> {
  return transaction(pool, async (c, commit) => {
    await c.query(begin(o));
    const out = await fn(c);
    await commit();
    return out;
  });
}

/**
 * Like inTx for `fns` that only write rows no other of them touches (each its own job): BEGIN and every fn's
 * statements are sent without waiting for each answer (the connection's pipeline), and COMMIT once all of them
 * answered, so the group costs two round trips instead of one per statement. Answers each fn's result in
 * order. When any fn throws, nothing is committed (ROLLBACK) and the first error is thrown.
 */
export function inPipelinedTx(pool: Pool, fns: ReadonlyArray<(c: Client) => Promise<unknown>>, o: { durable?: boolean } = {}): Promise<unknown[]> {
  return transaction(pool, async (c, commit) => {
    // The group's messages leave in one write: the socket is corked while BEGIN and each fn's first statement
    // are queued (each fn called now, in order; one that throws at once is a rejection like any).
    const stream = streamOf(c);
    stream?.cork();
    let sent: Array<Promise<unknown>>;
    try {
      sent = [c.query(begin(o)), ...fns.map(async (fn) => fn(c))];
    } finally {
      stream?.uncork();
    }
    const outs = await Promise.allSettled(sent);
    const failed = outs.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    // A transaction a statement failed in answers COMMIT with ROLLBACK; none failed here, so this commits.
    const end = await commit();
    if (end.command !== 'COMMIT') throw new Error(`the group's transaction ended with ${end.command}, not COMMIT`);
    return outs.slice(1).map((r) => (r as PromiseFulfilledResult<unknown>).value);
  });
}

/**
 * `body` makes one transaction on a client of the pool, sending its COMMIT through `commit()`; ROLLBACK and
 * rethrow on a throw. The session may end under the transaction (the server's idle-in-transaction limit after
 * a pause, a restart): the client then emits 'error', which without a listener ends the process; the query
 * fails with it, and the client is discarded, not given back to the pool. Nothing was committed then (the
 * COMMIT was not sent): the transaction is made once more on a new connection.
 */
async function transaction<T>(pool: Pool, body: (c: Client, commit: () => Promise<pg.QueryResult>) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const c = await pool.connect();
    let broken: Error | undefined;
    let committing = false;
    const onError = (err: Error) => (broken = err);
    c.on('error', onError);
    const commit = () => {
      // Ended after the last answer came (paused between it and the COMMIT: the answer and the server's end of
      // the session are read together on waking): the COMMIT is never sent, so nothing was committed either.
      if (broken) throw broken;
      committing = true;
      return c.query('COMMIT');
    };
    try {
      return await body(c, commit);
    } catch (err) {
      if (broken && !committing && attempt === 1) continue;
      await c.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      c.off('error', onError);
      c.release(broken);
    }
  }
}

/** The socket under a client (pg's connection stream), where it has one that can be corked. */
function streamOf(c: Client): { cork(): void; uncork(): void } | null {
  const stream = (c as unknown as { connection?: { stream?: { cork?: unknown; uncork?: unknown } } }).connection?.stream;
  return stream && typeof stream.cork === 'function' && typeof stream.uncork === 'function' ? (stream as { cork(): void; uncork(): void }) : null;
}

/** A StateError about the PostgreSQL state at `url`, naming it without its password (displayUrl). */
export function stateError(url: string, err: unknown): StateError {
  return new StateError(`PostgreSQL state ${displayUrl(url)}: ${err instanceof Error ? err.message : String(err)}`);
}
