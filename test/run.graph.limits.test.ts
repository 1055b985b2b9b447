import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * Children counted only at run time (lines of a chat answer) are checked
 * against --max-credits and the manifest budget before they are made: over
 * the limit, none is made or sent, the for_each job stays pending, exit 4.
 */
const SCALE = '0.005';
const KEY = 'sk-test-graph-limits-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-run-graph-limits-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 8 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

// 0.05 for the chat job, then 3 images at the contract price of alpha-image-2 (2 credits each, quality low).
const MANIFEST = (budget: string) => `${budget}pricing: {vendorb/verse-4.5-fast: 0.05}
jobs:
  - id: ideas
    model: vendorb/verse-4.5-fast
    protocol: messages
    input:
      max_tokens: 200
      messages: [{role: user, content: "a red fox in snow\\na blue owl at night\\na green frog on a leaf"}]
  - id: pics
    for_each: \${{ jobs.ideas.lines }}
    model: alpha-image-2
    input: {prompt: "\${{ item }}", quality: low}
`;

async function runWith(name: string, budget: string, extra: string[]) {
  const manifest = join(t.dir, `${name}.yaml`);
  writeFileSync(manifest, MANIFEST(budget));
  const out = join(t.dir, name);
  const tasks0 = sb.stats().tasks_total;
  const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', ...extra], { GENBATCH_API_KEY: KEY });
  return { r, jobs: readJobs(join(out, 'state.db')), tasks: sb.stats().tasks_total - tasks0 };
}

describe('credit limits after a fan-out', () => {
  it('--max-credits 5: the 3 children (6 credits) are not made; the for_each job stays pending; exit 5 (the cap) with the reason', async () => {
    const { r, jobs, tasks } = await runWith('max', '', ['--max-credits', '5']);
    expect(r.code, r.stderr).toBe(5);
    expect(r.stderr).toContain('pics: its 3 job(s) from ${{ jobs.ideas.lines }} (6 credits) would bring the known estimate to 6.05 credits, over --max-credits 5; they were not made or sent');
    expect(jobs.map((j) => `${j.id} ${j.state}`)).toEqual(['ideas done', 'pics pending']);
    expect(tasks).toBe(0);
  }, 60_000);

  it('the manifest budget is checked the same way; within the limit every child runs', async () => {
    const over = await runWith('budget', 'budget: 4\n', []);
    expect(over.r.code, over.r.stderr).toBe(5);
    expect(over.r.stderr).toContain('over the manifest budget of 4');
    expect(over.tasks).toBe(0);
    const within = await runWith('within', 'budget: 7\n', ['--max-credits', '6.05']);
    expect(within.r.code, within.r.stderr).toBe(0);
    expect(within.jobs.map((j) => `${j.id} ${j.state}`)).toEqual(['ideas done', 'pics done', 'pics.0 done', 'pics.1 done', 'pics.2 done']);
    expect(within.tasks).toBe(3);
  }, 60_000);
});
