import { afterEach, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { Store, pidAlive } from '../src/store/index.js';
import { removeStaleTemps } from '../src/report/atomic.js';
import { tempDir } from './helpers/tmp.js';

// A runner killed with SIGKILL stays a zombie until its parent reaps it (a shell script that has not
// waited yet, a supervisor, an init that reaps late), and kill(pid, 0) succeeds on a zombie. The next
// run must still take the lease over at once, and a report temp of that pid is stale.
const linux = process.platform === 'linux';

/** A zombie: `sh` starts a short child, then becomes `sleep`, which never reaps it. */
async function makeZombie(): Promise<{ pid: number; parent: ChildProcess }> {
  const parent = spawn('sh', ['-c', 'sleep 0.1 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
  const pid = await new Promise<number>((resolve, reject) => {
    parent.stdout!.once('data', (d: Buffer) => resolve(Number(String(d).trim())));
    parent.once('error', reject);
  });
  for (let i = 0; i < 200; i++) {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    if (stat.charAt(stat.lastIndexOf(')') + 2) === 'Z') return { pid, parent };
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`pid ${pid} did not become a zombie`);
}

describe.runIf(linux)('a holder that is only a zombie', () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });

  it('counts as dead: pidAlive is false, while kill(pid, 0) still succeeds', async () => {
    const { pid, parent } = await makeZombie();
    cleanups.push(() => parent.kill('SIGKILL'));
    expect(() => process.kill(pid, 0)).not.toThrow();
    expect(pidAlive(pid)).toBe(false);
    expect(pidAlive(process.pid)).toBe(true);
    expect(pidAlive(parent.pid!)).toBe(true);
    expect(pidAlive(0)).toBe(false);
    expect(pidAlive(-1)).toBe(false);
  });

  it('loses the lease to the next run at once, with a fresh heartbeat', async () => {
    const { pid, parent } = await makeZombie();
    cleanups.push(() => parent.kill('SIGKILL'));
    const t = tempDir('genbatch-lease-zombie-');
    cleanups.push(t.cleanup);
    const path = join(t.dir, 'state.db');
    const first = Store.openForWrite(path);
    first.db.prepare('UPDATE lease SET pid = ?, hostname = ?, heartbeat = ? WHERE id = 1').run(pid, hostname(), Date.now());
    first.db.close(); // as a SIGKILL leaves it: the lease row stays
    const second = Store.openForWrite(path);
    cleanups.push(() => second.close());
    const row = second.db.prepare('SELECT pid FROM lease WHERE id = 1').get() as { pid: number };
    expect(row.pid).toBe(process.pid);
  });

  it("removes a zombie's report temp files", async () => {
    const { pid, parent } = await makeZombie();
    cleanups.push(() => parent.kill('SIGKILL'));
    const t = tempDir('genbatch-lease-zombie-');
    cleanups.push(t.cleanup);
    const stale = `.report.json.${pid}.0a1b.tmp`;
    const live = `.report.json.${parent.pid}.0a1b.tmp`;
    writeFileSync(join(t.dir, stale), 'x');
    writeFileSync(join(t.dir, live), 'x');
    expect(await removeStaleTemps(t.dir)).toEqual([stale]);
  });
});
