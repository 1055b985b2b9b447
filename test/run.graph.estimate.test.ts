import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ROOT, ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * A for_each job whose children have a price but whose count is decided at
 * run time is reported as "unknown count", apart from jobs of unknown price
 * (whose advice is --prices), in `run` and `estimate`; estimate --json gives
 * `children` per for_each job. Credits are shown and stored without binary noise.
 */
const SCALE = '0.005';
const KEY = 'sk-test-graph-estimate-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-graph-estimate-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 4 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

const CHAT_TO_IMAGE = join(ROOT, 'manifests', 'chat-to-image.yaml');

describe('unknown count apart from unknown price', () => {
  it('run without --yes: the 12 image for_each jobs are "unknown count", not "no known price ... --prices"', async () => {
    const total0 = sb.stats().tasks_total;
    const r = await runCli(['run', CHAT_TO_IMAGE, '--base-url', sb.url, '--time-scale', SCALE, '--out', join(t.dir, 'c2i')], { GENBATCH_API_KEY: KEY });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('12 for_each job(s) have an unknown count (fan-out decided at run time: images-abstract, images-animals,');
    expect(r.stderr).not.toContain('no known price');
    expect(r.stderr).not.toContain('--prices');
    expect(r.stderr).toContain('Pass --yes to run them anyway');
    expect(sb.stats().tasks_total).toBe(total0);
  }, 60_000);

  it('run: the estimate line rounds (0.05 x 12 is 0.6, not 0.6000000000000001) and names the unknown count; report.json credits carry no noise', async () => {
    const out = join(t.dir, 'c2i-yes');
    const r = await runCli(['run', CHAT_TO_IMAGE, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/genbatch: estimate 0\.6 credits for the jobs left \(\+12 for_each job\(s\) of unknown count: fan-out decided at run time\); balance \d+(\.\d{1,2})?\n/);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { summary: { credits: { estimated_known: number; charged: number | null } } };
    const c = report.summary.credits;
    for (const v of [c.estimated_known, c.charged]) {
      expect(v).not.toBeNull();
      expect(Math.round(v! * 1e6) / 1e6).toBe(v);
    }
  }, 60_000);

  it('estimate: a separate unknown-count line and `children` per for_each job in --json (documented count or null)', async () => {
    const text = await runCli(['estimate', CHAT_TO_IMAGE, '--offline']);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('unknown count (fan-out decided at run time;');
    expect(text.stdout).not.toContain('unknown price (not counted');
    expect(text.stdout).toContain('alpha-image-2                12     unknown  (12 for_each with unknown count, not counted)');
    const json = await runCli(['estimate', CHAT_TO_IMAGE, '--offline', '--json']);
    const est = JSON.parse(json.stdout) as { unknown_price_jobs: string[]; unknown_count_jobs: string[]; jobs: Array<{ id: string; children?: number | null }> };
    expect(est.unknown_price_jobs).toEqual([]);
    expect(est.unknown_count_jobs).toHaveLength(12);
    expect(est.jobs.filter((j) => j.id.startsWith('images-')).every((j) => j.children === null)).toBe(true);
    expect(est.jobs.filter((j) => j.id.startsWith('prompts-')).every((j) => !('children' in j))).toBe(true);
    const music = JSON.parse((await runCli(['estimate', join(ROOT, 'manifests', 'music-chain.yaml'), '--offline', '--json'])).stdout) as { jobs: Array<{ id: string; children?: number | null }> };
    expect(music.jobs.filter((j) => 'children' in j).map((j) => [j.id, j.children])).toEqual([
      ['stems', 2],
      ['wav', 2],
    ]);
  }, 60_000);

  it('a job of unknown price still gets the --prices advice', async () => {
    const manifest = join(t.dir, 'unk.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: castle\n    model: kontext-pro\n    input: { prompt: "A castle" }\n');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', join(t.dir, 'unk')], { GENBATCH_API_KEY: KEY });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('1 job(s) have no known price (castle); the service gives no price for their model: give prices with --prices');
    expect(r.stderr).not.toContain('unknown count');
  }, 60_000);
});
