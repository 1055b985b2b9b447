import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs, forgetService } from './helpers/verify.js';
import { admin } from './helpers/admin.js';

/**
 * `genbatch run --redo failed|expired`: the jobs that ended failed (or whose results expired) are sent again
 * without editing the manifest; done jobs are left as they are. CLI as a child process, sandboxes in this
 * process. Failures are made deterministic with the sandbox's fail words: a prompt holding `fail-output`
 * is accepted, then fails with a plain generation error, one a retry may fix (sandbox `failing`; a content-policy
 * failure is permanent: test/run.permanent-failures.test.ts); the second sandbox (`fixed`) has no fail words, so the
 * same jobs sent again there succeed, and its task list holds exactly what the redo sent.
 */
const SCALE = '0.005';
const KEY = 'sk-run-redo-0123456789abcdef';
const env = { GENBATCH_API_KEY: KEY };

let failing: Sandbox;
let fixed: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  failing = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 11 });
  fixed = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 12, policyWords: [], failWords: [] });
}, 60_000);
afterAll(async () => {
  await failing?.close();
  await fixed?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-redo-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

const args = (sb: Sandbox, manifest: string, out: string, ...more: string[]) => ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, ...more];

async function tasksOf(sb: Sandbox): Promise<string[]> {
  const body = (await (await fetch(`${sb.url}/__sandbox/tasks`, admin(sb))).json()) as { tasks: Array<{ task_id: string }> };
  return body.tasks.map((t) => t.task_id).sort();
}

/** Every file under `dir` (relative path -> sha256 and mtime): to show a folder was left as it was. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p, `${rel}${e.name}/`);
      else out[rel + e.name] = `${createHash('sha256').update(readFileSync(p)).digest('hex')} ${statSync(p).mtimeMs}`;
    }
  };
  walk(dir, '');
  return out;
}

/** A manifest of plain image jobs: `bad` ids get a prompt that fails on the `failing` sandbox. */
function manifest(dir: string, ids: string[], bad: ReadonlySet<string>, extra = ''): string {
  const lines = ['jobs:'];
  for (const id of ids) lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "${bad.has(id) ? 'a fail-output picture' : 'a quiet harbour'} for ${id}"`);
  const path = join(dir, 'm.yaml');
  writeFileSync(path, lines.join('\n') + '\n' + extra);
  return path;
}

const reportJobs = (out: string) =>
  (JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; state: string; attempts: number }> }).jobs;

describe('genbatch run --redo', () => {
  it('--redo failed sends exactly the failed jobs again (one new task each); done jobs are not sent and their files stay as they were; attempts keep counting', async () => {
    const w = work();
    const ids = ['ok-1', 'bad-1', 'ok-2', 'bad-2', 'ok-3'];
    const m = manifest(w.dir, ids, new Set(['bad-1', 'bad-2']));
    const first = await runCli(args(failing, m, w.out), env);
    expect(first.code).toBe(1);
    expect(readJobs(w.state).map((j) => `${j.id}:${j.state}`)).toEqual(['ok-1:done', 'bad-1:failed', 'ok-2:done', 'bad-2:failed', 'ok-3:done']);
    // The summary names the failed jobs and the flag that sends them again.
    expect(first.stdout).toContain('genbatch: failed: bad-1, bad-2\n');
    expect(first.stdout).toContain(`--redo failed`);
    const done = Object.fromEntries(['ok-1', 'ok-2', 'ok-3'].map((id) => [id, snapshot(join(w.out, id))]));
    const before = readJobs(w.state);
    const tasks0 = await tasksOf(fixed);

    forgetService(w.state); // the fixed service is another sandbox here
    const second = await runCli(args(fixed, m, w.out, '--redo', 'failed'), env);
    expect(second.stderr).toBe('');
    expect(second.code).toBe(0);
    // The estimate and the checks cover the jobs sent again (2 credits each), like any job to be sent.
    expect(second.stdout).toContain('genbatch: --redo failed: 2 job(s) sent again\n');
    expect(second.stdout).toContain('genbatch: estimate 4 credits for the jobs left;');
    const after = readJobs(w.state);
    // The new sandbox got exactly one task per failed job, and they are the tasks the state file holds for them.
    const sent = after.filter((j) => j.id.startsWith('bad-'));
    expect((await tasksOf(fixed)).filter((t) => !tasks0.includes(t))).toEqual(sent.map((j) => j.task_id).sort());
    expect(sent.map((j) => [j.id, j.state, j.attempts])).toEqual([
      ['bad-1', 'done', 2],
      ['bad-2', 'done', 2],
    ]);
    // Done jobs: same task, one attempt, the same bytes and mtimes on disk.
    for (const id of ['ok-1', 'ok-2', 'ok-3']) {
      expect(after.find((j) => j.id === id)).toEqual(before.find((j) => j.id === id));
      expect(snapshot(join(w.out, id))).toEqual(done[id]);
    }
    expect(reportJobs(w.out).map((j) => [j.id, j.attempts])).toEqual([
      ['ok-1', 1],
      ['bad-1', 2],
      ['ok-2', 1],
      ['bad-2', 2],
      ['ok-3', 1],
    ]);
    // Nothing failed any more: nothing is sent by a second --redo failed.
    const third = await runCli(args(fixed, m, w.out, '--redo', 'failed'), env);
    expect(third.code).toBe(0);
    expect((await tasksOf(fixed)).length - tasks0.length).toBe(2);
  }, 60_000);

  it('lists the first 20 failed ids and how many more', async () => {
    const w = work();
    const ids = Array.from({ length: 23 }, (_, i) => `bad-${String(i).padStart(2, '0')}`);
    const m = manifest(w.dir, ids, new Set(ids));
    const r = await runCli(args(failing, m, w.out, '--concurrency', '23'), env);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`genbatch: failed: ${ids.slice(0, 20).join(', ')}, and 3 more\n`);
    expect(r.stdout).toContain(`genbatch: to send the failed jobs again: genbatch run ${m} --out ${w.out} --base-url ${failing.url} --time-scale ${SCALE} --concurrency 23 --redo failed\n`);
  }, 60_000);

  it('a failed job graph parent sent again with --redo failed brings back the jobs skipped because of it', async () => {
    const w = work();
    const m = manifest(
      w.dir,
      ['parent'],
      new Set(['parent']),
      ['  - id: child', '    needs: [parent]', '    model: alpha-image-2', '    input:', '      prompt: "a child of the parent"', ''].join('\n'),
    );
    const first = await runCli(args(failing, m, w.out), env);
    expect(first.code).toBe(1);
    expect(readJobs(w.state).map((j) => `${j.id}:${j.state}`)).toEqual(['parent:failed', 'child:skipped']);
    const tasks0 = await tasksOf(fixed);
    forgetService(w.state); // the fixed service is another sandbox here
    const second = await runCli(args(fixed, m, w.out, '--redo', 'failed'), env);
    expect(second.code).toBe(0);
    // The child comes back with its parent: both are in the estimate.
    expect(second.stdout).toContain('genbatch: --redo failed: 1 job(s) sent again\n');
    expect(second.stdout).toContain('genbatch: estimate 4 credits for the jobs left;');
    const after = readJobs(w.state);
    expect(after.map((j) => `${j.id}:${j.state}:${j.attempts}`)).toEqual(['parent:done:2', 'child:done:1']);
    expect((await tasksOf(fixed)).filter((t) => !tasks0.includes(t))).toEqual(after.map((j) => j.task_id).sort());
  }, 60_000);

  it('--redo expired sends the jobs whose results expired again; their folder moves to previous-1/; a comma list takes failed and expired', async () => {
    const w = work();
    // Its own sandbox: the clock is moved on (files expire 24 h after their task finished).
    const sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 13 });
    try {
      const m = manifest(w.dir, ['old-1', 'old-2', 'bad-1', 'new-1'], new Set(['bad-1']));
      // Run 1 sends old-1, old-2 and bad-1 and is stopped once they are sent: with the runner's own time scale
      // at 1 its first status read is 15 s away, so they stay `submitted` whatever the machine's load.
      const child = spawnCli(['run', m, '--base-url', sb.url, '--time-scale', '1', '--out', w.out, '--only', 'old-*,bad-1', '--json'], env);
      let submitted = 0;
      let rest = '';
      child.stdout!.on('data', (d: Buffer) => {
        const lines = (rest + d.toString()).split('\n');
        rest = lines.pop() ?? '';
        for (const l of lines) {
          const e = JSON.parse(l) as { type: string; to?: string };
          if (e.type === 'job' && e.to === 'submitted' && ++submitted === 3) child.kill('SIGINT');
        }
      });
      const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
      expect(code).toBe(130);
      // 25 h later: the tasks are finished and their files gone (410).
      sb.clock.advance(90_000);
      const second = await runCli(args(sb, m, w.out), env);
      expect(second.code).toBe(4);
      expect(readJobs(w.state).map((j) => `${j.id}:${j.state}`)).toEqual(['old-1:expired', 'old-2:expired', 'bad-1:failed', 'new-1:done']);
      expect(second.stdout).toContain('genbatch: expired: old-1, old-2\n');
      expect(second.stdout).toContain('--redo failed,expired\n');
      // Something the job's folder held (e.g. a file downloaded before the others expired) is kept aside.
      writeFileSync(join(w.out, 'old-1', 'kept.txt'), 'from before');
      const newOne = snapshot(join(w.out, 'new-1'));
      const tasks0 = (await tasksOf(sb)).length;

      const third = await runCli(args(sb, m, w.out, '--redo', 'expired'), env);
      expect(third.code).toBe(1); // bad-1 is still failed
      const after = readJobs(w.state);
      expect(after.map((j) => `${j.id}:${j.state}:${j.attempts}`)).toEqual(['old-1:done:2', 'old-2:done:2', 'bad-1:failed:1', 'new-1:done:1']);
      expect((await tasksOf(sb)).length - tasks0).toBe(2);
      expect(readFileSync(join(w.out, 'old-1', 'previous-1', 'kept.txt'), 'utf8')).toBe('from before');
      expect(existsSync(join(w.out, 'old-1', 'result.json'))).toBe(true);
      expect(snapshot(join(w.out, 'new-1'))).toEqual(newOne);

      // A comma list takes both states: bad-1 (failed) is sent once more, nothing else.
      const fourth = await runCli(args(sb, m, w.out, '--redo', 'failed,expired'), env);
      expect(fourth.code).toBe(1);
      expect((await tasksOf(sb)).length - tasks0).toBe(3);
      expect(readJobs(w.state).map((j) => `${j.id}:${j.state}:${j.attempts}`)).toEqual(['old-1:done:2', 'old-2:done:2', 'bad-1:failed:2', 'new-1:done:1']);
    } finally {
      await sb.close();
    }
  }, 90_000);

  it('an unknown --redo value is a usage error (exit 2) naming the allowed values; nothing is read or sent', async () => {
    const w = work();
    const m = manifest(w.dir, ['a'], new Set());
    const tasks0 = (await tasksOf(fixed)).length;
    const r = await runCli(args(fixed, m, w.out, '--redo', 'failed,approved'), env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--redo expects a comma list of failed, failed-permanent, expired, rejected, changed, got "failed,approved" ("approved" is not one of them)');
    expect(existsSync(w.state)).toBe(false);
    expect((await tasksOf(fixed)).length).toBe(tasks0);
  }, 30_000);
});
