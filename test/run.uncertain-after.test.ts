import Database from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { admin } from './helpers/admin.js';

/**
 * `--uncertain resubmit-after=DURATION` (issue #26 item 4): an uncertain job (its submit answered 500 after the
 * task was created: sandbox fault 500-after) is sent again once it has been uncertain for DURATION with no sign
 * of its task, with a warning that a charge may be doubled; before that it stays uncertain. The age is made by
 * editing jobs.uncertain_at in the real state file between runs. The end-of-run summary names the uncertain
 * jobs and the command that sends them again. CLI as a child process, the sandbox in this process.
 */
const SCALE = '0.005';
const KEY = 'sk-run-uncertain-after-0123456789abcdef';
const env = { GENBATCH_API_KEY: KEY };

let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 41 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

async function taskCount(): Promise<number> {
  return ((await (await fetch(`${sb.url}/__sandbox/stats`, admin(sb))).json()) as { tasks_total: number }).tasks_total;
}

function jobs(state: string): Array<{ id: string; state: string; uncertain_at: string | null; attempts: number }> {
  const db = new Database(state, { readonly: true });
  try {
    return db.prepare('SELECT id, state, uncertain_at, attempts FROM jobs ORDER BY seq').all() as Array<{ id: string; state: string; uncertain_at: string | null; attempts: number }>;
  } finally {
    db.close();
  }
}

describe('--uncertain resubmit-after', () => {
  it('an uncertain job is left alone until it has been uncertain for DURATION, then sent again with a warning; the summary prints the command for uncertain jobs', async () => {
    const t = tempDir('genbatch-uncertain-after-');
    cleanups.push(t.cleanup);
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const m = join(t.dir, 'm.yaml');
    writeFileSync(m, ['jobs:', ...['a', 'b'].flatMap((id) => [`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "a quiet harbour for ${id}"`])].join('\n') + '\n');
    const args = (...more: string[]) => ['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--concurrency', '1', ...more];

    const t0 = await taskCount();
    sb.script('submit', ['500-after']);
    const first = await runCli(args('--uncertain', 'resubmit-after=24h'), env);
    expect(first.code, first.stdout + first.stderr).toBe(4);
    const [a] = jobs(state);
    expect(a).toMatchObject({ id: 'a', state: 'uncertain', attempts: 1 });
    expect(Date.now() - Date.parse(a!.uncertain_at!)).toBeLessThan(10 * 60_000);
    expect(first.stdout).toContain('genbatch: uncertain (their submit\'s outcome is unknown; a task may exist): a\n');
    expect(first.stdout).toContain(`--uncertain resubmit\n`);
    expect(first.stdout).toMatch(/genbatch: to send the uncertain jobs again \(a charge may be doubled\): genbatch run \S+ --out \S+ .*--uncertain resubmit\n/);
    expect((await taskCount()) - t0).toBe(2);

    // Uncertain for less than 24 h: left alone.
    const second = await runCli(args('--uncertain', 'resubmit-after=24h'), env);
    expect(second.code).toBe(4);
    expect(jobs(state)[0]).toMatchObject({ state: 'uncertain', attempts: 1 });
    expect((await taskCount()) - t0).toBe(2);

    // 25 h ago: sent again, with the warning.
    const db = new Database(state);
    db.prepare('UPDATE jobs SET uncertain_at = ? WHERE id = ?').run(new Date(Date.now() - 25 * 3_600_000).toISOString(), 'a');
    db.close();
    const third = await runCli(args('--uncertain', 'resubmit-after=24h'), env);
    expect(third.code, third.stdout + third.stderr).toBe(0);
    expect(third.stdout + third.stderr).toContain('1 uncertain job(s) showed no sign of their task within 24h and are sent again (--uncertain resubmit-after): if their first task was created after all, it is charged too (a charge may be doubled): a');
    expect(jobs(state)[0]).toMatchObject({ state: 'done', attempts: 2 });
    expect((await taskCount()) - t0).toBe(3);
  }, 90_000);

  it('a plain run leaves an old uncertain job as it is (the default stays skip)', async () => {
    const t = tempDir('genbatch-uncertain-after-');
    cleanups.push(t.cleanup);
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const m = join(t.dir, 'm.yaml');
    writeFileSync(m, ['jobs:', '  - id: a', '    model: alpha-image-2', '    input:', '      prompt: "a quiet harbour"'].join('\n') + '\n');
    const args = ['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', out];
    sb.script('submit', ['500-after']);
    expect((await runCli(args, env)).code).toBe(4);
    const db = new Database(state);
    db.prepare('UPDATE jobs SET uncertain_at = ?').run(new Date(Date.now() - 30 * 86_400_000).toISOString());
    db.close();
    const t0 = await taskCount();
    expect((await runCli(args, env)).code).toBe(4);
    expect(jobs(state)[0]).toMatchObject({ state: 'uncertain', attempts: 1 });
    expect(await taskCount()).toBe(t0);
  }, 60_000);

  it('a duration that is not one is a usage error (exit 2) and nothing is read or sent', async () => {
    const t = tempDir('genbatch-uncertain-after-');
    cleanups.push(t.cleanup);
    const m = join(t.dir, 'm.yaml');
    writeFileSync(m, ['jobs:', '  - id: a', '    model: alpha-image-2', '    input:', '      prompt: "a quiet harbour"'].join('\n') + '\n');
    const t0 = await taskCount();
    const r = await runCli(['run', m, '--base-url', sb.url, '--out', join(t.dir, 'out'), '--uncertain', 'resubmit-after=soon'], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--uncertain resubmit-after expects a duration such as 24h, 90m, 1h30m, 2d or 45s, got "soon"');
    expect(await taskCount()).toBe(t0);
  }, 30_000);
});
