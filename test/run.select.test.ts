import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../src/errors.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * `genbatch run --only <ids|globs>` and `--limit N`: a subset of the pending jobs is sent, the rest stay
 * pending for a later run (exit 4), and the estimate and the credit checks cover only what is sent.
 * CLI as a child process, sandbox in this process; alpha-image-2 costs 2 credits a job.
 */
const SCALE = '0.005';
const KEY = 'sk-run-select-0123456789abcdef';
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
  const t = tempDir('genbatch-select-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

const args = (manifest: string, out: string, ...more: string[]) => ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--json', ...more];
const tasksTotal = () => sb.stats().tasks_total;

interface Ev {
  type: string;
  pending_credits?: number;
  total_credits?: number;
  selected?: number;
  needed?: number;
  left_pending?: number;
}
const events = (stdout: string): Ev[] => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Ev);
const states = (state: string) => readJobs(state).map((j) => `${j.id}:${j.state}`);

describe('genbatch run --only / --limit', () => {
  it('--limit 2 sends the first two pending jobs, the estimate and --max-credits cover only them; --only sends the jobs it names; a plain run then sends the rest', async () => {
    const w = work();
    const m = imageManifest(join(w.dir, 'm.yaml'), 6, 'img');
    // The whole manifest (12 credits) is over --max-credits 4: the 2 jobs that fit are sent (exit 5), the rest stay pending.
    const w0 = work();
    let t0 = tasksTotal();
    const capped = await runCli(args(m, w0.out, '--max-credits', '4'), env);
    expect(capped.code).toBe(EXIT.capReached);
    expect(tasksTotal() - t0).toBe(2);
    expect(states(w0.state)).toEqual(['img-0000:done', 'img-0001:done', 'img-0002:pending', 'img-0003:pending', 'img-0004:pending', 'img-0005:pending']);

    t0 = tasksTotal();
    const first = await runCli(args(m, w.out, '--max-credits', '4', '--limit', '2'), env);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(EXIT.leftPending); // jobs left pending by --limit
    expect(tasksTotal() - t0).toBe(2);
    const ev = events(first.stdout);
    expect(ev.find((e) => e.type === 'selection')).toMatchObject({ selected: 2, needed: 0, left_pending: 4 });
    expect(ev.find((e) => e.type === 'estimate')).toMatchObject({ pending_credits: 4, total_credits: 4 });
    expect(states(w.state)).toEqual(['img-0000:done', 'img-0001:done', 'img-0002:pending', 'img-0003:pending', 'img-0004:pending', 'img-0005:pending']);

    // Repeatable and comma separated, ids and globs.
    t0 = tasksTotal();
    const second = await runCli(args(m, w.out, '--only', 'img-0003', '--only', 'img-00?5,img-0000'), env);
    expect(second.code).toBe(EXIT.leftPending);
    expect(tasksTotal() - t0).toBe(2); // img-0000 is done: not sent again
    expect(events(second.stdout).find((e) => e.type === 'estimate')).toMatchObject({ pending_credits: 4 });
    expect(states(w.state)).toEqual(['img-0000:done', 'img-0001:done', 'img-0002:pending', 'img-0003:done', 'img-0004:pending', 'img-0005:done']);

    t0 = tasksTotal();
    const third = await runCli(args(m, w.out), env);
    expect(third.code).toBe(0);
    expect(tasksTotal() - t0).toBe(2);
    expect(states(w.state).every((s) => s.endsWith(':done'))).toBe(true);
  }, 60_000);

  it('says in plain output what it sends and what it leaves pending, and how to send the rest', async () => {
    const w = work();
    const m = imageManifest(join(w.dir, 'm.yaml'), 3, 'few');
    const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--only', 'few-*1'], env);
    expect(r.code).toBe(EXIT.leftPending);
    expect(r.stdout).toContain('genbatch: --only few-*1: sending 1 of 3 pending job(s); 2 stay pending for a later run\n');
    expect(r.stdout).toContain(`genbatch: 2 job(s) left pending (--only, --limit): genbatch run ${m} --out ${w.out} --base-url ${sb.url} --time-scale 0.005 sends them\n`);
  }, 30_000);

  it('--only with a pattern that matches no job is a usage error (exit 2) naming it; nothing is sent', async () => {
    const w = work();
    const m = imageManifest(join(w.dir, 'm.yaml'), 3, 'img');
    const t0 = tasksTotal();
    const r = await runCli(args(m, w.out, '--only', 'img-0001,nope-*', '--only', 'zzz'), env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--only "nope-*", "zzz" match no job of the manifest');
    expect(tasksTotal()).toBe(t0);
    expect(states(w.state)).toEqual(['img-0000:pending', 'img-0001:pending', 'img-0002:pending']);
  }, 30_000);

  it('a chosen job of a graph takes the pending jobs it needs along (they count towards --limit)', async () => {
    const w = work();
    const m = join(w.dir, 'g.yaml');
    writeFileSync(
      m,
      [
        'jobs:',
        '  - {id: other, model: alpha-image-2, input: {prompt: "another picture"}}',
        '  - {id: child, needs: [parent], model: alpha-image-2, input: {prompt: "the child"}}',
        '  - {id: parent, model: alpha-image-2, input: {prompt: "the parent"}}',
        '',
      ].join('\n'),
    );
    // --limit 2 in manifest order: other, then child (with parent: 3 jobs) does not fit, parent does.
    let t0 = tasksTotal();
    const limited = await runCli(args(m, w.out, '--limit', '2'), env);
    expect(limited.code).toBe(EXIT.leftPending);
    expect(tasksTotal() - t0).toBe(2);
    expect(states(w.state)).toEqual(['other:done', 'child:pending', 'parent:done']);

    const w2 = work();
    t0 = tasksTotal();
    const only = await runCli(args(m, w2.out, '--only', 'child'), env);
    expect(only.code).toBe(EXIT.leftPending);
    expect(tasksTotal() - t0).toBe(2);
    expect(events(only.stdout).find((e) => e.type === 'selection')).toMatchObject({ selected: 2, needed: 1, left_pending: 1 });
    expect(events(only.stdout).find((e) => e.type === 'estimate')).toMatchObject({ pending_credits: 4 });
    expect(states(w2.state)).toEqual(['other:pending', 'child:done', 'parent:done']);
  }, 60_000);

  it('the children a chosen for_each job makes are sent with it', async () => {
    const w = work();
    const m = join(w.dir, 'f.yaml');
    writeFileSync(
      m,
      [
        'jobs:',
        '  - {id: other, model: alpha-image-2, input: {prompt: "another picture"}}',
        '  - id: song',
        '    model: generate-music',
        '    input: {custom_mode: false, instrumental: false, prompt: A sea shanty about a lighthouse}',
        '  - id: stems',
        '    for_each: ${{ jobs.song.audio }}',
        '    model: stem-split',
        '    input: {task_id: "${{ jobs.song.task_id }}", audio_id: "${{ item.audio_id }}"}',
        '',
      ].join('\n'),
    );
    const r = await runCli(args(m, w.out, '--only', 'stems', '--yes'), env);
    expect(r.code).toBe(EXIT.leftPending);
    const s = states(w.state);
    expect(s[0]).toBe('other:pending');
    expect(s.slice(1)).toEqual(['song:done', 'stems:done', ...s.slice(3).map((x) => x.replace(/:.*/, ':done'))]);
    expect(s.length).toBeGreaterThan(3); // the song's tracks: at least one child
  }, 60_000);

  it('--limit 0 and a --limit that is not a number are usage errors', async () => {
    const w = work();
    const m = imageManifest(join(w.dir, 'm.yaml'), 1, 'img');
    const zero = await runCli(args(m, w.out, '--limit', '0'), env);
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain('--limit expects an integer >= 1, got "0"');
    const text = await runCli(args(m, w.out, '--limit', 'all'), env);
    expect(text.code).toBe(2);
    expect(text.stderr).toContain('--limit');
  }, 30_000);
});
