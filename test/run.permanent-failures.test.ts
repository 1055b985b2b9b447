import Database from 'better-sqlite3';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { forgetService } from './helpers/verify.js';
import { admin } from './helpers/admin.js';

/**
 * Permanent failures (issue #26 item 3): a job the service refused for its input (a 400
 * content_moderation_error at submit: sandbox banned word `forbidden`; a task failed with a content-policy text:
 * policy word `unsafe-output`) is `failed` with `permanent = 1`; a plain generation failure (fail word
 * `fail-output`) is `failed` with `permanent = 0`. `--redo failed` passes the permanent ones over unless --only
 * names their id; `--redo failed-permanent` takes them; a changed spec sends them again. The exit code is 6 when
 * every job is done apart from permanent failures. CLI as a child process, the sandbox in this process.
 */
const SCALE = '0.005';
const KEY = 'sk-run-permanent-0123456789abcdef';
const env = { GENBATCH_API_KEY: KEY };

let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 21 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-permanent-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

const PROMPTS: Record<string, string> = {
  ok: 'a quiet harbour',
  moderated: 'a forbidden harbour',
  policy: 'an unsafe-output harbour',
  flaky: 'a fail-output harbour',
};

/** One image job per id; the id's prefix (before `-`) picks its prompt from PROMPTS. */
function manifest(dir: string, ids: string[], prompts: Record<string, string> = {}): string {
  const lines = ['jobs:'];
  for (const id of ids) lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "${prompts[id] ?? PROMPTS[id.split('-')[0]!]} for ${id}"`);
  const path = join(dir, 'm.yaml');
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

const args = (m: string, out: string, ...more: string[]) => ['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, ...more];

/** id:state:permanent:attempts of every job, read from the state file. */
function jobs(state: string): string[] {
  const db = new Database(state, { readonly: true });
  try {
    return (db.prepare('SELECT id, state, permanent, attempts FROM jobs ORDER BY seq').all() as Array<{ id: string; state: string; permanent: number; attempts: number }>).map((j) => `${j.id}:${j.state}:${j.permanent}:${j.attempts}`);
  } finally {
    db.close();
  }
}

async function taskCount(): Promise<number> {
  return ((await (await fetch(`${sb.url}/__sandbox/stats`, admin(sb))).json()) as { tasks_total: number }).tasks_total;
}

describe('permanent failures', () => {
  it('a 400 content_moderation_error and a content-policy task failure are failed with permanent = 1; a generation error is not; the reports and the summary list them apart', async () => {
    const w = work();
    const m = manifest(w.dir, ['ok-1', 'moderated-1', 'policy-1', 'flaky-1']);
    const r = await runCli(args(m, w.out), env);
    expect(r.code, r.stderr).toBe(1);
    expect(jobs(w.state)).toEqual(['ok-1:done:0:1', 'moderated-1:failed:1:1', 'policy-1:failed:1:1', 'flaky-1:failed:0:1']);
    const report = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { summary: { failed_permanent: number }; jobs: Array<{ id: string; permanent?: boolean }> };
    expect(report.summary.failed_permanent).toBe(2);
    expect(report.jobs.map((j) => [j.id, j.permanent ?? false])).toEqual([
      ['ok-1', false],
      ['moderated-1', true],
      ['policy-1', true],
      ['flaky-1', false],
    ]);
    expect(r.stdout).toContain('genbatch: failed permanently (the service refused their input; --redo failed passes them over): moderated-1, policy-1\n');
    expect(r.stdout).toContain('--redo failed-permanent\n');
  }, 60_000);

  it('--redo failed sends only the failures a retry may fix; with only permanent failures left the exit code is 6; --only naming one by id sends it; --redo failed-permanent sends the rest', async () => {
    const w = work();
    const m = manifest(w.dir, ['ok-1', 'moderated-1', 'policy-1', 'policy-2', 'flaky-1']);
    expect((await runCli(args(m, w.out), env)).code).toBe(1);
    // The fail word gone from the sandbox's list: the flaky job now succeeds when sent again.
    const flaky = manifest(w.dir, ['ok-1', 'moderated-1', 'policy-1', 'policy-2', 'flaky-1']);
    const t0 = await taskCount();
    const fixedFlaky = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 22, failWords: [] });
    try {
      forgetService(join(w.out, 'state.db')); // the fixed service is another sandbox here
      const second = await runCli(['run', flaky, '--base-url', fixedFlaky.url, '--time-scale', SCALE, '--out', w.out, '--redo', 'failed'], env);
      expect(second.stdout).toContain('genbatch: --redo failed: 1 job(s) sent again\n');
      expect(second.code, second.stdout + second.stderr).toBe(6);
      expect(jobs(w.state)).toEqual(['ok-1:done:0:1', 'moderated-1:failed:1:1', 'policy-1:failed:1:1', 'policy-2:failed:1:1', 'flaky-1:done:0:2']);
      expect(second.stdout).not.toContain('to send the failed jobs again');
    } finally {
      await fixedFlaky.close();
    }
    expect(await taskCount()).toBe(t0);
    // Named by its id: sent again (it fails the same way here; attempts show it was sent).
    forgetService(join(w.out, 'state.db')); // back to the first sandbox
    const third = await runCli(args(m, w.out, '--redo', 'failed', '--only', 'policy-1'), env);
    expect(third.stdout).toContain('genbatch: --redo failed: 1 job(s) sent again\n');
    expect(third.code).toBe(6);
    // A glob does not name it: nothing is sent.
    const globbed = await runCli(args(m, w.out, '--redo', 'failed', '--only', 'policy-*'), env);
    expect(globbed.stdout).toContain('genbatch: --redo failed: 0 job(s) sent again\n');
    expect(jobs(w.state)).toEqual(['ok-1:done:0:1', 'moderated-1:failed:1:1', 'policy-1:failed:1:2', 'policy-2:failed:1:1', 'flaky-1:done:0:2']);
    expect(await taskCount()).toBe(t0 + 1);
    const fourth = await runCli(args(m, w.out, '--redo', 'failed-permanent'), env);
    expect(fourth.stdout).toContain('genbatch: --redo failed-permanent: 3 job(s) sent again\n');
    expect(jobs(w.state)).toEqual(['ok-1:done:0:1', 'moderated-1:failed:1:2', 'policy-1:failed:1:3', 'policy-2:failed:1:2', 'flaky-1:done:0:2']);
    // The 400 creates no task: two policy tasks more.
    expect(await taskCount()).toBe(t0 + 3);
  }, 90_000);

  it('a permanent failure whose spec changed is sent again by a plain run, and its mark goes when it succeeds', async () => {
    const w = work();
    const ids = ['ok-1', 'policy-1'];
    expect((await runCli(args(manifest(w.dir, ids), w.out), env)).code).toBe(6);
    expect(jobs(w.state)).toEqual(['ok-1:done:0:1', 'policy-1:failed:1:1']);
    // Unchanged: a plain run sends nothing.
    const t0 = await taskCount();
    expect((await runCli(args(manifest(w.dir, ids), w.out), env)).code).toBe(6);
    expect(await taskCount()).toBe(t0);
    const r = await runCli(args(manifest(w.dir, ids, { 'policy-1': 'a calm harbour' }), w.out), env);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(jobs(w.state)).toEqual(['ok-1:done:0:1', 'policy-1:done:0:2']);
    const report = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { summary: { failed_permanent: number }; jobs: Array<{ id: string; permanent?: boolean }> };
    expect(report.summary.failed_permanent).toBe(0);
    expect(report.jobs.every((j) => j.permanent === undefined)).toBe(true);
  }, 60_000);
});
