import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

const SCALE = '0.01';
const KEY = 'sk-callbacks-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-cb-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), allowLoopback: true, seed: 9 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

describe('run with completion callbacks', () => {
  it('finishes from callbacks (one confirming status read per task) and adopts the task of an uncertain submit', async () => {
    const manifest = imageManifest(join(t.dir, 'cb.yaml'), 8, 'cb');
    const out = join(t.dir, 'out');
    const before = sb.stats();
    sb.script('submit', ['ok', '500-after']); // the second submit creates its task, then answers 500
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--listen', '127.0.0.1:0', '--concurrency', '1'], { GENBATCH_API_KEY: KEY });
    expect(r.stdout).toContain('callback receiver on 127.0.0.1:');
    expect(r.code).toBe(0);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.every((j) => j.state === 'done')).toBe(true);
    expect(jobs[1]!.last_error).toContain('adopted');
    const after = sb.stats();
    expect(after.tasks_total - before.tasks_total).toBe(8); // nothing resubmitted
    expect(after.callbacks.delivered - before.callbacks.delivered).toBeGreaterThanOrEqual(8);
    const statusReads = (after.requests.status ?? 0) - (before.requests.status ?? 0);
    expect(statusReads).toBeLessThanOrEqual(8 * 2);
  });

  it('a callback costs one status read per task: the runner reads what the service says, never the body', async () => {
    // The runner at time scale 1 would make its first fallback read 60 s after each submit (an image's typical
    // maximum); the tasks end within 0.6 s at the sandbox's 0.01, so every read is the one a callback asked for.
    const manifest = imageManifest(join(t.dir, 'body.yaml'), 4, 'body');
    const out = join(t.dir, 'body-out');
    const before = sb.stats();
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', '1', '--out', out, '--listen', '127.0.0.1:0'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    expect(readJobs(join(out, 'state.db')).every((j) => j.state === 'done')).toBe(true);
    expect((sb.stats().requests.status ?? 0) - (before.requests.status ?? 0)).toBe(4);
    expect(sb.stats().requests.file! - (before.requests.file ?? 0)).toBeGreaterThanOrEqual(4);
  }, 60_000);
});
