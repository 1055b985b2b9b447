import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { Store } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

// A heartbeat that fires while the connection is busy (a read cursor held open across awaits, as the
// report pass does for its rows) must not mark the lease lost: only a beat that finds another holder may.
describe('lease heartbeat while the connection is busy', () => {
  let store: Store | null = null;
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    store?.close();
    store = null;
    for (const c of cleanups.splice(0)) c();
  });
  const tmpDir = (prefix: string): string => {
    const t = tempDir(prefix);
    cleanups.push(t.cleanup);
    return t.dir;
  };

  it('skips a beat on a busy connection and beats again afterwards', async () => {
    const dir = tmpDir('genbatch-lease-busy-');
    store = Store.openForWrite(join(dir, 'state.db'), { heartbeatMs: 20 });
    const before = (store.db.prepare('SELECT heartbeat FROM lease WHERE id = 1').get() as { heartbeat: number }).heartbeat;
    const cursor = store.db.prepare('SELECT name FROM sqlite_master').iterate();
    cursor.next();
    await new Promise((r) => setTimeout(r, 120)); // several beats while the cursor is open
    cursor.return?.();
    expect(store.leaseLost).toBe(false);
    await new Promise((r) => setTimeout(r, 80));
    const after = (store.db.prepare('SELECT heartbeat FROM lease WHERE id = 1').get() as { heartbeat: number }).heartbeat;
    expect(after).toBeGreaterThan(before);
    expect(store.leaseLost).toBe(false);
  });

  it('still marks the lease lost when another holder took it', async () => {
    const dir = tmpDir('genbatch-lease-busy-');
    store = Store.openForWrite(join(dir, 'state.db'), { heartbeatMs: 20 });
    store.db.prepare("UPDATE lease SET token = 'someone-else' WHERE id = 1").run();
    await new Promise((r) => setTimeout(r, 80));
    expect(store.leaseLost).toBe(true);
  });
});
