import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { admin } from './helpers/admin.js';

/**
 * Review marks (`genbatch mark`) and `run --redo rejected`: CLI as a child process, the sandbox in this
 * process. Marks live in the state file's marks table, survive reruns, show in report.json and report.csv;
 * --redo rejected sends exactly the rejected jobs again (one new task each, counted in the sandbox's task
 * list), with a new seed for a model that has a seed field when the manifest gives none; the new result
 * clears the mark, which stays in the job's history.
 */
const SCALE = '0.005';
const KEY = 'sk-review-marks-0123456789abcdef';
const env = { GENBATCH_API_KEY: KEY };

let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 21, policyWords: [] });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-marks-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

/** Image jobs (alpha-image-2: no seed field), and with `video` video jobs of videoh (a seed field), one of them with a seed fixed. */
function manifest(dir: string, ids: string[], video: string[] = [], fixedSeed: string | null = null): string {
  const lines = ['jobs:'];
  for (const id of ids) lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "a quiet harbour for ${id}"`);
  for (const id of video) {
    lines.push(`  - id: ${id}`, '    model: videoh', '    input:', `      prompt: "a slow pan over hills for ${id}"`, '      resolution: 720p', '      duration: 3');
    if (id === fixedSeed) lines.push('      seed: 4242');
  }
  const path = join(dir, 'm.yaml');
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

const run = (m: string, out: string, ...more: string[]) => runCli(['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', ...more], env);

async function taskCount(): Promise<number> {
  const body = (await (await fetch(`${sb.url}/__sandbox/tasks`, admin(sb))).json()) as { tasks: unknown[] };
  return body.tasks.length;
}

type Mark = { state: string; note: string | null; at: string } | null;
const reportMarks = (out: string) =>
  Object.fromEntries((JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; mark: Mark }> }).jobs.map((j) => [j.id, j.mark]));

function csvMarks(out: string): Record<string, string> {
  const lines = readFileSync(join(out, 'report.csv'), 'utf8').trimEnd().split('\r\n');
  const header = lines[0]!.split(',');
  expect(header.at(-1)).toBe('mark');
  return Object.fromEntries(lines.slice(1).map((l) => [l.split(',')[0]!, l.split(',').at(-1)!]));
}

function history(state: string, id: string): Array<{ mark: string | null; note: string | null }> {
  const db = new Database(state, { readonly: true });
  try {
    return db.prepare('SELECT mark, note FROM marks WHERE job_id = ? ORDER BY n').all(id) as Array<{ mark: string | null; note: string | null }>;
  } finally {
    db.close();
  }
}

const submitted = (out: string, id: string) => (JSON.parse(readFileSync(join(out, id, 'result.json'), 'utf8')) as { input: Record<string, unknown> }).input;

describe('genbatch mark', () => {
  it('--reject, --approve (ids and globs) and --clear are kept in the state file, shown in report.json and report.csv, and survive a rerun', async () => {
    const w = work();
    const m = manifest(w.dir, ['a-1', 'a-2', 'b-1', 'b-2']);
    expect((await run(m, w.out)).code).toBe(0);

    const rej = await runCli(['mark', m, '--out', w.out, '--reject', 'a-1', '--note', 'blurry'], env);
    expect(rej.stderr).toBe('');
    expect(rej.code).toBe(0);
    expect(rej.stdout).toContain('marked 1 job(s) rejected: a-1');
    const app = await runCli(['mark', '--state', w.state, '--approve', 'b-*,a-2'], env);
    expect(app.code).toBe(0);
    expect(app.stdout).toContain('marked 3 job(s) approved');

    let marks = reportMarks(w.out);
    expect(marks['a-1']).toMatchObject({ state: 'rejected', note: 'blurry' });
    expect(Date.parse(marks['a-1']!.at)).not.toBeNaN();
    expect(marks['a-2']).toMatchObject({ state: 'approved', note: null });
    expect(marks['b-1']?.state).toBe('approved');
    expect(csvMarks(w.out)).toEqual({ 'a-1': 'rejected', 'a-2': 'approved', 'b-1': 'approved', 'b-2': 'approved' });

    // A rerun (a sync of the same manifest) keeps them.
    expect((await run(m, w.out)).code).toBe(0);
    expect((await runCli(['report', m, '--out', w.out], env)).code).toBe(0);
    marks = reportMarks(w.out);
    expect(marks['a-1']?.state).toBe('rejected');
    expect(marks['b-2']?.state).toBe('approved');

    // --clear: no current mark, the history kept.
    expect((await runCli(['mark', m, '--out', w.out, '--clear', 'b-2'], env)).code).toBe(0);
    expect(reportMarks(w.out)['b-2']).toBeNull();
    expect(csvMarks(w.out)['b-2']).toBe('');
    expect(history(w.state, 'b-2').map((h) => h.mark)).toEqual(['approved', null]);
    // The latest mark is the current one.
    expect((await runCli(['mark', m, '--out', w.out, '--approve', 'a-1'], env)).code).toBe(0);
    expect(reportMarks(w.out)['a-1']?.state).toBe('approved');
    expect(history(w.state, 'a-1').map((h) => h.mark)).toEqual(['rejected', 'approved']);
  }, 60_000);

  it('an id that is not a job of the run, a glob that matches none, or a job that is not done: exit 2 naming it, nothing written', async () => {
    const w = work();
    const m = manifest(w.dir, ['c-1', 'c-2']);
    expect((await run(m, w.out, '--only', 'c-1')).code).toBe(7);

    const unknown = await runCli(['mark', m, '--out', w.out, '--reject', 'c-1,nope'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('"nope" is not a job of the run');
    const glob = await runCli(['mark', m, '--out', w.out, '--approve', 'zz*'], env);
    expect(glob.code).toBe(2);
    expect(glob.stderr).toContain('"zz*" matches no done job of the run');
    const pending = await runCli(['mark', m, '--out', w.out, '--reject', 'c-2'], env);
    expect(pending.code).toBe(2);
    expect(pending.stderr).toContain('job c-2 is pending: only done jobs can be marked');
    const none = await runCli(['mark', m, '--out', w.out], env);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('mark expects one of --approve, --reject or --clear');
    // Nothing was written by the refused commands (c-1 among them).
    expect(history(w.state, 'c-1')).toEqual([]);
  }, 60_000);
});

describe('a state file written before marks existed', () => {
  it('reports without marks, and genbatch mark adds the marks table to it', async () => {
    const w = work();
    const m = manifest(w.dir, ['o-1']);
    expect((await run(m, w.out)).code).toBe(0);
    const db = new Database(w.state);
    db.exec('DROP TABLE marks');
    db.close();
    const rep = await runCli(['report', m, '--out', w.out], env);
    expect(rep.stderr).toBe('');
    expect(reportMarks(w.out)['o-1']).toBeNull();
    expect((await runCli(['mark', m, '--out', w.out, '--reject', 'o-1'], env)).code).toBe(0);
    expect(reportMarks(w.out)['o-1']?.state).toBe('rejected');
  }, 60_000);
});

describe('genbatch run --redo rejected', () => {
  it('sends exactly the rejected jobs again (one new task each), a new seed for a model with a seed field unless the manifest fixes it; the new result clears the mark, kept in the history', async () => {
    const w = work();
    const m = manifest(w.dir, ['p-1', 'p-2', 'p-3'], ['v-1', 'v-2'], 'v-2');
    const first = await run(m, w.out);
    expect(first.stderr).not.toContain('error');
    expect(first.code).toBe(0);
    const seedBefore = submitted(w.out, 'v-1').seed;
    expect(submitted(w.out, 'v-2').seed).toBe(4242);

    expect((await runCli(['mark', m, '--out', w.out, '--reject', 'p-2,v-1,v-2', '--note', 'wrong colours'], env)).code).toBe(0);
    expect((await runCli(['mark', m, '--out', w.out, '--approve', 'p-3'], env)).code).toBe(0);

    const before = await taskCount();
    const redo = await run(m, w.out, '--redo', 'failed,rejected');
    expect(redo.code).toBe(0);
    expect(redo.stdout + redo.stderr).toContain('--redo failed,rejected: 3 job(s) sent again');
    expect(await taskCount()).toBe(before + 3);

    // videoh has a seed field: v-1 (no seed in the manifest) got a new one; v-2 kept the manifest's.
    const seedAfter = submitted(w.out, 'v-1').seed;
    expect(typeof seedAfter).toBe('number');
    expect(seedAfter).not.toBe(seedBefore);
    expect(submitted(w.out, 'v-2').seed).toBe(4242);
    // alpha-image-2 has no seed field: none added.
    expect('seed' in submitted(w.out, 'p-2')).toBe(false);
    // The manifest is unchanged, and the new seed does not make the next run send it again.
    expect(readFileSync(m, 'utf8')).not.toContain(String(seedAfter));
    const again = await run(m, w.out);
    expect(again.code).toBe(0);
    expect(await taskCount()).toBe(before + 3);

    // The earlier files went to previous-1/.
    expect(readFileSync(join(w.out, 'p-2', 'previous-1', 'result.json'), 'utf8')).toContain('"p-2"');
    // Marks: cleared by the new results, kept in the history; p-3's approval untouched.
    const marks = reportMarks(w.out);
    expect(marks['p-2']).toBeNull();
    expect(marks['v-1']).toBeNull();
    expect(marks['p-3']?.state).toBe('approved');
    expect(history(w.state, 'p-2')).toEqual([
      { mark: 'rejected', note: 'wrong colours' },
      { mark: null, note: 'cleared: a new result replaced the one marked rejected' },
    ]);
    // Nothing rejected is left: --redo rejected sends nothing.
    const none = await run(m, w.out, '--redo', 'rejected');
    expect(none.code).toBe(0);
    expect(await taskCount()).toBe(before + 3);
    // Rejected again: yet another seed, not the one sent last.
    expect((await runCli(['mark', m, '--out', w.out, '--reject', 'v-1'], env)).code).toBe(0);
    expect((await run(m, w.out, '--redo', 'rejected')).code).toBe(0);
    expect(await taskCount()).toBe(before + 4);
    expect(typeof submitted(w.out, 'v-1').seed).toBe('number');
    expect(submitted(w.out, 'v-1').seed).not.toBe(seedAfter);
    expect(history(w.state, 'v-1').map((h) => h.mark)).toEqual(['rejected', null, 'rejected', null]);
  }, 90_000);

  it('status counts the approved and the rejected jobs, in its text and in --json', async () => {
    const { dir, out } = work();
    const m = manifest(dir, ['s-1', 's-2', 's-3', 's-4']);
    expect((await run(m, out)).code).toBe(0);
    expect((await runCli(['mark', m, '--out', out, '--approve', 's-1,s-2'], env)).code).toBe(0);
    expect((await runCli(['mark', m, '--out', out, '--reject', 's-3'], env)).code).toBe(0);
    const text = await runCli(['status', m, '--out', out], env);
    expect(text.stdout).toContain('  review: 2 approved, 1 rejected, 1 done not marked\n');
    const json = JSON.parse((await runCli(['status', m, '--out', out, '--json'], env)).stdout) as { marks: unknown; counts: { done: number } };
    expect(json.marks).toEqual({ approved: 2, rejected: 1 });
    expect(json.counts.done).toBe(4);
  }, 60_000);
});
