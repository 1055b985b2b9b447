import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A for_each job made again because the job it takes its list from changed (a chat job whose
 * answer gives the lines; the sandbox echoes the user message line by line):
 *   - the old children's files are moved into `<child>/previous-<n>/`, also for a child index the
 *     new list no longer has, so `out/<child>/` holds only the result the report lists;
 *   - children in flight when the parent changed (a run killed after their submits) finish what they
 *     were sent with, and the next run makes every child from the new list: none keeps an item of
 *     the old list, every task is created once.
 */
const SCALE = '0.005';
const KEY = 'sk-test-graph-rerun-0123456789';

let sb: Sandbox;
const t = tempDir('genbatch-run-graph-rerun-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 9 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

const manifestText = (lines: string[]) => `pricing: {vendorb/verse-4.5-fast: 0.05}
jobs:
  - id: p
    model: vendorb/verse-4.5-fast
    protocol: messages
    input:
      max_tokens: 200
      messages: [{role: user, content: "${lines.join('\\n')}"}]
  - id: imgs
    for_each: \${{ jobs.p.lines }}
    model: alpha-image-2
    input: {prompt: "picture of \${{ item }}", quality: low}
`;

const args = (manifest: string, out: string) => ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', '--concurrency', '4'];
const env = { GENBATCH_API_KEY: KEY };

/** Run until the `n`-th NDJSON event matching `re`, then SIGKILL. */
function killAfterEvent(argv: string[], re: RegExp, n: number): Promise<string> {
  return new Promise((resolveP, reject) => {
    const child = spawnCli([...argv, '--json'], env);
    let buf = '';
    let seen = 0;
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      if ((buf.match(new RegExp(re.source, 'g')) ?? []).length >= n && seen++ === 0) child.kill('SIGKILL');
    });
    child.on('error', reject);
    child.on('close', () => resolveP(buf));
  });
}

function sentPrompts(state: string, out: string): Record<string, string> {
  const res: Record<string, string> = {};
  for (const j of readJobs(state)) {
    if (!j.id.startsWith('imgs.') || j.state !== 'done') continue;
    res[j.id] = (JSON.parse(readFileSync(join(out, j.id, 'result.json'), 'utf8')) as { input: { prompt: string } }).input.prompt;
  }
  return res;
}

describe('a for_each job made again when its parent changed', () => {
  it('the old children\'s files go to previous-<n>/, also for an index the new list no longer has', async () => {
    const manifest = join(t.dir, 'fewer.yaml');
    const out = join(t.dir, 'fewer');
    const state = join(out, 'state.db');
    writeFileSync(manifest, manifestText(['fox', 'whale', 'frog']));
    expect((await runCli(args(manifest, out), env)).code).toBe(0);
    writeFileSync(manifest, manifestText(['lion', 'tiger']));
    const r = await runCli(args(manifest, out), env);
    expect(r.code, r.stderr).toBe(0);
    expect(readJobs(state).map((j) => `${j.id}:${j.state}`).sort()).toEqual(['imgs.0:done', 'imgs.1:done', 'imgs:done', 'p:done']);
    for (const id of ['imgs.0', 'imgs.1']) {
      const names = readdirSync(join(out, id)).sort();
      // One image (the new result), its result.json, and the earlier result kept aside.
      expect(names, id).toHaveLength(3);
      expect(names, id).toContain('previous-1');
      expect(readdirSync(join(out, id, 'previous-1'))).toHaveLength(2);
    }
    // imgs.2 is no longer made: its folder holds only its earlier result, aside.
    expect(readdirSync(join(out, 'imgs.2'))).toEqual(['previous-1']);
    expect(Object.values(sentPrompts(state, out)).join('|')).not.toMatch(/fox|whale|frog/);
  }, 120_000);

  it('--json: the jobs the sync makes again are job events (done -> pending, naming the changed job)', async () => {
    const manifest = join(t.dir, 'events.yaml');
    const out = join(t.dir, 'events');
    writeFileSync(manifest, manifestText(['fox', 'whale']));
    expect((await runCli(args(manifest, out), env)).code).toBe(0);
    writeFileSync(manifest, manifestText(['fox', 'owl']));
    const r = await runCli([...args(manifest, out), '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    const events = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; id?: string; from?: string; to?: string; error?: string | null });
    const synced = events.findIndex((e) => e.type === 'synced');
    const before = events.slice(0, synced).filter((e) => e.type === 'job');
    expect(before).toEqual([
      expect.objectContaining({ id: 'p', from: 'done', to: 'pending' }),
      expect.objectContaining({ id: 'imgs', from: 'done', to: 'pending', error: 'made again: job p changed' }),
    ]);
  }, 120_000);

  it('--uncertain resubmit: an uncertain child is made again from the new list, never sent with an item of the old one', async () => {
    const manifest = join(t.dir, 'uncertain.yaml');
    const out = join(t.dir, 'uncertain');
    const state = join(out, 'state.db');
    writeFileSync(manifest, manifestText(['fox', 'whale', 'frog']));
    // One at a time: the second child's task is created and its answer lost (500 after creating): uncertain.
    sb.script('submit', ['ok', '500-after', 'ok']);
    const first = await runCli([...args(manifest, out), '--concurrency', '1'], env);
    expect(first.code, first.stderr).toBe(4);
    expect(readJobs(state).find((j) => j.id === 'imgs.1')!.state).toBe('uncertain');
    writeFileSync(manifest, manifestText(['lion', 'tiger', 'bear']));
    const r = await runCli([...args(manifest, out), '--uncertain', 'resubmit'], env);
    expect(r.code, r.stderr).toBe(0);
    const prompts = sentPrompts(state, out);
    expect(Object.keys(prompts).sort()).toEqual(['imgs.0', 'imgs.1', 'imgs.2']);
    expect(Object.values(prompts).join('|')).not.toMatch(/fox|whale|frog/);
    expect(prompts['imgs.1']).toMatch(/tiger/);
  }, 120_000);

  it('children in flight finish what they were sent with; the next run makes every child from the new list', async () => {
    const manifest = join(t.dir, 'inflight.yaml');
    const out = join(t.dir, 'inflight');
    const state = join(out, 'state.db');
    writeFileSync(manifest, manifestText(['fox', 'whale', 'frog']));
    const before = sb.stats().tasks_total;
    // Killed once all three children are submitted (their task ids committed), before any finishes.
    await killAfterEvent(args(manifest, out), /"id":"imgs\.\d","from":"submitting","to":"submitted"/, 3);
    expect(readJobs(state).filter((j) => j.id.startsWith('imgs.') && j.state === 'submitted')).toHaveLength(3);
    writeFileSync(manifest, manifestText(['lion', 'tiger']));
    const second = await runCli(args(manifest, out), env);
    expect(second.code, second.stderr).toBe(0);
    expect(second.stderr).toMatch(/in flight .*the next run makes them again/);
    const third = await runCli(args(manifest, out), env);
    expect(third.code, third.stderr).toBe(0);
    const prompts = sentPrompts(state, out);
    expect(Object.keys(prompts).sort()).toEqual(['imgs.0', 'imgs.1']);
    expect(prompts['imgs.0']).toMatch(/lion/);
    expect(prompts['imgs.1']).toMatch(/tiger/);
    // Tasks: 3 old children (each once) + 2 new ones; chat calls create no task.
    expect(sb.stats().tasks_total - before).toBe(5);
    // A run after that changes nothing.
    const fourth = await runCli(args(manifest, out), env);
    expect(fourth.code).toBe(0);
    expect(sentPrompts(state, out)).toEqual(prompts);
    expect(sb.stats().tasks_total - before).toBe(5);
  }, 120_000);
});
