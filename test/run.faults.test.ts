import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, checkServerSizes, findFiles, integrity, readJobs } from './helpers/verify.js';

/**
 * Fault test: 300 jobs with the sandbox injecting, on status, balance and file
 * downloads, 15% 5xx (500/502/503 at 5% each), 10% 429, 5% dropped connections
 * and (downloads) 5% truncated bodies; on submit 15% 503 and 10% 429, the
 * faults that prove no task was created. 500/502/dropped answers on submit are
 * ambiguous by contract (the task may exist): those make jobs `uncertain`, as
 * run.test.ts and crash.test.ts check, so they are not injected here where
 * every job must end `done`.
 */
const SCALE = '0.01';
const KEY = 'sk-faults-0123456789';
const FIVE = (ep: string) => `${ep}:500=0.05,${ep}:502=0.05,${ep}:503=0.05,${ep}:429=0.1,${ep}:drop=0.05`;
const FAULTS = [FIVE('status'), FIVE('balance'), FIVE('file'), 'file:truncate=0.05', 'submit:503=0.15', 'submit:429=0.1'].join(',');

let sb: Sandbox;
const t = tempDir('genbatch-faults-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), faults: FAULTS, seed: 11 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

describe('run under injected faults', () => {
  it('finishes 300 jobs with every job done and every file the size the server gave', async () => {
    const manifest = imageManifest(join(t.dir, 'faults.yaml'), 300, 'f');
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--concurrency', '16', '--json'], { GENBATCH_API_KEY: KEY });
    const jobs = readJobs(state);
    const notDone = jobs.filter((j) => j.state !== 'done');
    expect(notDone).toEqual([]);
    expect(r.code).toBe(0);
    const injected = sb.stats().faults_injected;
    expect(Object.values(injected).reduce((a, b) => a + b, 0)).toBeGreaterThan(100);
    expect(injected['file:truncate'] ?? 0).toBeGreaterThan(0);
    expect(sb.stats().tasks_total).toBe(300);
    expect(checkServerSizes(state, out)).toBeGreaterThanOrEqual(300);
    expect(checkFiles(state, out)).toBeGreaterThanOrEqual(300);
    expect(findFiles(out, (n) => n.endsWith('.part'))).toEqual([]);
    expect(integrity(state)).toBe('ok');
  }, 300_000);
});
