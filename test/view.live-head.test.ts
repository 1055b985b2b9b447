import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { Store } from '../src/store/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess, type ViewProcess } from './helpers/view.js';

/**
 * The view's header follows the run (no browser): every poll that sees a change carries `head` (time, credits,
 * files, invocations, notes), and an invocation whose run still holds the state file's lease is "running",
 * not "has no closing balance reading". The lease is held here through Store.openForWrite, as a run holds it.
 */
const KEY = 'sk-view-live-head-0123456789abcdef';
let sb: Sandbox;
let view: ViewProcess;
let out: string;
let m: string;
const cleanups: Array<() => void> = [];

type Head = { time: { running: boolean }; credits: string; files: string; invocations: Array<[number, string, string]>; notes: string[] };
/** The header of the next full answer: a poll soon after the last full one may get none yet (src/view/live.ts paces them), so ask again. */
const poll = async (): Promise<Head> => {
  for (let i = 0; ; i++) {
    const r = await rawRequest(view.port, '/api/jobs?since=&gen=0', { headers: { 'x-genbatch-token': view.token } });
    expect(r.status).toBe(200);
    const head = (JSON.parse(r.body) as { head?: Head }).head;
    if (head !== undefined) return head;
    expect(i, 'a full answer within 10 s').toBeLessThan(200);
    await new Promise((res) => setTimeout(res, 50));
  }
};

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.001, seed: 4 });
  const t = tempDir('genbatch-view-head-');
  cleanups.push(t.cleanup);
  out = join(t.dir, 'out');
  m = imageManifest(join(t.dir, 'm.yaml'), 2);
  expect((await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.001', '--out', out], { GENBATCH_API_KEY: KEY })).code).toBe(0);
  view = await startViewProcess(['--out', out]);
}, 60_000);
afterAll(async () => {
  await view?.stop();
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

it('sends the header again after a run in another process: files, credits and invocations follow it', async () => {
  const before = await poll();
  expect(before.files).toMatch(/^2 \(/);
  expect(before.invocations).toHaveLength(1);
  imageManifest(m, 5);
  expect((await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.001', '--out', out], { GENBATCH_API_KEY: KEY })).code).toBe(0);
  const after = await poll();
  expect(after.files).toMatch(/^5 \(/);
  expect(after.invocations.map((i) => i[0])).toEqual([1, 2]);
  expect(after.credits).toContain('over 2 invocations');
  expect(after.time.running).toBe(false);
});

it('says an invocation is running while its run holds the lease, and has no closing reading once the holder is gone', async () => {
  const store = Store.openForWrite(join(out, 'state.db'));
  let open = true;
  try {
    store.useRun(store.runs()[0]!);
    const n = store.startInvocation(1000, new Date().toISOString());
    const running = await poll();
    expect(running.time.running).toBe(true);
    expect(running.notes.join('\n')).toContain(`Invocation ${n} is running`);
    expect(running.notes.join('\n')).not.toContain('no closing balance reading');
    expect(running.invocations.at(-1)![2]).toContain('not yet (running)');
    const page = await rawRequest(view.port, '/', { headers: { 'x-genbatch-token': view.token } });
    expect(page.body).not.toContain('no closing balance reading');
    expect(page.body).toContain(`Invocation ${n} is running`);
    store.close();
    open = false;
    // The holder is gone (as after a kill): now the note is the true one.
    const stopped = await poll();
    expect(stopped.time.running).toBe(false);
    expect(stopped.notes.join('\n')).toContain(`Invocation ${n} has no closing balance reading`);
  } finally {
    if (open) store.close();
  }
});
