import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { mixedManifest } from './helpers/mixed-manifest.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, integrity, readJobs } from './helpers/verify.js';

/**
 * More `genbatch run` cases end to end (child process, sandbox in this process):
 * unknown prices without --yes, a 400 on submit, the callback receiver under
 * forged deliveries, SIGINT with submits in flight, a second SIGINT that must
 * end the process, and a job added on a rerun.
 */
const SCALE = '0.005';
const KEY = 'sk-run-more-0123456789';
/** Scripted `slow` steps hold a request this long (real ms): less than the 5 s a stop waits for a submit already sent. */
const SLOW_MS = 2500;

let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 31, slowMs: SLOW_MS, allowLoopback: true });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-more-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

const baseArgs = (manifest: string, out: string, scale = SCALE, url = sb.url) => ['run', manifest, '--base-url', url, '--time-scale', scale, '--out', out];
const env = { GENBATCH_API_KEY: KEY };

interface Ev {
  type: string;
  id?: string;
  to?: string;
  task_id?: string | null;
  address?: string;
}

/** Spawn a run with --json; `onEvent` sees every NDJSON event as it comes. */
function spawnJson(args: string[], onEvent: (e: Ev, child: ReturnType<typeof spawnCli>) => void): Promise<{ code: number | null; signal: string | null; events: Ev[]; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawnCli([...args, '--json'], env);
    const events: Ev[] = [];
    let rest = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => {
      const lines = (rest + d.toString()).split('\n');
      rest = lines.pop() ?? '';
      for (const l of lines) {
        if (!l.startsWith('{')) continue;
        const e = JSON.parse(l) as Ev;
        events.push(e);
        onEvent(e, child);
      }
    });
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code, signal) => resolve({ code, signal, events, stderr }));
  });
}

describe('genbatch run: more cases', () => {
  it('unknown prices without --yes: exit 3 naming the jobs, nothing submitted', async () => {
    const w = work();
    const manifest = join(w.dir, 'unk.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: castle\n    model: kontext-pro\n    input: { prompt: "A castle" }\n  - id: fox\n    model: alpha-image-2\n    input: { prompt: "A fox" }\n  - id: tower\n    model: kontext-pro\n    input: { prompt: "A tower" }\n');
    const total0 = sb.stats().tasks_total;
    const r = await runCli(baseArgs(manifest, w.out), env);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('no known price');
    expect(r.stderr).toContain('castle');
    expect(r.stderr).toContain('tower');
    expect(r.stderr).not.toMatch(/\bfox\b/);
    expect(r.stderr).toContain('--yes');
    expect(sb.stats().tasks_total).toBe(total0);
    const yes = await runCli([...baseArgs(manifest, w.out), '--yes'], env);
    expect(yes.code).toBe(0);
    expect(sb.stats().tasks_total - total0).toBe(3);
  });

  it("a 400 on a media submit fails that job with the service's message; the others finish; exit 1", async () => {
    const w = work();
    const manifest = join(w.dir, 'bad.yaml');
    // The sandbox's content moderation refuses the word "forbidden" with a 400 (the manifest cannot know).
    writeFileSync(manifest, 'jobs:\n  - id: ok-1\n    model: alpha-image-2\n    input: { prompt: "A calm lake" }\n  - id: refused\n    model: alpha-image-2\n    input: { prompt: "A forbidden door" }\n  - id: ok-2\n    model: alpha-image-2\n    input: { prompt: "A quiet forest" }\n');
    const total0 = sb.stats().tasks_total;
    const r = await runCli([...baseArgs(manifest, w.out), '--yes'], env);
    expect(r.code).toBe(6); // every job done apart from one the service refused for its input: a permanent failure
    const jobs = readJobs(w.state);
    expect(jobs.map((j) => [j.id, j.state])).toEqual([['ok-1', 'done'], ['refused', 'failed'], ['ok-2', 'done']]);
    const refused = jobs[1]!;
    expect(refused.last_error).toContain('input.prompt: the content was flagged by content moderation');
    expect(refused.attempts).toBe(1); // a 400 is never retried
    expect(sb.stats().tasks_total - total0).toBe(2);
    const report = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; state: string; error: string | null }> };
    expect(report.jobs.find((j) => j.id === 'refused')).toMatchObject({ state: 'failed', error: expect.stringContaining('flagged by content moderation') });
  });

  it('callback receiver: a wrong token is 404; duplicate, contradictory and out-of-order deliveries change nothing', async () => {
    const slow = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.05, seed: 33, allowLoopback: true });
    try {
      const w = work();
      const manifest = imageManifest(join(w.dir, 'cb.yaml'), 3, 'cb');
      const answers: Array<{ what: string; status: number }> = [];
      const forged: Promise<void>[] = [];
      let base = '';
      const post = (what: string, url: string, body: unknown, method = 'POST') =>
        forged.push(
          fetch(url, { method, headers: { 'content-type': 'application/json' }, body: method === 'POST' ? JSON.stringify(body) : undefined }).then(
            (r) => void answers.push({ what, status: r.status }),
            // The receiver closes when the run ends: a late delivery may find it gone.
            () => void answers.push({ what, status: -1 }),
          ),
        );
      const note = (taskId: string, status: string) => ({ code: 200, data: { task_id: taskId, status } });
      const r = await spawnJson([...baseArgs(manifest, w.out, '0.05', slow.url), '--listen', '127.0.0.1:0', '--concurrency', '3', '--yes'], (e) => {
        if (e.type === 'listening') {
          const db = new Database(w.state, { readonly: true });
          const token = (db.prepare(`SELECT value FROM meta WHERE key = 'callback_token'`).get() as { value: string }).value;
          db.close();
          base = `http://${e.address}/${token}`;
          post('wrong token', `http://${e.address}/not-the-token?job=cb-0000`, note('x', 'finished'));
          post('GET on the token', `${base}?job=cb-0000`, null, 'GET');
        }
        if (e.type === 'job' && e.to === 'submitted' && e.task_id) {
          const url = `${base}?job=${encodeURIComponent(e.id!)}`;
          // Before the task has finished: finished twice, failed, then running (out of order), and another task's id.
          for (const s of ['finished', 'finished', 'failed', 'running']) post(`forged ${s}`, url, note(e.task_id, s));
          post('forged other task', url, note('0123456789abcdef0123456789abcdef', 'finished'));
        }
        if (e.type === 'job' && e.to === 'done') {
          // After the job is done: late duplicates.
          const url = `${base}?job=${encodeURIComponent(e.id!)}`;
          post('late duplicate', url, note('whatever', 'finished'));
        }
      });
      await Promise.all(forged);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      expect(answers.filter((a) => a.what === 'wrong token' || a.what === 'GET on the token').map((a) => a.status)).toEqual([404, 404]);
      // Well-formed deliveries on the right token are acknowledged (200) whatever they say...
      expect(answers.filter((a) => a.what.startsWith('forged')).every((a) => a.status === 200)).toBe(true);
      expect(answers.filter((a) => a.what.startsWith('forged'))).toHaveLength(15);
      // ...and change nothing by themselves: each job went through each state once, in order, never backwards.
      const jobs = readJobs(w.state);
      for (const j of jobs) {
        const seq = r.events.filter((e) => e.type === 'job' && e.id === j.id).map((e) => e.to);
        expect(seq, j.id).toEqual(['submitting', 'submitted', 'downloading', 'done']);
        expect(j.state).toBe('done');
      }
      expect(slow.stats().tasks_total).toBe(3);
      expect(checkFiles(w.state, w.out)).toBeGreaterThanOrEqual(3);
    } finally {
      await slow.close();
    }
  });

  it('SIGINT while submits are in flight: the run waits for their answers and records the task ids (submitted, not uncertain); nothing else sent; exit 130', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'inflight.yaml'), 6, 'inf');
    const submits0 = sb.stats().requests.submit ?? 0;
    sb.script('submit', ['slow', 'slow']); // the first two submits are held by the sandbox for SLOW_MS
    let signalled = false;
    const r = await spawnJson([...baseArgs(manifest, w.out), '--concurrency', '2', '--yes'], (e, child) => {
      if (signalled || e.type !== 'job' || e.to !== 'submitting') return;
      signalled = true;
      // Wait until both POSTs have reached the sandbox (they are in flight), then SIGINT.
      const timer = setInterval(() => {
        if ((sb.stats().requests.submit ?? 0) - submits0 >= 2) {
          clearInterval(timer);
          child.kill('SIGINT');
        }
      }, 10);
    });
    expect(r.code).toBe(130);
    expect(r.events.some((e) => e.type === 'stopping')).toBe(true);
    const jobs = readJobs(w.state);
    expect(jobs.filter((j) => j.state === 'submitting')).toEqual([]);
    // Both submits were sent: a clean stop waits for their answers (the tasks exist and are paid for), so
    // they are submitted with their task ids and the next run fetches them. (Was: aborted, so uncertain,
    // and with the default --uncertain=skip their results were never fetched.)
    expect(jobs.slice(0, 2).map((j) => j.state)).toEqual(['submitted', 'submitted']);
    expect(jobs.slice(0, 2).every((j) => typeof j.task_id === 'string' && j.task_id.length > 0)).toBe(true);
    expect(jobs.slice(2).every((j) => j.state === 'pending')).toBe(true);
    expect((sb.stats().requests.submit ?? 0) - submits0).toBe(2);
    expect(integrity(w.state)).toBe('ok');
    const rest = await runCli([...baseArgs(manifest, w.out), '--yes'], env);
    expect(rest.code).toBe(0);
    expect(readJobs(w.state).slice(0, 2).map((j) => j.task_id)).toEqual(jobs.slice(0, 2).map((j) => j.task_id));
  });

  it('a second SIGINT ends the process at once, while the first stop is still waiting (exit by signal, not 130)', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'dbl.yaml'), 20, 'dbl');
    // The first stop has to wait for something: the balance read before the first submit (which
    // takes no abort signal) is held by the sandbox for SLOW_MS. Both SIGINTs come while it is held.
    // Had the second SIGINT been ignored, the run would have exited 130 once the balance came.
    const balance0 = sb.stats().requests.balance ?? 0;
    sb.script('balance', ['slow']);
    let sent = false;
    let sentAt = 0;
    const r = await spawnJson([...baseArgs(manifest, w.out), '--concurrency', '2', '--yes'], (e, child) => {
      if (sent || e.type !== 'synced') return;
      sent = true;
      const timer = setInterval(() => {
        if ((sb.stats().requests.balance ?? 0) - balance0 < 1) return;
        clearInterval(timer);
        sentAt = Date.now();
        child.kill('SIGINT');
        setTimeout(() => child.kill('SIGINT'), 100);
      }, 10);
    });
    expect(sentAt).toBeGreaterThan(0);
    expect(r.signal).toBe('SIGINT');
    expect(r.code).toBeNull();
    expect(r.events.some((e) => e.type === 'finish')).toBe(false);
    expect(readJobs(w.state).every((j) => j.state === 'pending')).toBe(true);
    expect(integrity(w.state)).toBe('ok');
    const rest = await runCli([...baseArgs(manifest, w.out), '--yes'], env);
    expect(rest.code).toBe(0);
    expect(readJobs(w.state).every((j) => j.state === 'done')).toBe(true);
  });

  it('without faults, 12 distinct local images on 24 jobs: every upload accepted at the first try, no 429 (limiter window, not retries)', async () => {
    const w = work();
    const { path: manifest } = mixedManifest(w.dir, 'lim', 120, 12); // 24 edit jobs over 12 distinct PNGs, plus other kinds
    const s0 = sb.stats();
    const r = await runCli([...baseArgs(manifest, w.out), '--yes', '--concurrency', '8'], env);
    expect(r.code).toBe(0);
    const s1 = sb.stats();
    expect(s1.uploads.accepted - s0.uploads.accepted).toBe(12);
    expect(s1.uploads.refused - s0.uploads.refused).toBe(0);
    expect((s1.requests.upload ?? 0) - (s0.requests.upload ?? 0)).toBe(12);
  });

  it('a job added to the manifest is run on the rerun; finished jobs are not sent again', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'grow.yaml'), 3, 'grow');
    const total0 = sb.stats().tasks_total;
    const first = await runCli([...baseArgs(manifest, w.out), '--yes'], env);
    expect(first.code).toBe(0);
    const before = readJobs(w.state);
    appendFileSync(manifest, '  - id: grow-new\n    model: alpha-image-2\n    input:\n      prompt: "A new lighthouse"\n');
    const second = await runCli([...baseArgs(manifest, w.out), '--yes'], env);
    expect(second.code).toBe(0);
    expect(second.stdout).toContain('4 jobs (1 new, 0 changed, 3 unchanged)');
    const after = readJobs(w.state);
    expect(after.map((j) => j.id)).toEqual(['grow-0000', 'grow-0001', 'grow-0002', 'grow-new']);
    expect(after.every((j) => j.state === 'done')).toBe(true);
    expect(after.slice(0, 3).map((j) => j.task_id)).toEqual(before.map((j) => j.task_id));
    expect(sb.stats().tasks_total - total0).toBe(4);
    const result = JSON.parse(readFileSync(join(w.out, 'grow-new', 'result.json'), 'utf8')) as { task_id: string };
    expect(result.task_id).toBe(after[3]!.task_id);
    const report = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { summary: { counts: Record<string, number> } };
    expect(report.summary.counts.done).toBe(4);
  });
});
