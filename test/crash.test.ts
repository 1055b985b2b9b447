import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { startSandboxProcess, type SandboxProcess } from './helpers/sandbox-process.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, findFiles, integrity, readJobs } from './helpers/verify.js';

/**
 * Crash test: `genbatch run` on a 200-job manifest, against a sandbox in another
 * process, is killed with SIGKILL at random moments and resumed each time; then
 * run to completion. 3 kills by default, 24 with GENBATCH_SLOW=1.
 */
const SCALE = '0.01';
const JOBS = 200;
const KILLS = process.env.GENBATCH_SLOW === '1' ? 24 : 3;

let sb: SandboxProcess;
const t = tempDir('genbatch-crash-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandboxProcess(['--time-scale', SCALE, '--keys', 'sk-crash-key=1000000']);
}, 60_000);
afterAll(async () => {
  await sb?.stop();
  t.cleanup();
});

function killAfter(ms: number, args: string[], env: Record<string, string>): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => {
    const child = spawnCli(args, env);
    child.stdout!.resume();
    child.stderr!.resume();
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
  });
}

describe('crash and resume', () => {
  it(`survives ${KILLS} SIGKILLs at random moments: each task created once (or uncertain), files intact`, async () => {
    const manifest = imageManifest(join(t.dir, 'crash.yaml'), JOBS, 'c');
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    // Concurrency 4 keeps a run long enough (a few seconds) for every kill to land mid-run.
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--concurrency', '4', '--json'];
    const env = { GENBATCH_API_KEY: sb.key };
    let killed = 0;
    let finishedEarly = 0;
    for (let i = 0; i < KILLS; i++) {
      const r = await killAfter(100 + Math.floor(Math.random() * 700), args, env);
      if (r.signal === 'SIGKILL') killed++;
      else if (r.code === 0 || r.code === 4) finishedEarly++;
      else throw new Error(`run exited ${String(r.code)} between kills`);
    }
    expect(killed).toBeGreaterThanOrEqual(Math.ceil(KILLS / 2));
    const last = await runCli(args, env);
    expect([0, 4]).toContain(last.code);

    const jobs = readJobs(state);
    expect(jobs).toHaveLength(JOBS);
    const uncertain = jobs.filter((j) => j.state === 'uncertain');
    expect(jobs.filter((j) => j.state !== 'done' && j.state !== 'uncertain')).toEqual([]);
    if (uncertain.length === 0) expect(last.code).toBe(0);
    // Task ids in the state are unique and each exists at the sandbox; extra sandbox tasks only for uncertain jobs.
    const ids = jobs.map((j) => j.task_id).filter((x): x is string => x !== null);
    expect(new Set(ids).size).toBe(ids.length);
    const serverTasks = new Set((await sb.tasks()).map((x) => x.task_id));
    for (const id of ids) expect(serverTasks.has(id)).toBe(true);
    expect(serverTasks.size - ids.length).toBeGreaterThanOrEqual(0);
    expect(serverTasks.size - ids.length).toBeLessThanOrEqual(uncertain.length);
    expect(checkFiles(state, out)).toBeGreaterThanOrEqual(JOBS - uncertain.length);
    expect(findFiles(out, (n) => n.endsWith('.part'))).toEqual([]);
    expect(integrity(state)).toBe('ok');
    console.log(`crash test: ${killed} runs killed, ${finishedEarly} finished before their kill, ${uncertain.length} job(s) uncertain, ${serverTasks.size} tasks for ${JOBS} jobs`);
  }, 600_000);
});
