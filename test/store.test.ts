import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { StateError, TransitionError } from '../src/errors.js';
import { Store, isJobState, type JobInput } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function fresh(): { store: Store; path: string; dir: string } {
  const t = tempDir();
  const path = join(t.dir, 'state.db');
  const store = Store.openForWrite(path);
  cleanups.push(t.cleanup);
  cleanups.push(() => store.close());
  store.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', true, false);
  return { store, path, dir: t.dir };
}

const job = (id: string, hash = 'h1'): JobInput => ({ id, model: 'm', kind: 'submit', where: 'm.yaml:1', specHash: hash, spec: '{}', estimatedCredits: 2 });

describe('store', () => {
  it('guards every transition by the state it leaves', () => {
    const { store } = fresh();
    store.syncJob(job('a'));
    store.transition('a', 'pending', 'submitting', { attemptsInc: 1 });
    expect(() => store.transition('a', 'pending', 'submitting')).toThrow(TransitionError);
    expect(() => store.transition('a', 'submitting', 'downloading')).toThrow(/not an allowed state change/);
    store.transition('a', 'submitting', 'submitted', { task_id: 't1' });
    const row = store.getJob('a')!;
    expect(row.state).toBe('submitted');
    expect(row.task_id).toBe('t1');
    expect(row.attempts).toBe(1);
    expect(() => store.transition('missing', 'pending', 'submitting')).toThrow(/no such job/);
  });

  it('resumes: unchanged jobs kept, changed finished jobs back to pending, crash after intent -> uncertain', () => {
    const { store, path, dir } = fresh();
    store.syncJob(job('a'));
    store.syncJob(job('b'));
    store.syncJob(job('c'));
    store.transition('a', 'pending', 'failed', { last_error: 'x' });
    store.transition('b', 'pending', 'submitting');
    store.close();

    const again = Store.openForWrite(path);
    cleanups.push(() => again.close());
    again.openRun(join(dir, 'm.yaml'), dir, 'http://x', true, false);
    again.beginSync();
    expect(again.syncJob(job('a', 'h2'))).toBe('changed');
    expect(again.syncJob(job('b'))).toBe('unchanged');
    expect(again.syncJob(job('d'))).toBe('new');
    again.commitSync();
    expect(again.skipRemoved()).toBe(1); // c (pending) was dropped from the manifest
    expect(again.recoverSubmitting()).toEqual(['b']);
    expect(again.getJob('a')!.state).toBe('pending');
    expect(again.getJob('b')!.state).toBe('uncertain');
    expect(again.getJob('c')!.state).toBe('skipped');
    expect(again.counts()).toMatchObject({ pending: 2, uncertain: 1, skipped: 1 });
  });

  it('a changed spec sends a finished job again (done, failed, expired, skipped, exists) and never one in flight (submitted, downloading)', () => {
    const { store } = fresh();
    const ends = ['done', 'failed', 'expired', 'skipped', 'exists', 'submitted', 'downloading'] as const;
    for (const st of ends) {
      store.syncJob(job(st));
      store.db.prepare('UPDATE jobs SET state = ? WHERE id = ?').run(st, st);
    }
    store.beginSync();
    const outcome = Object.fromEntries(ends.map((st) => [st, store.syncJob(job(st, 'h2'))]));
    store.commitSync();
    const now = Object.fromEntries(ends.map((st) => [st, store.getJob(st)!.state]));
    expect(now).toEqual({ done: 'pending', failed: 'pending', expired: 'pending', skipped: 'pending', exists: 'pending', submitted: 'submitted', downloading: 'downloading' });
    expect(outcome.done).toBe('changed');
    expect(outcome.submitted).not.toBe('changed');
  });

  it('knows the ten job states by name and nothing else', () => {
    for (const st of ['pending', 'submitting', 'submitted', 'downloading', 'done', 'failed', 'uncertain', 'expired', 'skipped', 'exists']) expect(isJobState(st)).toBe(true);
    for (const st of ['', 'Done', 'running', 'pending ']) expect(isJobState(st)).toBe(false);
  });

  it('refuses a live lease holder and takes over a dead one', () => {
    const { store, path } = fresh();
    expect(() => Store.openForWrite(path)).toThrow(StateError);
    store.close();
    // A holder whose pid is dead: a child process that exited.
    const child = spawnSync(process.execPath, ['-e', 'process.exit(0)']);
    const deadPid = child.pid!;
    const db = new Database(path);
    // close() released the lease; plant one held by the dead pid with a fresh heartbeat.
    db.prepare(`INSERT INTO lease (id, pid, hostname, token, heartbeat) VALUES (1, ?, ?, 'x', ?)`).run(deadPid, hostname(), Date.now());
    db.close();
    const next = Store.openForWrite(path);
    cleanups.push(() => next.close());
    expect(next.leaseTakenOverFrom).toContain(`pid ${deadPid}`);
  });

  it('reuses an upload by content hash, on the same service, while it is young enough', () => {
    const { store } = fresh();
    expect(store.findUpload('https://svc', 'abc', 1000)).toBeNull();
    store.recordUpload('https://svc', 'abc', 'https://u/1.png');
    expect(store.findUpload('https://svc', 'abc', 60_000)).toBe('https://u/1.png');
    expect(store.findUpload('https://svc', 'abc', -1)).toBeNull();
    expect(store.findUpload('https://other', 'abc', 60_000)).toBeNull();
  });
});
