import type Database from 'better-sqlite3';
import { StateError } from '../errors.js';
import type { Prepare } from './reads.js';
import { WalSync } from './wal-sync.js';

/**
 * What Store and its queries (queries.ts) share: the open state file, its
 * cached statements, its transactions, and the run in use (id, sync
 * generation, last sequence number, the invocation this process sends as).
 * Store holds one and hands it to StoreQueries; nothing outside src/store sees it.
 */
export class StoreConn {
  /** The run in use (openRun/useRun); 0: none yet. */
  runId = 0;
  generation = 0;
  /** The largest sequence number of the run's jobs (a new job takes the next). */
  seq = 0;
  /** The invocation this process started (startInvocation): a job it sends records it (jobs.sent_by); null: none. */
  sendingInvocation: number | null = null;
  private readonly stmts = new Map<string, Database.Statement>();
  /** Statements in raw mode (rows as arrays, turned into objects by reads.ts and files.ts). */
  private readonly rawStmts = new Map<string, Database.Statement>();
  /** BEGIN, BEGIN IMMEDIATE, COMMIT, ROLLBACK: prepared once (see tx). */
  private txStmts: { begin: Database.Statement; immediate: Database.Statement; commit: Database.Statement; rollback: Database.Statement } | null = null;
  private wal: WalSync | null | undefined;
  /** stmt() for the query modules (reads.ts, files.ts, sync.ts). */
  readonly cached: Prepare = (sql) => this.stmt(sql);
  /** rawStmt() for the query modules. */
  readonly cachedRaw: Prepare = (sql) => this.rawStmt(sql);

  /** Inserts, updates and deletes of `jobs` and `files` rows made through this connection (counted by temporary triggers, see rowsStamp). */
  private rowWrites = 0;
  /** PRAGMA data_version (changes when another connection commits); undefined until rowsStamp first runs, null when the rows cannot be watched. */
  private dataVersion: Database.Statement | null | undefined;

  constructor(
    readonly db: Database.Database,
    readonly path: string,
  ) {}

  /**
   * A stamp of the `jobs` and `files` tables: equal stamps mean no row of either changed in between, through this
   * connection (any statement: temporary triggers count every insert, update and delete, also one rolled back) or
   * another one (its commit changes data_version). Lets a read of every job (a count) be kept until the rows
   * change. Null: the tables cannot be watched (a file without them; temporary triggers refused): nothing is kept.
   */
  rowsStamp(): { writes: number; data: number } | null {
    if (this.dataVersion === undefined) this.dataVersion = this.watchRows();
    if (this.dataVersion === null) return null;
    return { writes: this.rowWrites, data: this.dataVersion.get() as number };
  }

  private watchRows(): Database.Statement | null {
    try {
      this.db.function('genbatch_row_written', { deterministic: false }, () => {
        this.rowWrites++;
        return null;
      });
      for (const table of ['jobs', 'files']) {
        for (const event of ['INSERT', 'UPDATE', 'DELETE']) {
          this.db.exec(`CREATE TEMP TRIGGER IF NOT EXISTS genbatch_${table}_${event.toLowerCase()} AFTER ${event} ON main.${table} BEGIN SELECT genbatch_row_written(); END`);
        }
      }
      return this.db.prepare('PRAGMA data_version').pluck();
    } catch {
      return null;
    }
  }

  stmt(sql: string): Database.Statement {
    let s = this.stmts.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.stmts.set(sql, s);
    }
    return s;
  }

  rawStmt(sql: string): Database.Statement {
    let s = this.rawStmts.get(sql);
    if (!s) {
      s = this.db.prepare(sql).raw(true);
      this.rawStmts.set(sql, s);
    }
    return s;
  }

  /**
   * fn in one transaction, as better-sqlite3's db.transaction(fn)() (or its
   * .immediate()) runs it, without building the four wrapper functions that
   * db.transaction makes on every call: BEGIN, fn, COMMIT; on a throw, ROLLBACK
   * (when SQLite has not already ended the transaction) and the error again.
   * Inside an open transaction: db.transaction itself (a savepoint), as before.
   */
  tx<T>(fn: () => T, immediate: boolean): T {
    if (this.db.inTransaction) return immediate ? this.db.transaction(fn).immediate() : this.db.transaction(fn)();
    const t = (this.txStmts ??= {
      begin: this.db.prepare('BEGIN'),
      immediate: this.db.prepare('BEGIN IMMEDIATE'),
      commit: this.db.prepare('COMMIT'),
      rollback: this.db.prepare('ROLLBACK'),
    });
    (immediate ? t.immediate : t.begin).run();
    try {
      const result = fn();
      if (result && typeof (result as { then?: unknown }).then === 'function') throw new TypeError('Transaction function cannot return a promise');
      t.commit.run();
      return result;
    } catch (err) {
      if (this.db.inTransaction) t.rollback.run();
      throw err;
    }
  }

  /** True when the state file is in WAL mode (then commitNormal + syncWal can replace durable). */
  get walMode(): boolean {
    if (this.wal === undefined) {
      const mode = String(this.db.pragma('journal_mode', { simple: true })).toLowerCase();
      this.wal = mode === 'wal' ? new WalSync(this.path + '-wal') : null;
    }
    return this.wal !== null;
  }

  /** fsync the WAL on the thread pool (see Store.syncWal). */
  async syncWal(): Promise<void> {
    if (!this.walMode || !this.wal) throw new StateError('syncWal: the state file is not in WAL mode');
    await this.wal.sync();
  }

  /** fn in one transaction committed with synchronous=FULL (fsynced before returning). */
  durable<T>(fn: () => T): T {
    this.db.pragma('synchronous = FULL');
    try {
      return this.tx(fn, true);
    } finally {
      this.db.pragma('synchronous = NORMAL');
    }
  }

  /** Close the WAL's descriptors (after the database is closed). */
  closeWal(): void {
    this.wal?.close();
  }
}
