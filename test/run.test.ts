import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../src/errors.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { findModel } from '../src/models/index.js';
import { Store } from '../src/store/index.js';
import { ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, findFiles, integrity, readJobs } from './helpers/verify.js';

const SCALE = '0.005';
const KEY = 'sk-test-run-0123456789';

let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  // sk-402-key affords two and a half kontext-pro images at the sandbox's price for that model.
  const kontext = findModel('kontext-pro')?.sandboxCredits ?? 4;
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000, 'sk-poor-key': 10, 'sk-402-key': kontext * 2.5 }, timeScale: Number(SCALE), seed: 7 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-run-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

const run = (manifest: string, out: string, more: string[] = [], key = KEY) =>
  runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', ...more], { GENBATCH_API_KEY: key });

const created = () => sb.stats().tasks_created_by_key;

describe('genbatch run against the sandbox', () => {
  it('runs a manifest to the end, then resumes with nothing to do, then reruns only a changed job', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'm.yaml'), 6);
    const before = sb.stats().tasks_total;
    const r = await run(manifest, w.out);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.split('\n')[0]).toContain(`output in ${w.out}`);
    const jobs = readJobs(w.state);
    expect(jobs.map((j) => j.state)).toEqual(Array(6).fill('done'));
    expect(new Set(jobs.map((j) => j.task_id)).size).toBe(6);
    expect(sb.stats().tasks_total - before).toBe(6);
    expect(checkFiles(w.state, w.out)).toBeGreaterThanOrEqual(6);
    for (const j of jobs) {
      const result = JSON.parse(readFileSync(join(w.out, j.id, 'result.json'), 'utf8')) as { task_id: string; files: Array<{ size: number; sha256: string }> };
      expect(result.task_id).toBe(j.task_id);
      expect(result.files.length).toBeGreaterThan(0);
    }
    for (const f of ['report.json', 'report.csv', 'report.md', 'report.html']) expect(existsSync(join(w.out, f))).toBe(true);
    const report = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { summary: { counts: Record<string, number> } };
    expect(report.summary.counts.done).toBe(6);

    // Resume after completion: nothing submitted again, the reports left as they are.
    const reportTime = statSync(join(w.out, 'report.json')).mtimeMs;
    const again = await run(manifest, w.out);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('nothing changed');
    expect(statSync(join(w.out, 'report.json')).mtimeMs).toBe(reportTime);
    expect(sb.stats().tasks_total - before).toBe(6);
    expect(readJobs(w.state).map((j) => j.task_id)).toEqual(jobs.map((j) => j.task_id));

    // Change one job's prompt: only that job runs again.
    const text = readFileSync(manifest, 'utf8').replace('Picture number 3 of', 'Picture number 3 (changed) of');
    writeFileSync(manifest, text);
    const third = await run(manifest, w.out);
    expect(third.code).toBe(0);
    expect(sb.stats().tasks_total - before).toBe(7);
    const after = readJobs(w.state);
    expect(after.filter((j, i) => j.task_id !== jobs[i]!.task_id).map((j) => j.id)).toEqual(['img-0003']);
    expect(statSync(join(w.out, 'report.json')).mtimeMs).toBeGreaterThan(reportTime);
    expect(integrity(w.state)).toBe('ok');
    expect(findFiles(w.out, (n) => n.endsWith('.part'))).toEqual([]);
  });

  it('an invalid manifest exits 2 and submits nothing', async () => {
    const w = work();
    const manifest = join(w.dir, 'bad.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: a\n    model: alpha-image-2\n    input: { prompt: ok }\n  - id: b\n    model: alpha-image-2\n    input: { prompt: x, size: "7:1" }\n  - id: c\n    model: no-such-model\n    input: { prompt: x }\n');
    const before = sb.stats().tasks_total;
    const r = await run(manifest, w.out);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('job b');
    expect(r.stderr).toContain('job c');
    expect(sb.stats().tasks_total).toBe(before);
  });

  it('a submit of unknown outcome becomes uncertain, is not resubmitted, and --uncertain=resubmit sends it again', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'u.yaml'), 3, 'unc');
    const before = created()[Object.keys(created())[0]!] ?? 0;
    void before;
    const total0 = sb.stats().tasks_total;
    sb.script('submit', ['500-after']);
    const r = await run(manifest, w.out, ['--concurrency', '1']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(4);
    const jobs = readJobs(w.state);
    const unc = jobs.filter((j) => j.state === 'uncertain');
    expect(unc).toHaveLength(1);
    expect(jobs.filter((j) => j.state === 'done')).toHaveLength(2);
    // The 500 came after the task was created: 3 tasks exist for 2 known task ids.
    expect(sb.stats().tasks_total - total0).toBe(3);
    const report = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { summary: { counts: Record<string, number> } };
    expect(report.summary.counts.uncertain).toBe(1);

    const skip = await run(manifest, w.out);
    expect(skip.stderr).toBe('');
    expect(skip.code).toBe(4);
    expect(sb.stats().tasks_total - total0).toBe(3);

    const resubmit = await run(manifest, w.out, ['--uncertain', 'resubmit']);
    expect(resubmit.stderr).toBe('');
    expect(resubmit.code).toBe(0);
    expect(sb.stats().tasks_total - total0).toBe(4);
    expect(readJobs(w.state).every((j) => j.state === 'done')).toBe(true);
  });

  it('an account with 10 credits for 16 credits of work sends the 5 jobs 10 credits buy, in manifest order, says so, and exits 3 with the rest pending for the balance', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'p.yaml'), 8, 'poor');
    const total0 = sb.stats().tasks_total;
    const r = await run(manifest, w.out, ['--json'], 'sk-poor-key'); // 16 credits estimated, 10 in the account
    expect(r.code, r.stderr).toBe(EXIT.budget);
    expect(r.stdout).toContain('"type":"held","over":["the known estimate of 16 credits for the jobs left to run exceeds the balance of 10 credits"],"sent":5,"sent_credits":10');
    expect(sb.stats().tasks_total - total0).toBe(5);
    const jobs = readJobs(w.state);
    expect(jobs.filter((j) => j.state === 'done').map((j) => j.id)).toEqual(['poor-0000', 'poor-0001', 'poor-0002', 'poor-0003', 'poor-0004']);
    const last = JSON.parse(r.stdout.trim().split('\n').pop()!) as { type: string; exit_code: number; not_done: Record<string, { count: number; ids: string[] }> };
    expect(last).toMatchObject({ type: 'summary', exit_code: EXIT.budget, not_done: { 'pending: over the balance of 10 credits': { count: 3, ids: ['poor-0005', 'poor-0006', 'poor-0007'] } } });
  });

  it('402 insufficient credits stops new submissions cleanly: the rest stay pending, exit 3 (the balance)', async () => {
    const w = work();
    // kontext-pro has no contract price, so the estimate cannot refuse; the sandbox charges per image.
    const lines = ['jobs:'];
    for (let i = 0; i < 8; i++) lines.push(`  - id: k${i}`, '    model: kontext-pro', '    input:', `      prompt: "A castle number ${i}"`);
    const manifest = join(w.dir, 'k.yaml');
    writeFileSync(manifest, lines.join('\n') + '\n');
    const total0 = sb.stats().tasks_total;
    const r = await run(manifest, w.out, ['--concurrency', '1'], 'sk-402-key');
    expect(r.code).toBe(EXIT.budget);
    expect(r.stderr).toContain('402');
    const jobs = readJobs(w.state);
    const withTask = jobs.filter((j) => j.task_id !== null);
    expect(withTask.length).toBe(2);
    expect(withTask.every((j) => j.state === 'done')).toBe(true);
    expect(jobs.filter((j) => j.state === 'pending').length).toBe(8 - withTask.length);
    expect(sb.stats().tasks_total - total0).toBe(withTask.length);
  });

  it('SIGINT stops cleanly (exit 130, report written, nothing half-submitted); a rerun finishes without duplicates', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 's.yaml'), 40, 'sig');
    const total0 = sb.stats().tasks_total;
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--concurrency', '2'];
    const first = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawnCli(args, { GENBATCH_API_KEY: KEY });
      let stdout = '';
      let stderr = '';
      let sent = false;
      child.stdout!.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (!sent && stdout.includes('estimate')) {
          sent = true;
          child.kill('SIGINT');
        }
      });
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('exit', (code) => resolve({ code, stderr }));
    });
    expect(first.stderr).toContain('stopping');
    expect(first.code).toBe(130);
    expect(existsSync(join(w.out, 'report.json'))).toBe(true);
    const mid = readJobs(w.state);
    expect(mid.filter((j) => j.state === 'submitting')).toEqual([]);
    expect(mid.filter((j) => j.state === 'pending').length).toBeGreaterThan(0);
    const rest = await runCli(args, { GENBATCH_API_KEY: KEY });
    expect(rest.code).toBe(0);
    expect(sb.stats().tasks_total - total0).toBe(40);
  });

  it('uploads each local image once (by content), reuses it across jobs and runs, and replaces the path with the URL', async () => {
    const w = work();
    const png = readFileSync(join(import.meta.dirname, '..', 'manifests', 'assets', 'demo-tiles.png'));
    writeFileSync(join(w.dir, 'a.png'), png);
    writeFileSync(join(w.dir, 'same-bytes.png'), png);
    writeFileSync(join(w.dir, 'b.png'), readFileSync(join(import.meta.dirname, '..', 'manifests', 'assets', 'demo-sunrise.png')));
    const job = (id: string, file: string, prompt: string) => `  - id: ${id}\n    model: alpha-image-2-edit\n    input:\n      prompt: "${prompt}"\n      image_urls: ["${file}"]\n`;
    const manifest = join(w.dir, 'up.yaml');
    const dataUrl = `data:image/png;base64,${png.toString('base64')}`;
    writeFileSync(manifest, 'jobs:\n' + job('e1', 'a.png', 'one') + job('e2', 'same-bytes.png', 'two') + job('e3', 'b.png', 'three') + job('e4', 'a.png', 'four') + job('e5', dataUrl, 'five'));
    const up0 = sb.stats().uploads;
    const r = await run(manifest, w.out);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const up1 = sb.stats().uploads;
    expect(up1.accepted - up0.accepted).toBe(3); // a.png (= same-bytes.png), b.png, and the Data URL through the base64 endpoint
    expect(up1.refused - up0.refused).toBe(0);
    const result = JSON.parse(readFileSync(join(w.out, 'e2', 'result.json'), 'utf8')) as { input: { image_urls: string[] } };
    expect(result.input.image_urls[0]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//);
    const viaData = JSON.parse(readFileSync(join(w.out, 'e5', 'result.json'), 'utf8')) as { input: { image_urls: string[] } };
    expect(viaData.input.image_urls[0]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//);
    // A changed job in a later run reuses the earlier upload.
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('"four"', '"four, changed"'));
    const again = await run(manifest, w.out);
    expect(again.code).toBe(0);
    expect(sb.stats().uploads.accepted - up1.accepted).toBe(0);
  });

  it('a result found past its 24 h validity is reported expired, not retried forever', async () => {
    const slow = await startSandbox({ port: 0, keys: { [KEY]: 10_000 }, timeScale: 0.05, seed: 5 });
    try {
      const w = work();
      const manifest = imageManifest(join(w.dir, 'x.yaml'), 3, 'exp');
      const args = ['run', manifest, '--base-url', slow.url, '--time-scale', '0.05', '--out', w.out, '--json'];
      // First run: stop (SIGINT) once every job is submitted, before any task finishes.
      const first = await new Promise<number | null>((resolve) => {
        const child = spawnCli(args, { GENBATCH_API_KEY: KEY });
        let text = '';
        let submitted = 0;
        let stopped = false;
        child.stdout!.on('data', (d: Buffer) => {
          text += d.toString();
          const lines = text.split('\n');
          text = lines.pop() ?? '';
          for (const l of lines) if (l.includes('"to":"submitted"')) submitted++;
          if (submitted === 3 && !stopped) {
            stopped = true;
            child.kill('SIGINT');
          }
        });
        child.stderr!.resume();
        child.on('exit', (code) => resolve(code));
      });
      expect(first).toBe(130);
      expect(readJobs(w.state).map((j) => j.state)).toEqual(['submitted', 'submitted', 'submitted']);
      slow.clock.advance(25 * 3600);
      const second = await runCli(args, { GENBATCH_API_KEY: KEY });
      expect(second.code).toBe(4);
      const jobs = readJobs(w.state);
      expect(jobs.map((j) => j.state)).toEqual(['expired', 'expired', 'expired']);
      const report = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { summary: { counts: Record<string, number> } };
      expect(report.summary.counts.expired).toBe(3);
    } finally {
      await slow.close();
    }
  });

  it('--max-credits 5 for 8 credits of work sends the 2 jobs that fit (exit 5, the rest pending); --max-credits 8 sends the rest; status and report read the state file', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'mc.yaml'), 4, 'mc');
    const total0 = sb.stats().tasks_total;
    const capped = await run(manifest, w.out, ['--max-credits', '5']); // 4 jobs x 2 credits
    expect(capped.code, capped.stderr).toBe(EXIT.capReached);
    expect(capped.stderr).toContain('the known estimate of 8 credits exceeds --max-credits 5: sending the 2 job(s) that fit (4 credits)');
    expect(sb.stats().tasks_total - total0).toBe(2);
    expect(readJobs(w.state).filter((j) => j.state === 'pending').map((j) => j.id)).toEqual(['mc-0002', 'mc-0003']);
    const ok = await run(manifest, w.out, ['--max-credits', '8']);
    expect(ok.code).toBe(0);
    const status = await runCli(['status', '--state', w.state, '--json', '--jobs']);
    expect(status.code).toBe(0);
    const parsed = JSON.parse(status.stdout) as { counts: Record<string, number>; jobs: Array<{ id: string; state: string }> };
    expect(parsed.counts.done).toBe(4);
    expect(parsed.jobs.map((j) => j.id)).toEqual(['mc-0000', 'mc-0001', 'mc-0002', 'mc-0003']);
    const other = join(w.dir, 'again');
    const rep = await runCli(['report', '--state', w.state, '--out', other]);
    expect(rep.code).toBe(0);
    const report = JSON.parse(readFileSync(join(other, 'report.json'), 'utf8')) as { summary: { counts: Record<string, number> } };
    expect(report.summary.counts.done).toBe(4);
  });

  it('a second SIGINT ends the run at once; the state stays consistent and the next run finishes', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'dbl.yaml'), 200, 'dbl');
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--concurrency', '4'];
    const first = await new Promise<{ code: number | null; signal: string | null }>((resolve) => {
      const child = spawnCli(args, { GENBATCH_API_KEY: KEY });
      let out = '';
      let sent = false;
      child.stdout!.on('data', (d: Buffer) => {
        out += d.toString();
        if (!sent && out.includes('estimate')) {
          sent = true;
          setTimeout(() => {
            child.kill('SIGINT');
            setTimeout(() => child.kill('SIGINT'), 5);
          }, 50);
        }
      });
      child.stderr!.resume();
      child.on('exit', (code, signal) => resolve({ code, signal }));
    });
    expect(first.code === 130 || first.signal === 'SIGINT').toBe(true);
    expect(integrity(w.state)).toBe('ok');
    const rest = await run(manifest, w.out);
    expect([0, 4]).toContain(rest.code);
    const jobs = readJobs(w.state);
    expect(jobs.filter((j) => j.state !== 'done' && j.state !== 'uncertain')).toEqual([]);
  });

  it('refuses a second writer while the state file is leased by a live process', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'l.yaml'), 2, 'lease');
    const holder = Store.openForWrite(w.state); // this test process holds the lease
    try {
      const r = await run(manifest, w.out);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`in use by pid ${process.pid}`);
    } finally {
      holder.close();
    }
    const after = await run(manifest, w.out);
    expect(after.code).toBe(0);
  });

  it('keeps the upload limit with its own window: 8 distinct images, no 429 from the service', async () => {
    const w = work();
    const lines = ['jobs:'];
    for (let i = 0; i < 8; i++) {
      writeFileSync(join(w.dir, `p${i}.png`), solidPng(16, 16, [i * 30, 100, 200 - i * 20]));
      lines.push(`  - id: p${i}`, '    model: alpha-image-2-edit', '    input:', `      prompt: "edit ${i}"`, `      image_urls: ["p${i}.png"]`);
    }
    const manifest = join(w.dir, 'lim.yaml');
    writeFileSync(manifest, lines.join('\n') + '\n');
    const up0 = sb.stats().uploads;
    const r = await run(manifest, w.out, ['--concurrency', '8']);
    expect(r.code).toBe(0);
    const up1 = sb.stats().uploads;
    expect(up1.accepted - up0.accepted).toBe(8);
    expect(up1.refused - up0.refused).toBe(0);
  });
});
