import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A for_each job made again because the job it takes its list from changed (a chat job whose
 * answer gives the lines; the sandbox echoes the user message line by line):
 *   - the old children's files are moved into `<child>/previous-<n>/`, also for a child index the
 *     new list no longer has, so `out/<child>/` holds only the result the report lists.
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
});
