import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import Database from 'better-sqlite3';
import { checkFiles, findFiles, readJobs } from './helpers/verify.js';

/** Fixes from the audit of `genbatch run` (issue 4). */
const KEY = 'sk-fixes-0123456789abcdef';
let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  // Retry-After of a 429 fault: 60 s, so a run that waits through it would never end within the test.
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.005, seed: 11, retryAfterS: 60, allowLoopback: true });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-fix-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

describe('SIGINT during a submit backoff', () => {
  it('exits 130 at once and leaves the jobs pending (nothing was sent)', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'b.yaml'), 2, 'back');
    const submits0 = sb.stats().requests.submit ?? 0;
    sb.script('submit', ['429', '429']);
    // --time-scale 1: the client honours the 60 s Retry-After (capped at 60 s).
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', '1', '--out', w.out, '--concurrency', '2'];
    const code = await new Promise<number | null>((resolve) => {
      const child = spawnCli(args, { GENBATCH_API_KEY: KEY });
      const timer = setInterval(() => {
        if ((sb.stats().requests.submit ?? 0) - submits0 >= 2) {
          clearInterval(timer);
          child.kill('SIGINT');
        }
      }, 20);
      child.on('exit', (c) => {
        clearInterval(timer);
        resolve(c);
      });
    });
    expect(code).toBe(130);
    expect(readJobs(w.state).map((j) => j.state)).toEqual(['pending', 'pending']);
    expect(readJobs(w.state)[0]!.last_error).toContain('stopped before this submit was sent');
  }, 30_000);
});

describe('status and report with --out', () => {
  it('find the state file in DIR/state.db, not at the manifest default', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'o.yaml'), 2, 'out');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', '0.005', '--out', w.out], { GENBATCH_API_KEY: KEY });
    expect(r.code).toBe(0);
    const st = await runCli(['status', manifest, '--out', w.out, '--json']);
    expect(st.stderr).toBe('');
    expect(st.code).toBe(0);
    expect((JSON.parse(st.stdout) as { counts: Record<string, number> }).counts.done).toBe(2);
    const rep = await runCli(['report', manifest, '--out', w.out]);
    expect(rep.stderr).toBe('');
    expect(rep.code).toBe(0);
    expect(rep.stdout).toContain(join(w.out, 'report.json'));
    // Without a manifest, --out alone names the state file.
    expect((await runCli(['status', '--out', w.out])).code).toBe(0);
  }, 30_000);
});

describe('an invalid manifest', () => {
  it('exits 2 and leaves no state file (nor the output folder this run made)', async () => {
    const w = work();
    const manifest = join(w.dir, 'bad.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: a\n    model: no-such-model\n    input: { prompt: x }\n');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--out', join(w.out, 'deeper')], { GENBATCH_API_KEY: KEY });
    expect(r.code).toBe(2);
    expect(existsSync(join(w.out, 'deeper', 'state.db'))).toBe(false);
    expect(existsSync(w.out)).toBe(false);
  }, 30_000);

  it('exits 2 and keeps an existing state file (with its jobs) as it was', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'keep.yaml'), 1, 'keep');
    expect((await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', '0.005', '--out', w.out], { GENBATCH_API_KEY: KEY })).code).toBe(0);
    writeFileSync(manifest, 'jobs:\n  - id: a\n    model: no-such-model\n    input: { prompt: x }\n');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--out', w.out], { GENBATCH_API_KEY: KEY });
    expect(r.code).toBe(2);
    expect(readJobs(w.state).map((j) => j.state)).toEqual(['done']);
  }, 30_000);
});

describe('a late callback after a crash', () => {
  it('adopts the task of a job left `submitting` (same token across runs; the rerun waits for it)', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'late.yaml'), 1, 'late');
    const base = ['run', manifest, '--base-url', sb.url, '--time-scale', '0.02', '--out', w.out, '--listen', '127.0.0.1:0'];
    expect((await runCli(base, { GENBATCH_API_KEY: KEY })).code).toBe(0);
    // As after a SIGKILL between the intent and the answer: the job is `submitting`, no task id.
    const db = new Database(w.state);
    const token = (db.prepare(`SELECT value FROM meta WHERE key = 'callback_token'`).get() as { value: string }).value;
    db.prepare(`UPDATE jobs SET state = 'submitting', task_id = NULL, result = NULL, finished_at = NULL WHERE id = 'late-0000'`).run();
    db.prepare(`DELETE FROM files`).run();
    db.close();
    const total0 = sb.stats().tasks_total;
    const rerun = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawnCli(base, { GENBATCH_API_KEY: KEY });
      let stdout = '';
      let stderr = '';
      let sent = false;
      child.stdout!.on('data', (d: Buffer) => {
        stdout += d.toString();
        const m = /callback receiver on 127\.0\.0\.1:(\d+)/.exec(stdout);
        if (m && !sent) {
          sent = true;
          // The task the crashed run had sent: its callback URL carries the old run's token and the job id.
          void fetch(`${sb.url}/api/generate/submit`, {
            method: 'POST',
            headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'late' }, callback_url: `http://127.0.0.1:${m[1]}/${token}?job=late-0000` }),
          });
        }
      });
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
    expect(rerun.stderr).toContain('marked uncertain');
    expect(rerun.code).toBe(0);
    const jobs = readJobs(w.state);
    expect(jobs[0]!.state).toBe('done');
    expect(jobs[0]!.last_error).toContain('adopted');
    expect(sb.stats().tasks_total - total0).toBe(1);
    expect(rerun.stdout + rerun.stderr).not.toContain(token);
  }, 60_000);
});

describe('a rerun with --sandbox', () => {
  it('sends again the jobs that were in flight in the earlier (stopped) sandbox; all done', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'sbx.yaml'), 12, 'sbx');
    // Time scale 0.02 (--sandbox's default): an image takes 0.3 to 1.2 s, so the stop after the third submit still
    // finds the jobs sent last at the sandbox.
    const args = ['run', manifest, '--sandbox', '--time-scale', '0.02', '--out', w.out, '--concurrency', '2', '--yes'];
    const first = await new Promise<number | null>((resolve) => {
      const child = spawnCli([...args, '--json']);
      let text = '';
      let sent = false;
      child.stdout!.on('data', (d: Buffer) => {
        text += d.toString();
        if (!sent && (text.match(/"to":"submitted"/g) ?? []).length >= 3) {
          sent = true;
          child.kill('SIGINT');
        }
      });
      child.on('exit', (code) => resolve(code));
    });
    expect(first).toBe(130);
    const mid = readJobs(w.state);
    expect(mid.filter((j) => j.state === 'submitted' || j.state === 'downloading').length).toBeGreaterThan(0);
    const again = await runCli(args);
    expect(again.stdout.split('\n')[0]).toContain('credits are not real');
    expect(again.stderr).toContain('in flight in the sandbox of an earlier run');
    expect(again.code).toBe(0);
    expect(readJobs(w.state).every((j) => j.state === 'done')).toBe(true);
    expect(findFiles(w.out, (n) => n.endsWith('.part'))).toEqual([]);
    expect(checkFiles(w.state, w.out)).toBeGreaterThanOrEqual(12);
  }, 60_000);
});

describe('--listen and a manifest callback_url', () => {
  it('warns, naming how many jobs lose their own callback_url', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'own.yaml'), 2, 'own');
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('    model: alpha-image-2\n', '    model: alpha-image-2\n    callback_url: https://hooks.example.com/genbatch\n'));
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', '0.01', '--out', w.out, '--listen', '127.0.0.1:0'], { GENBATCH_API_KEY: KEY });
    expect(r.stderr).toContain('1 job(s) name their own callback_url');
    expect(r.code).toBe(0);
  }, 30_000);
});

describe('a job whose spec changed', () => {
  it('moves the files of its earlier result to out/<id>/previous-<n>/ and never deletes them', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'prev.yaml'), 2, 'prev');
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', '0.005', '--out', w.out];
    expect((await runCli(args, { GENBATCH_API_KEY: KEY })).code).toBe(0);
    const dir = join(w.out, 'prev-0001');
    const before = readdirSync(dir).sort();
    const oldResult = readFileSync(join(dir, 'result.json'), 'utf8');
    for (let round = 1; round <= 2; round++) {
      writeFileSync(manifest, readFileSync(manifest, 'utf8').replace(/Picture number 1 (\(v\d\) )?of/, `Picture number 1 (v${round}) of`));
      const r = await runCli(args, { GENBATCH_API_KEY: KEY });
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`moved to ${join('prev-0001', `previous-${round}`)}/`);
    }
    expect(readdirSync(join(dir, 'previous-1')).sort()).toEqual(before);
    expect(readFileSync(join(dir, 'previous-1', 'result.json'), 'utf8')).toBe(oldResult);
    // The folder holds the latest result only, as the report lists it.
    const report = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; files: Array<{ path: string }> }> };
    const listed = report.jobs.find((j) => j.id === 'prev-0001')!.files.map((f) => f.path.split('/').pop()!);
    expect(readdirSync(dir).filter((n) => !n.startsWith('previous-') && n !== 'result.json').sort()).toEqual(listed.sort());
    expect(readdirSync(join(w.out, 'prev-0000')).some((n) => n.startsWith('previous-'))).toBe(false);
  }, 60_000);
});

describe('--sandbox after a run against another service', () => {
  it('never forgets tasks sent to a service that is not an in-process sandbox', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'real.yaml'), 3, 'real');
    const first = await new Promise<number | null>((resolve) => {
      const child = spawnCli(['run', manifest, '--base-url', sb.url, '--time-scale', '0.05', '--out', w.out, '--json'], { GENBATCH_API_KEY: KEY });
      let text = '';
      let sent = false;
      child.stdout!.on('data', (d: Buffer) => {
        text += d.toString();
        if (!sent && text.includes('"to":"submitted"')) {
          sent = true;
          child.kill('SIGINT');
        }
      });
      child.on('exit', (code) => resolve(code));
    });
    expect(first).toBe(130);
    const inFlight = readJobs(w.state).filter((j) => j.state === 'submitted').map((j) => j.id);
    expect(inFlight.length).toBeGreaterThan(0);
    const again = await runCli(['run', manifest, '--sandbox', '--out', w.out, '--yes']);
    expect(again.stderr).not.toContain('in flight in the sandbox of an earlier run');
    const after = readJobs(w.state);
    for (const id of inFlight) expect(after.find((j) => j.id === id)!.task_id).not.toBeNull();
  }, 60_000);
});
