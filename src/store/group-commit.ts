import type { Store } from './store.js';

/**
 * Durable commits, grouped: every `commit(fn)` made while the previous group
 * is being synced (or in the same turn of the event loop) runs in one
 * transaction with one fsync. The promise settles after the fsync, so a caller
 * that awaits it never sends a POST before its intent is on disk. One failing
 * fn does not undo the others.
 *
 * In WAL mode the transaction is committed under synchronous=NORMAL and the
 * WAL file is then fsynced on the thread pool (Store.syncWal): the same
 * durability as synchronous=FULL, without blocking the event loop during the
 * disk flush. If that fsync fails, the rows are committed but the callers get
 * the error (no POST is sent); a job left `submitting` becomes `uncertain` at
 * the next start, never resubmitted blindly. Otherwise: Store.durable (FULL).
 */
export class GroupCommit {
  private batch: Array<{ fn: () => void; done: (err: unknown) => void }> = [];
  private syncing = false;

  constructor(private readonly store: Store) {}

  commit(fn: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.batch.push({ fn, done: (err) => (err === null ? resolve() : reject(err)) });
      if (this.batch.length === 1 && !this.syncing) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.batch;
    this.batch = [];
    if (batch.length === 0) return;
    const errors = new Map<number, unknown>();
    const all = () =>
      batch.forEach((b, i) => {
        try {
          b.fn();
        } catch (err) {
          errors.set(i, err);
        }
      });
    const wal = this.store.walMode;
    try {
      if (wal) this.store.commitNormal(all);
      else this.store.durable(all);
    } catch (err) {
      for (const b of batch) b.done(err);
      return;
    }
    const settle = (syncError: unknown) => batch.forEach((b, i) => b.done(syncError ?? (errors.has(i) ? errors.get(i) : null)));
    if (!wal) {
      settle(null);
      return;
    }
    this.syncing = true;
    this.store.syncWal().then(
      () => this.synced(settle, null),
      (err: unknown) => this.synced(settle, err ?? new Error('fsync of the WAL failed')),
    );
  }

  private synced(settle: (err: unknown) => void, err: unknown): void {
    this.syncing = false;
    settle(err);
    // Commits that arrived during the fsync form the next group.
    if (this.batch.length > 0) setImmediate(() => this.flush());
  }
}
