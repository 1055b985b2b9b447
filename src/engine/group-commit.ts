import type { Store } from '../store/index.js';

/**
 * Durable commits (synchronous=FULL) grouped per turn of the event loop: every
 * `commit(fn)` made in the same turn runs in one transaction with one fsync.
 * The promise settles after the fsync, so a caller that awaits it never sends
 * a POST before its intent is on disk. One failing fn does not undo the others.
 */
export class GroupCommit {
  private batch: Array<{ fn: () => void; done: (err: unknown) => void }> = [];

  constructor(private readonly store: Store) {}

  commit(fn: () => void): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.batch.push({ fn, done: (err) => (err === null ? resolve() : reject(err)) });
      if (this.batch.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const batch = this.batch;
    this.batch = [];
    const errors = new Map<number, unknown>();
    try {
      this.store.durable(() => {
        batch.forEach((b, i) => {
          try {
            b.fn();
          } catch (err) {
            errors.set(i, err);
          }
        });
      });
    } catch (err) {
      for (const b of batch) b.done(err);
      return;
    }
    batch.forEach((b, i) => b.done(errors.has(i) ? errors.get(i) : null));
  }
}
