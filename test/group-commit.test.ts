import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { GroupCommit } from '../src/store/group-commit.js';
import { Store } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

const t = tempDir('genbatch-group-');
afterAll(() => t.cleanup());

describe('group commit (WAL fsynced on the thread pool)', () => {
  it('commits every fn, groups the ones made while a sync runs, and rejects only a failing fn', async () => {
    const store = Store.openForWrite(join(t.dir, 'state.db'));
    try {
      expect(store.walMode).toBe(true);
      store.db.exec('CREATE TABLE t (k TEXT PRIMARY KEY)');
      const g = new GroupCommit(store);
      const ins = (k: string) => () => void store.db.prepare('INSERT INTO t (k) VALUES (?)').run(k);
      const first = [g.commit(ins('a')), g.commit(ins('b'))];
      // Made while the first group is being synced: they wait for it, then go together.
      await new Promise((r) => setImmediate(r));
      const second = [g.commit(ins('c')), g.commit(ins('a')), g.commit(ins('d'))];
      const results = await Promise.allSettled([...first, ...second]);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
      expect((store.db.prepare('SELECT k FROM t ORDER BY k').all() as { k: string }[]).map((r) => r.k)).toEqual(['a', 'b', 'c', 'd']);
      await store.syncWal();
    } finally {
      store.close();
    }
    // Reopened: everything committed is there.
    const again = Store.openForRead(join(t.dir, 'state.db'));
    try {
      expect(again.db.prepare('SELECT COUNT(*) AS n FROM t').get()).toEqual({ n: 4 });
    } finally {
      again.close();
    }
  });
});
