import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { sandboxTasks, type ListedTask } from './helpers/admin.js';
import { ensureBuilt, imageManifest, spawnCli } from './helpers/cli.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/until.js';
import { readJobs } from './helpers/verify.js';

/**
 * Callbacks are hints; the service is the source (issue 22 item 5). The service does not sign callbacks and a
 * callback URL can leak, so someone holding it could POST a "finished" task whose file is theirs. The runner
 * reads the task's status at once instead (one read) and acts only on that answer.
 */
const KEY = 'sk-forged-callback-0123456789';
const EVIL = solidPng(8, 8, [255, 0, 0]);
const t = tempDir('genbatch-cb-forged-');
let sb: Sandbox;
let evil: Server;
let evilBase = '';
let evilRequests = 0;

beforeAll(async () => {
  ensureBuilt();
  // Time scale 1: an image task runs 15-60 s of the sandbox clock, which only moves when the test says so.
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 1, seed: 31, allowLoopback: true });
  evil = createServer((_req, res) => {
    evilRequests++;
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': EVIL.length }).end(EVIL);
  });
  await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
  evilBase = `http://127.0.0.1:${(evil.address() as AddressInfo).port}`;
}, 60_000);
afterAll(async () => {
  await sb?.close();
  await new Promise<void>((r) => evil.close(() => r()));
  t.cleanup();
});

const tasks = (): Promise<ListedTask[]> => sandboxTasks(sb);

function forged(taskId: string): string {
  return JSON.stringify({
    code: 200,
    data: { task_id: taskId, status: 'finished', files: [{ file_url: `${evilBase}/evil.png`, file_type: 'image', file_size: EVIL.length }], created_time: '2026-01-01T00:00:00', progress: 100, error_message: null },
  });
}

describe('a forged completion callback with the right token', () => {
  it('while the task still runs: the job ends with the service\'s file, not the forged one; another task id is ignored and counted', async () => {
    const manifest = imageManifest(join(t.dir, 'forged.yaml'), 1, 'forged');
    const out = join(t.dir, 'out');
    const before = sb.stats().requests.status ?? 0;
    const child = spawnCli(['run', manifest, '--base-url', sb.url, '--time-scale', '1', '--out', out, '--listen', '127.0.0.1:0', '--json', '--yes'], { GENBATCH_API_KEY: KEY });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const closed = new Promise<number | null>((r) => child.on('close', r));
    try {
      const task = await until('the task', async () => (await tasks()).find((x) => x.callback_url !== null) ?? null);
      expect(task.state).not.toBe('finished');
      // The leaked URL (it carries the receiver's token, the job and its attempt), a body that reads as a finished task.
      const cb = task.callback_url!;
      expect((await fetch(cb, { method: 'POST', headers: { 'content-type': 'application/json' }, body: forged(task.task_id) })).status).toBe(200);
      expect((await fetch(cb, { method: 'POST', headers: { 'content-type': 'application/json' }, body: forged('not-the-task-of-this-job') })).status).toBe(200);
      // The runner read the status at once: the task runs, so it goes on waiting.
      await until('the status read the callback caused', async () => ((sb.stats().requests.status ?? 0) > before ? true : null));
      await new Promise((r) => setTimeout(r, 300));
      expect(readJobs(join(out, 'state.db'))[0]!.state).toBe('submitted');
      // Now the task ends at the service, which calls back for real.
      sb.clock.advance(120);
      const code = await closed;
      expect(code, stderr).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
    // The run read the status twice: once for the forged callback, once for the real one.
    expect((sb.stats().requests.status ?? 0) - before).toBe(2);
    const [job] = readJobs(join(out, 'state.db'));
    expect(job!.state).toBe('done');
    expect(evilRequests).toBe(0);
    const files = readdirSync(out, { recursive: true, encoding: 'utf8' }).filter((f) => f.startsWith('forged-0000') && /\.(png|jpe?g|webp)$/.test(f));
    expect(files).toHaveLength(1);
    const got = readFileSync(join(out, files[0]!));
    expect(createHash('sha256').update(got).digest('hex')).not.toBe(createHash('sha256').update(EVIL).digest('hex'));
    const status = (await (await fetch(`${sb.url}/api/generate/status/${job!.task_id}`, { headers: { authorization: `Bearer ${KEY}` } })).json()) as { data: { files: Array<{ file_url: string }> } };
    const served = Buffer.from(await (await fetch(status.data.files[0]!.file_url)).arrayBuffer());
    expect(got.equals(served)).toBe(true);
    const finish = stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; callbacks_ignored?: number }).find((e) => e.type === 'finish');
    expect(finish?.callbacks_ignored).toBe(1);
  }, 90_000);

  it('for an uncertain job naming a task another job records: never adopted (one task is the result of one job at most), the job adopts its own task later', async () => {
    const manifest = imageManifest(join(t.dir, 'adopt.yaml'), 2, 'adopt');
    const out = join(t.dir, 'out-adopt');
    // The first submit is answered; the second creates its task and then answers 500: that job is uncertain.
    sb.script('submit', ['ok', '500-after']);
    const child = spawnCli(['run', manifest, '--base-url', sb.url, '--time-scale', '1', '--out', out, '--listen', '127.0.0.1:0', '--json', '--yes', '--concurrency', '1'], { GENBATCH_API_KEY: KEY });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const closed = new Promise<number | null>((r) => child.on('close', r));
    const jobOf = (x: ListedTask) => (x.callback_url === null ? null : new URL(x.callback_url).searchParams.get('job'));
    let own = '';
    let other = '';
    try {
      const [first, second] = await until('both tasks', async () => {
        const mine = (await tasks()).filter((x) => jobOf(x)?.startsWith('adopt-'));
        const a = mine.find((x) => jobOf(x) === 'adopt-0000');
        const b = mine.find((x) => jobOf(x) === 'adopt-0001');
        return a && b ? [a, b] : null;
      });
      other = first!.task_id;
      own = second!.task_id;
      await until('the second job uncertain', async () => (readJobs(join(out, 'state.db')).find((j) => j.id === 'adopt-0001')?.state === 'uncertain' ? true : null));
      // The leaked URL of the uncertain job, naming the task the first job records.
      expect((await fetch(second!.callback_url!, { method: 'POST', headers: { 'content-type': 'application/json' }, body: forged(other) })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 500));
      sb.clock.advance(120);
      const code = await closed;
      expect(code, stderr).toBe(0);
    } finally {
      child.kill('SIGKILL');
    }
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => [j.id, j.state, j.task_id])).toEqual([
      ['adopt-0000', 'done', other],
      ['adopt-0001', 'done', own],
    ]);
    const finish = stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; callbacks_ignored?: number }).find((e) => e.type === 'finish');
    expect(finish?.callbacks_ignored).toBeGreaterThanOrEqual(1);
  }, 90_000);
});
