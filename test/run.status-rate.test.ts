import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

const KEY = 'sk-status-rate-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-status-rate-');
const clock = (): number => performance.timeOrigin + performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.01, seed: 5 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

/** Status reads (status and music detail) that arrived after `since`, in order of arrival. */
function statusReads(since: number): { at: number; taskId: string }[] {
  return sb
    .requestLog()
    .filter((r) => r.at >= since && (r.endpoint === 'status' || r.endpoint === 'detail'))
    .map((r) => ({ at: r.at, taskId: decodeURIComponent(r.path.split('/').pop()!.replace(/^.*task_id=/, '')) }));
}

describe('run --status-rate', () => {
  it('refuses a value that is not a number > 0, naming the flag (exit 2)', async () => {
    const manifest = imageManifest(join(t.dir, 'flag.yaml'), 1, 'flag');
    for (const bad of ['abc', '0', '-1', '']) {
      const r = await runCli(['run', manifest, '--base-url', sb.url, '--status-rate', bad], { GENBATCH_API_KEY: KEY });
      expect(r.code, bad).toBe(2);
      expect(r.stderr).toContain(`--status-rate expects a number > 0 (status reads per second), got "${bad}"`);
    }
  });

  it('never sends more status reads than the cap allows since the run started (rate / time scale per second)', async () => {
    // 30 images of 0.15-0.6 s at scale 0.01, under 0.1 read per service second = 10 reads per second here: the cap binds
    // (without it, each task would be read every 20-50 ms). A token bucket holding one token allows at most
    // 1 + rate x (t - start) reads by any time t after its start, whatever the load: that is what is checked.
    const manifest = imageManifest(join(t.dir, 'cap.yaml'), 30, 'cap');
    const rate = 0.1 / 0.01;
    const start = clock();
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', '0.01', '--status-rate', '0.1', '--out', join(t.dir, 'cap-out'), '--concurrency', '8', '--json'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    const reads = statusReads(start);
    expect(reads.length).toBeGreaterThanOrEqual(30); // at least one read per task
    reads.forEach((read, i) => expect(i + 1, `read ${i + 1} at ${((read.at - start) / 1000).toFixed(3)} s`).toBeLessThanOrEqual(1 + rate * ((read.at - start) / 1000) + 1e-6));
    // Every wait says what it waits for (issue #23 item 4): 30 tasks due within about a second and 10 reads a
    // second leave the last due ones waiting about 2-3 s for a read, so the rate held the run (a `wait` event
    // naming it, with the flag's value) and let it go before the end (queued 0).
    const waits = r.stdout.split('\n').filter((l) => l.includes('"status-rate"')).map((l) => JSON.parse(l) as { rule: string; queued: number });
    expect(waits.length, r.stdout.slice(0, 2000)).toBeGreaterThanOrEqual(2);
    expect(waits[0]).toMatchObject({ rule: '0.1 a second' });
    expect(waits[0]!.queued).toBeGreaterThan(0);
    expect(waits.at(-1)!.queued).toBe(0);
  }, 60_000);

  it('after a restart, reads first the tasks most likely finished by their model typical time (images past theirs before videos just begun)', async () => {
    // Scale 0.02: alpha-image-2 takes 0.3-1.2 s, motion-1.6 video 1.8-6 s. The first run sends the six jobs and is killed;
    // 1.3 s later every image has finished and no video has; the second run may read once every 0.5 s.
    const lines = ['jobs:'];
    for (let i = 0; i < 3; i++) lines.push(`  - {id: video-${i}, model: motion-1.6/standard, input: {prompt: "Waves ${i}", duration: 5, aspect_ratio: "16:9"}}`);
    for (let i = 0; i < 3; i++) lines.push(`  - {id: image-${i}, model: alpha-image-2, input: {prompt: "Harbour ${i}"}}`);
    const manifest = join(t.dir, 'order.yaml');
    writeFileSync(manifest, lines.join('\n') + '\n');
    const out = join(t.dir, 'order-out');
    const state = join(out, 'state.db');
    const sbSlow = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.02, seed: 6 });
    try {
      const args = ['run', manifest, '--base-url', sbSlow.url, '--time-scale', '0.02', '--out', out, '--concurrency', '6'];
      const first = spawnCli([...args, '--status-rate', '0.0002'], { GENBATCH_API_KEY: KEY });
      const exited = new Promise((r) => first.on('close', r));
      for (;;) {
        await sleep(10);
        let jobs: ReturnType<typeof readJobs> = [];
        try {
          jobs = readJobs(state);
        } catch {
          continue; // not made yet
        }
        if (jobs.length === 6 && jobs.every((j) => j.task_id !== null)) break;
      }
      first.kill('SIGKILL');
      await exited;
      await sleep(1300);
      const jobs = readJobs(state);
      const byTask = new Map(jobs.map((j) => [j.task_id!, j.id]));
      const imagesWaited = jobs.filter((j) => j.id.startsWith('image') && j.state === 'submitted').length;
      expect(imagesWaited).toBeGreaterThan(0);
      const since = performance.timeOrigin + performance.now();
      const r = await runCli([...args, '--status-rate', '0.04'], { GENBATCH_API_KEY: KEY });
      expect(r.code, r.stderr).toBe(0);
      const order = sbSlow
        .requestLog()
        .filter((q) => q.at >= since && q.endpoint === 'status')
        .map((q) => byTask.get(decodeURIComponent(q.path.split('/').pop()!)));
      expect(order.slice(0, imagesWaited).every((id) => id?.startsWith('image')), order.join(' ')).toBe(true);
      expect(readJobs(state).every((j) => j.state === 'done')).toBe(true);
    } finally {
      await sbSlow.close();
    }
  }, 60_000);
});
