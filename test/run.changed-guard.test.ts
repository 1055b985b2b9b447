import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { admin } from './helpers/admin.js';

/**
 * The guard on mass re-sends (issue #26 item 5): a manifest edit that would send more than --max-changed
 * (default 10) done jobs again stops the run before anything is recorded or sent (exit 4), with the count, three
 * examples of the change and their estimate; --redo changed (or --yes) sends them, --keep-changed keeps their
 * results (changed-not-sent, in status and report.json) until --redo changed. CLI as a child process, the
 * sandbox in this process (alpha-image-2: 2 credits a job).
 */
const SCALE = '0.005';
const KEY = 'sk-run-changed-guard-0123456789abcdef';
const env = { GENBATCH_API_KEY: KEY };

let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 31 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string; m: string } {
  const t = tempDir('genbatch-changed-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db'), m: join(t.dir, 'm.yaml') };
}

const IDS = Array.from({ length: 12 }, (_, i) => `j-${String(i + 1).padStart(2, '0')}`);

/** 12 image jobs from one template: `words` is the part an edit changes; `edited` ids take `words`, the rest "a quiet harbour". */
function write(path: string, words: string, edited: readonly string[] = IDS): void {
  const lines = ['jobs:'];
  for (const id of IDS) lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "${edited.includes(id) ? words : 'a quiet harbour'} for ${id}"`);
  writeFileSync(path, lines.join('\n') + '\n');
}

const args = (w: { m: string; out: string }, ...more: string[]) => ['run', w.m, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, ...more];

async function taskCount(): Promise<number> {
  return ((await (await fetch(`${sb.url}/__sandbox/stats`, admin(sb))).json()) as { tasks_total: number }).tasks_total;
}

/** id:state:task of every job. */
function rows(state: string): string[] {
  const db = new Database(state, { readonly: true });
  try {
    return (db.prepare('SELECT id, state, task_id FROM jobs ORDER BY seq').all() as Array<{ id: string; state: string; task_id: string }>).map((j) => `${j.id}:${j.state}:${j.task_id}`);
  } finally {
    db.close();
  }
}

describe('the guard on mass re-sends', () => {
  it('an edit that would send 12 done jobs again stops before anything is sent (exit 4), naming the count, 3 examples and the estimate; --redo changed sends them', async () => {
    const w = work();
    write(w.m, 'a quiet harbour');
    expect((await runCli(args(w), env)).code).toBe(0);
    const before = rows(w.state);
    const t0 = await taskCount();
    write(w.m, 'a stormy harbour at night');
    const r = await runCli(args(w), env);
    expect(r.code, r.stdout + r.stderr).toBe(4);
    expect(r.stderr).toContain('the manifest change would send 12 finished (done) jobs again, estimated 24 credits; more than --max-changed 10:\n');
    expect(r.stderr).toContain('  j-01: input.prompt: "a quiet harbour for j-01" -> "a stormy harbour at night for j-01"\n');
    expect(r.stderr).toContain('  j-03: input.prompt:');
    expect(r.stderr).not.toContain('  j-04:');
    expect(r.stderr).toContain('  and 9 more\n');
    expect(r.stderr).toContain('--redo changed (or --yes)');
    // Nothing sent, nothing recorded, no file moved aside.
    expect(await taskCount()).toBe(t0);
    expect(rows(w.state)).toEqual(before);
    expect(existsSync(join(w.out, 'j-01', 'previous-1'))).toBe(false);
    // The same refusal again: the decision was not taken.
    expect((await runCli(args(w), env)).code).toBe(4);
    // estimate shows the same numbers, from the state, and leaves the state file as it is.
    const digest = () => createHash('sha256').update(readFileSync(w.state)).digest('hex');
    const d0 = digest();
    const est = await runCli(['estimate', w.m, '--base-url', sb.url, '--out', w.out, '--json'], env);
    expect(est.code, est.stderr).toBe(4);
    const plan = (JSON.parse(est.stdout) as { state: { done: number; changed: { count: number; credits: number; stops: boolean; examples: Array<{ id: string; diff: string }> }; pending: { jobs: number } } }).state;
    expect(plan.changed).toMatchObject({ count: 12, credits: 24, stops: true });
    expect(plan.changed.examples.map((e) => e.id)).toEqual(['j-01', 'j-02', 'j-03']);
    expect(plan.changed.examples[0]!.diff).toBe('input.prompt: "a quiet harbour for j-01" -> "a stormy harbour at night for j-01"');
    expect(plan.done).toBe(12);
    expect(plan.pending.jobs).toBe(0);
    const human = await runCli(['estimate', w.m, '--base-url', sb.url, '--out', w.out], env);
    expect(human.stdout).toContain('changed: 12 done jobs whose spec changed would be sent again, estimated 24 credits; more than --max-changed 10: a run stops before sending anything (exit 4)');
    // Past the guard, under a per-invocation cap of 10 credits: the next run sends 5 of the 12 (exit 5, as the run).
    const capped = await runCli(['estimate', w.m, '--base-url', sb.url, '--out', w.out, '--json', '--max-changed', '20', '--max-credits-per-invocation', '10'], env);
    expect(capped.code, capped.stderr).toBe(5);
    expect((JSON.parse(capped.stdout) as { state: { sends: { jobs: number; credits: number; held: Record<string, number> } } }).state.sends).toMatchObject({ jobs: 5, credits: 10, held: { 'over --max-credits-per-invocation 10': 7 } });
    expect(digest()).toBe(d0);
    expect(rows(w.state)).toEqual(before);
    expect(await taskCount()).toBe(t0);
    const go = await runCli(args(w, '--redo', 'changed'), env);
    expect(go.code, go.stdout + go.stderr).toBe(0);
    expect(go.stdout).toContain('12 changed');
    expect((await taskCount()) - t0).toBe(12);
    expect(existsSync(join(w.out, 'j-01', 'previous-1'))).toBe(true);
  }, 90_000);

  it('up to --max-changed changed done jobs are sent as before; --max-changed and --yes raise the bound', async () => {
    const w = work();
    write(w.m, 'a quiet harbour');
    expect((await runCli(args(w), env)).code).toBe(0);
    const t0 = await taskCount();
    // 10 changed: within the default bound.
    write(w.m, 'a misty harbour', IDS.slice(0, 10));
    expect((await runCli(args(w), env)).code).toBe(0);
    expect((await taskCount()) - t0).toBe(10);
    // 12 changed: over --max-changed 11, refused; --max-changed 12 goes on.
    write(w.m, 'a sunny harbour');
    expect((await runCli(args(w, '--max-changed', '11'), env)).code).toBe(4);
    expect((await taskCount()) - t0).toBe(10);
    expect((await runCli(args(w, '--max-changed', '12'), env)).code).toBe(0);
    expect((await taskCount()) - t0).toBe(22);
    // --yes goes on too.
    write(w.m, 'a windy harbour');
    expect((await runCli(args(w, '--yes'), env)).code).toBe(0);
    expect((await taskCount()) - t0).toBe(34);
  }, 120_000);

  it('--keep-changed keeps the results, marks the jobs changed-not-sent (status, report.json), later runs keep them, and --redo changed sends them', async () => {
    const w = work();
    write(w.m, 'a quiet harbour');
    expect((await runCli(args(w), env)).code).toBe(0);
    const before = rows(w.state);
    const t0 = await taskCount();
    write(w.m, 'a frozen harbour');
    const kept = await runCli(args(w, '--keep-changed'), env);
    expect(kept.code, kept.stdout + kept.stderr).toBe(0);
    expect(kept.stdout + kept.stderr).toContain('12 done job(s) whose spec changed keep their earlier results (--keep-changed: changed-not-sent); --redo changed sends them');
    expect(await taskCount()).toBe(t0);
    expect(rows(w.state)).toEqual(before);
    const report = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { summary: { changed_not_sent: string[] } };
    expect(report.summary.changed_not_sent).toEqual(IDS);
    const status = await runCli(['status', '--state', w.state], env);
    expect(status.stdout).toContain('  12 changed-not-sent (done, spec changed, results kept by --keep-changed; run --redo changed sends them): j-01, j-02');
    // A plain run keeps them (the decision holds while the manifest says the same).
    const plain = await runCli(args(w), env);
    expect(plain.code, plain.stdout + plain.stderr).toBe(0);
    expect(await taskCount()).toBe(t0);
    const go = await runCli(args(w, '--redo', 'changed'), env);
    expect(go.code, go.stdout + go.stderr).toBe(0);
    expect((await taskCount()) - t0).toBe(12);
    const after = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { summary: { changed_not_sent: string[] } };
    expect(after.summary.changed_not_sent).toEqual([]);
  }, 120_000);
});
