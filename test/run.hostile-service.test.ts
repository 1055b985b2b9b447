import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { BALANCE, json, startFakeService, submitted, type FakeService } from './helpers/fake-service.js';
import { drip, hugeStatus, nestedStatus } from './helpers/hostile.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * `genbatch run` against a hostile service (issue 16 items 3-5): a status answer of 200 MB, one nested
 * 10,000 levels deep, a submit answer dripped one byte at a time, and a stop while such a submit is in
 * flight. Before: the run read the huge answer whole (1.6 GB RSS for 700 MB), crashed its reader on the
 * nested one (the job stayed `submitted` with no error, on every rerun), and a drip-fed submit kept the
 * run going for ever, also after the first Ctrl-C.
 */
const KEY = 'sk-hostile-run-0123456789';
const MiB = 1024 * 1024;
const t = tempDir('genbatch-hostile-run-');
let service: FakeService;
/** What the service does with each request, by test. */
let mode: 'huge' | 'nested' | 'drip-submit' = 'huge';
const hugeWritten: number[] = [];
let submitArrived: (() => void) | null = null;

beforeAll(async () => {
  ensureBuilt();
  service = await startFakeService((req, _body, res) => {
    const url = req.url ?? '/';
    if (url === '/api/user/balance') return json(res, 200, BALANCE);
    if (url === '/api/generate/submit') {
      if (mode !== 'drip-submit') return json(res, 200, submitted('t-1'));
      submitArrived?.();
      return drip(res, JSON.stringify(submitted('t-1')), 500);
    }
    if (url.startsWith('/api/generate/status')) {
      if (mode === 'huge') return hugeStatus(res, 't-1', 200 * MiB, { onEnd: (n) => hugeWritten.push(n) });
      if (mode === 'drip-status') return drip(res, nestedStatus('t-1', 1), 500);
      return res.writeHead(200, { 'content-type': 'application/json' }).end(nestedStatus('t-1', 10_000));
    }
    json(res, 404, { detail: 'not found' });
  });
}, 60_000);
afterAll(async () => {
  await service?.close();
  t.cleanup();
});

let n = 0;
function manifest(): { path: string; out: string } {
  const dir = join(t.dir, `m${n++}`);
  const path = join(t.dir, `pic${n}.yaml`);
  writeFileSync(path, ['jobs:', '  - id: pic', '    model: alpha-image-2', '    input:', '      prompt: "a quiet harbour"'].join('\n') + '\n');
  return { path, out: dir };
}

/** The highest resident set size of a live process so far, in bytes (Linux /proc), or 0 once it is gone. */
function peakRss(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

describe('--request-timeout', () => {
  it('refuses a deadline that is not a number of seconds > 0, from the flag or GENBATCH_REQUEST_TIMEOUT (exit 2)', async () => {
    const m = manifest();
    const [flag, env] = await Promise.all([
      runCli(['run', m.path, '--base-url', service.base, '--out', m.out, '--request-timeout', '0'], { GENBATCH_API_KEY: KEY }),
      runCli(['run', m.path, '--base-url', service.base, '--out', m.out], { GENBATCH_API_KEY: KEY, GENBATCH_REQUEST_TIMEOUT: 'soon' }),
    ]);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('--request-timeout expects a number of seconds > 0, got "0"');
    expect(env.code).toBe(2);
    expect(env.stderr).toContain('GENBATCH_REQUEST_TIMEOUT expects a number of seconds > 0, got "soon"');
  });
});

describe('a hostile service', () => {
  it('stops reading a 200 MB status answer at 16 MiB: the run stays small, and the job error names the limit', async () => {
    mode = 'huge';
    const m = manifest();
    const child = spawnCli(['run', m.path, '--base-url', service.base, '--time-scale', '0.001', '--out', m.out, '--yes'], { GENBATCH_API_KEY: KEY });
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, peakRss(child.pid!))), 50);
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    clearInterval(sampler);
    expect(code, stderr).toBe(7); // left submitted for the next run
    const [job] = readJobs(join(m.out, 'state.db'));
    expect(job!.state).toBe('submitted');
    expect(job!.last_error).toBe('status read failed 5 times: GET /api/generate/status/t-1: the answer is over the limit of 16 MiB (reading stopped at 16 MiB)');
    // 5 reads of 3 tries each, every one dropped near the limit, never read to its 200 MB.
    expect(hugeWritten.length).toBe(15);
    for (const w of hugeWritten) expect(w).toBeLessThan(48 * MiB);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThan(400 * MiB);
    console.log(`peak RSS of the run: ${(peak / MiB).toFixed(0)} MiB; bytes written per answer: ${Math.max(...hugeWritten)} at most`);
  }, 120_000);

  it('refuses a status answer nested 10,000 levels deep (no crash, the error names it), fails it once past 24 h, and status lists it as stuck', async () => {
    mode = 'nested';
    const m = manifest();
    const args = ['run', m.path, '--base-url', service.base, '--time-scale', '0.001', '--out', m.out, '--yes'];
    const first = await runCli(args, { GENBATCH_API_KEY: KEY }, undefined, 60_000);
    expect(first.code, first.stderr).toBe(7); // left submitted for the next run
    expect(first.stderr).not.toMatch(/call stack/);
    const db = join(m.out, 'state.db');
    expect(readJobs(db)[0]!.last_error).toBe('status read failed 5 times: GET /api/generate/status/t-1: the answer is nested deeper than 256 levels (reading stopped)');

    // Sent 2 h ago: `status` lists it as stuck, with its last error.
    const back = (hours: number): void => {
      const w = new Database(db);
      w.prepare('UPDATE jobs SET submitted_at = ?').run(new Date(Date.now() - hours * 3600_000).toISOString());
      w.close();
    };
    back(2);
    const st = await runCli(['status', '--state', db]);
    expect(st.code, st.stderr).toBe(0);
    expect(st.stdout).toMatch(/1 stuck \(sent more than 1 h ago, not finished\):\n {2}pic\tsubmitted since \S+\tstatus read failed 5 times: GET \/api\/generate\/status\/t-1: the answer is nested deeper than 256 levels/);
    const stJson = JSON.parse((await runCli(['status', '--state', db, '--json'])).stdout) as { stuck: Array<{ id: string; error: string }> };
    expect(stJson.stuck.map((j) => j.id)).toEqual(['pic']);

    // Its results could live 24 h after submit: past that, the next run ends it `failed`, with the reason.
    back(25);
    const second = await runCli(args, { GENBATCH_API_KEY: KEY }, undefined, 60_000);
    expect(second.code, second.stderr).toBe(1);
    const [job] = readJobs(db);
    expect(job!.state).toBe('failed');
    expect(job!.last_error).toBe('no usable status of task t-1 within the 24 h its results live after submit: GET /api/generate/status/t-1: the answer is nested deeper than 256 levels (reading stopped)');
  }, 120_000);

  it('cuts a drip-fed submit answer at --request-timeout: the job is uncertain, its error names the deadline', async () => {
    mode = 'drip-submit';
    const m = manifest();
    const t0 = performance.now();
    const r = await runCli(['run', m.path, '--base-url', service.base, '--time-scale', '0.001', '--out', m.out, '--yes', '--request-timeout', '1'], { GENBATCH_API_KEY: KEY }, undefined, 60_000);
    expect(r.code, r.stderr).toBe(4);
    expect(performance.now() - t0).toBeLessThan(30_000);
    const [job] = readJobs(join(m.out, 'state.db'));
    expect(job!.state).toBe('uncertain');
    expect(job!.last_error).toBe('submit outcome unknown, a task may have been created: POST /api/generate/submit: no complete answer within 1 s (the request deadline)');
  }, 60_000);

  it('ends the job failed once a status endpoint that drips every answer past the deadline has cost the bound of deadline cuts; the run ends (exit 1)', async () => {
    mode = 'drip-status';
    const m = manifest();
    // Each read is cut at 0.2 s, at most 3 times; the bound is 5 min x 0.001 = 0.3 s of cuts, so the first read crosses it.
    const r = await runCli(['run', m.path, '--base-url', service.base, '--time-scale', '0.001', '--out', m.out, '--yes', '--request-timeout', '0.2'], { GENBATCH_API_KEY: KEY }, undefined, 90_000);
    expect(r.signal ?? null, 'the run did not end by itself').toBeNull();
    expect(r.code, r.stderr).toBe(1);
    const [job] = readJobs(join(m.out, 'state.db'));
    expect(job!.state).toBe('failed');
    expect(job!.last_error).toMatch(/^status reads of task t-1 were cut at the request deadline for [\d.]+ s in all \(the bound is 0\.3 s\): GET \/api\/generate\/status\/t-1: no complete answer within 0\.2 s \(the request deadline\)$/);
  }, 120_000);

  it('ends the run within seconds of the first SIGINT while a drip-fed submit is in flight: the submit is cut after its grace, uncertain, and the report says so', async () => {
    mode = 'drip-submit';
    const m = manifest();
    const arrived = new Promise<void>((r) => (submitArrived = r));
    const child = spawnCli(['run', m.path, '--base-url', service.base, '--time-scale', '0.001', '--out', m.out, '--yes'], { GENBATCH_API_KEY: KEY });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const closed = new Promise<number | null>((resolve) => child.on('close', resolve));
    await arrived;
    const t0 = performance.now();
    child.kill('SIGINT');
    const killer = setTimeout(() => child.kill('SIGKILL'), 40_000);
    const code = await closed;
    clearTimeout(killer);
    const took = performance.now() - t0;
    expect(code, stderr).toBe(130);
    // The grace is 5 s; without a cut the request lasted until its 60 s deadline (before: for ever).
    expect(took).toBeLessThan(15_000);
    const [job] = readJobs(join(m.out, 'state.db'));
    expect(job!.state).toBe('uncertain');
    expect(job!.last_error).toBe('submit outcome unknown, a task may have been created: POST /api/generate/submit: no answer 5 s after the run was stopped (request cut)');
    const report = JSON.parse(readFileSync(join(m.out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; state: string; error: string | null }> };
    expect(report.jobs.find((j) => j.id === 'pic')).toMatchObject({ state: 'uncertain', error: job!.last_error });
    console.log(`run ended ${(took / 1000).toFixed(1)} s after SIGINT`);
  }, 60_000);
});
