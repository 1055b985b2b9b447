import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A job whose status answers never come within the request deadline ends `failed` after a bounded total time
 * of deadline cuts (5 min x time scale, DEADLINE_CUTS_MS), not after 5 reads of 8 cuts each (~40 min at the
 * default 60 s deadline) that left it `submitted` for ever. The sandbox's `slow` fault holds every status answer
 * 2 s; --request-timeout 0.2 cuts each read; --time-scale 0.001 makes the bound 0.3 s.
 */
const KEY = 'sk-deadline-cuts-0123456789';
const t = tempDir('genbatch-cuts-');
let sb: Sandbox;

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.001, seed: 41, faults: 'status:slow=1/2000' });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

describe('status reads cut at the request deadline', () => {
  it('end the job failed after the bound of cuts, each read cut at most 3 times (sandbox slow fault)', async () => {
    const manifest = imageManifest(join(t.dir, 'slow.yaml'), 1, 'slow');
    const out = join(t.dir, 'out');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', '0.001', '--out', out, '--yes', '--request-timeout', '0.2'], { GENBATCH_API_KEY: KEY }, undefined, 60_000);
    expect(r.signal ?? null, 'the run did not end by itself').toBeNull();
    const [job] = readJobs(join(out, 'state.db'));
    expect(r.code, r.stderr).toBe(1);
    expect(job!.state).toBe('failed');
    expect(job!.last_error).toMatch(/^status reads of task \S+ were cut at the request deadline for [\d.]+ s in all \(the bound is 0\.3 s\): GET \/api\/generate\/status\/\S+: no complete answer within 0\.2 s \(the request deadline\)$/);
    // One read of 3 tries crosses the 0.3 s bound (before: tries of 8, reads of 5, and the job left submitted);
    // on a loaded machine a try may be cut before it reaches the sandbox, or a second read needed.
    expect(sb.stats().requests.status).toBeGreaterThanOrEqual(1);
    expect(sb.stats().requests.status).toBeLessThanOrEqual(6);
  }, 90_000);
});
