import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { mixedManifest } from './helpers/mixed-manifest.js';
import { startSandboxProcess, type SandboxProcess } from './helpers/sandbox-process.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, findFiles, integrity, readJobs } from './helpers/verify.js';

/**
 * Crash test: `genbatch run --json` on a 200-job mixed manifest (plain images,
 * edits of 20 distinct local PNGs (uploads), dream-4 with n: 2, generate-music
 * (music detail, audio and covers), video), against a sandbox in another
 * process, is killed with SIGKILL and resumed each time, then run to the end.
 *
 * Kills are placed by what the run reports, not by wall time (a loaded machine
 * may take a second before its first submit): each kill waits for the k-th
 * NDJSON event of a kind (k random), then a random 0-150 ms more. Kills
 * alternate between the submit phase (k-th `job` event: uploads and submits in
 * flight) and the download phase (k-th `file` event: multi-file and music
 * downloads in flight). What each kill actually landed after is recorded and
 * checked: some after the run's first submit, some during downloads.
 * 4 kills by default (CI, well under 60 s), 24 with GENBATCH_SLOW=1.
 */
const SCALE = '0.01';
const JOBS = 200;
const SLOW = process.env.GENBATCH_SLOW === '1';
const KILLS = SLOW ? 24 : 4;
/** Upper bounds of k: smaller in the slow tier, so that 24 runs do not finish the 200 jobs before their kill. */
const K_JOB = SLOW ? 12 : 40;
const K_FILE = SLOW ? 8 : 25;

let sb: SandboxProcess;
const t = tempDir('genbatch-crash-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandboxProcess(['--time-scale', SCALE, '--keys', 'sk-crash-key=10000000']);
}, 60_000);
afterAll(async () => {
  await sb?.stop();
  t.cleanup();
});

interface KillOutcome {
  killed: boolean;
  code: number | null;
  /** At the moment of the kill: a job had reached `submitting` in this run. */
  afterSubmit: boolean;
  /** At the moment of the kill: a file had been written in this run and the run had not finished. */
  duringDownloads: boolean;
}

/** Spawn the run; SIGKILL it `delayMs` after its `k`-th NDJSON event of type `kind`. */
function killAfterEvent(kind: 'job' | 'file', k: number, delayMs: number, args: string[], env: Record<string, string>): Promise<KillOutcome> {
  return new Promise((resolve) => {
    const child = spawnCli(args, env);
    let seen = 0;
    let submitted = false;
    let files = 0;
    let finished = false;
    let rest = '';
    let timer: NodeJS.Timeout | null = null;
    const outcome: KillOutcome = { killed: false, code: null, afterSubmit: false, duringDownloads: false };
    child.stdout!.on('data', (d: Buffer) => {
      const lines = (rest + d.toString()).split('\n');
      rest = lines.pop() ?? '';
      for (const line of lines) {
        if (!line.startsWith('{')) continue;
        const e = JSON.parse(line) as { type: string; to?: string };
        if (e.type === 'job' && e.to === 'submitting') submitted = true;
        if (e.type === 'file') files++;
        if (e.type === 'finish') finished = true;
        if (e.type === kind && ++seen === k && !timer) {
          timer = setTimeout(() => {
            outcome.afterSubmit = submitted;
            outcome.duringDownloads = files > 0 && !finished;
            outcome.killed = child.kill('SIGKILL');
          }, delayMs);
        }
      }
    });
    child.stderr!.resume();
    child.on('exit', (code, signal) => {
      if (timer) clearTimeout(timer);
      outcome.killed = signal === 'SIGKILL';
      outcome.code = code;
      if (!outcome.killed) outcome.afterSubmit = outcome.duringDownloads = false;
      resolve(outcome);
    });
  });
}

const randInt = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1));

describe('crash and resume', () => {
  it(`survives ${KILLS} SIGKILLs placed after random run events: each task created once (or uncertain), files intact`, async () => {
    const { path: manifest } = mixedManifest(t.dir, 'c', JOBS, 20);
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    // Concurrency 4 keeps a run long enough (a few seconds) for the kills to land mid-run.
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--concurrency', '4', '--yes', '--json'];
    const env = { GENBATCH_API_KEY: sb.key };
    const outcomes: KillOutcome[] = [];
    for (let i = 0; i < KILLS; i++) {
      const r = i % 2 === 0
        ? await killAfterEvent('job', randInt(1, K_JOB), randInt(0, 150), args, env)
        : await killAfterEvent('file', randInt(1, K_FILE), randInt(0, 150), args, env);
      if (!r.killed && r.code !== 0 && r.code !== 4) throw new Error(`run exited ${String(r.code)} between kills`);
      outcomes.push(r);
    }
    const killed = outcomes.filter((o) => o.killed);
    expect(killed.length).toBeGreaterThanOrEqual(Math.ceil(KILLS / 2));
    expect(killed.filter((o) => o.afterSubmit).length).toBeGreaterThanOrEqual(1);
    expect(killed.filter((o) => o.duringDownloads).length).toBeGreaterThanOrEqual(1);
    const last = await runCli(args, env);
    expect([0, 4]).toContain(last.code);

    const jobs = readJobs(state);
    expect(jobs).toHaveLength(JOBS);
    const uncertain = jobs.filter((j) => j.state === 'uncertain');
    expect(jobs.filter((j) => j.state !== 'done' && j.state !== 'uncertain')).toEqual([]);
    expect(last.code).toBe(uncertain.length === 0 ? 0 : 4);
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
    const uploads = (await sb.stats()).uploads;
    console.log(
      `crash test: ${killed.length} of ${KILLS} runs killed (${killed.filter((o) => o.afterSubmit).length} after the first submit, ${killed.filter((o) => o.duringDownloads).length} during downloads), ` +
        `${uncertain.length} job(s) uncertain, ${serverTasks.size} tasks for ${JOBS} jobs, uploads ${JSON.stringify(uploads)}`,
    );
  }, 600_000);
});
