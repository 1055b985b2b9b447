import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, genbatch, ROOT } from './fixtures/manifest/cli.js';

/** `genbatch estimate` run as a user would: offline, with user prices, budgets, and online against the sandbox. */

const KEY = 'sk-canary-estimate-5f0c1e';
let dir: string;

beforeAll(() => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'genbatch-estimate-'));
}, 180_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

describe('genbatch estimate --offline', () => {
  it('--json prints exactly one object with the documented keys; unknown prices are null, never 0', async () => {
    const r = await genbatch(['estimate', '--offline', '--json', 'manifests/prompts.csv']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(1);
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(out).toMatchObject({ total_credits: 16, unknown_price_jobs: ['sketches'], balance: null, affordable: null });
    expect(out.jobs).toEqual([
      expect.objectContaining({ id: 'poster-1', model: 'alpha-image-2', credits: 6 }),
      expect.objectContaining({ id: 'poster-2', model: 'alpha-image-2', credits: 6 }),
      expect.objectContaining({ id: 'poster-3', model: 'alpha-image-2', credits: 4 }),
      expect.objectContaining({ id: 'sketches', model: 'dream-4', credits: null }),
    ]);
  });

  it('prints a table per job, per model and a total, listing unknown-price jobs apart', async () => {
    const r = await genbatch(['estimate', '--offline', 'manifests/video.yaml']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/waves-motion\s+motion-1\.6\/standard\s+45\s/);
    expect(r.stdout).toMatch(/gradient-clip\s+clip-2\.3\s+unknown\s/);
    expect(r.stdout).toMatch(/clip-2\.3\s+1\s+unknown\s+\(1 with unknown price, not counted\)/);
    expect(r.stdout).toContain('unknown price (not counted in the total; give prices with --prices FILE or a pricing: block): 1 job: gradient-clip');
    expect(r.stdout).toContain('total: 195 credits for 2 jobs with a known price');
    expect(r.stdout).toContain('balance: not checked (--offline)');
  });

  it('labels user-supplied prices (manifest pricing: block and --prices file) in every output', async () => {
    const prices = write('prices.yaml', 'clip-2.3: 30\n');
    const text = await genbatch(['estimate', '--offline', '--prices', prices, 'manifests/video.yaml']);
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/gradient-clip\s+clip-2\.3\s+30\s+yours\s+user-supplied: 30 credits per request/);
    expect(text.stdout).toContain('(all at user-supplied prices)');
    expect(text.stdout).toContain('total: 225 credits (30 of them from user-supplied prices) for 3 jobs with a known price');
    const json = JSON.parse((await genbatch(['estimate', '--offline', '--json', 'manifests/music.yaml'])).stdout) as { jobs: Array<{ source: string; basis: string }>; user_supplied_credits: number };
    expect(json.user_supplied_credits).toBe(20);
    expect(json.jobs.every((j) => j.source === 'user' && j.basis.startsWith('user-supplied'))).toBe(true);
  });

  it('exits 5 (the cap code of run) when the known total exceeds the manifest budget', async () => {
    const p = write('budget.yaml', 'budget: 20\njobs:\n  - {id: a, model: alpha-image-2, input: {prompt: x, quality: high}}\n  - {id: b, model: alpha-image-2, input: {prompt: y, quality: high}}\n');
    const r = await genbatch(['estimate', '--offline', p]);
    expect(r.code).toBe(5);
    expect(r.stdout).toContain('budget: 20 credits: OVER budget by 4 credits');
    const json = await genbatch(['estimate', '--offline', '--json', p]);
    expect(json.code).toBe(5);
    expect(JSON.parse(json.stdout)).toMatchObject({ total_credits: 24, budget: 20, within_budget: false });
  });

  it('an invalid manifest exits 2 with its problems on stderr, like validate', async () => {
    const r = await genbatch(['estimate', '--offline', '--json', 'test/fixtures/manifest/broken/unknown-model.yaml']);
    expect(r).toEqual({
      code: 2,
      stdout: '',
      stderr: 'job typo (test/fixtures/manifest/broken/unknown-model.yaml:6) model: unknown model "alpha-imgae-2"; did you mean "alpha-image-2"? (see `genbatch models`)\n',
    });
  });

  it('a bad prices file is a usage error (exit 2)', async () => {
    const prices = write('bad-prices.yaml', 'clip-2.3: free\n');
    const r = await genbatch(['estimate', '--offline', '--prices', prices, 'manifests/video.yaml']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('clip-2.3: must be a number of credits');
  });

  it('prices the 1632 PartiPrompts jobs', async () => {
    const r = await genbatch(['estimate', '--offline', '--json', 'manifests/parti.yaml']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { total_credits: number; jobs: unknown[]; unknown_price_jobs: unknown[] };
    expect(out.jobs).toHaveLength(1632);
    expect(out.total_credits).toBe(1632 * 2);
    expect(out.unknown_price_jobs).toEqual([]);
  });
});

describe('genbatch estimate with the balance', () => {
  it('without GENBATCH_API_KEY: usage error (exit 2) naming the variable', async () => {
    const r = await genbatch(['estimate', '--base-url', 'http://127.0.0.1:9', 'manifests/video.yaml']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('GENBATCH_API_KEY');
    expect(r.stdout).toBe('');
  });

  const sandboxSource = join(ROOT, 'src', 'sandbox', 'index.ts');
  it.skipIf(!existsSync(sandboxSource))('against the sandbox: affordable (exit 0) and not affordable (exit 3), never printing the key', async () => {
    const { startSandbox } = await import('../src/sandbox/index.js');
    const sandbox = await startSandbox({ port: 0, keys: { [KEY]: 100 } });
    try {
      const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sandbox.url };
      const cheap = write('cheap.yaml', 'jobs:\n  - {id: a, model: alpha-image-2, input: {prompt: x, quality: high}}\n');
      const ok = await genbatch(['estimate', '--json', cheap], env);
      expect(ok.code).toBe(0);
      expect(JSON.parse(ok.stdout)).toMatchObject({ total_credits: 12, balance: 100, affordable: true });
      const text = await genbatch(['estimate', '--base-url', sandbox.url, cheap], { GENBATCH_API_KEY: KEY });
      expect(text.code).toBe(0);
      expect(text.stdout).toContain('balance: 100 credits: affordable');
      const dear = await genbatch(['estimate', 'manifests/video.yaml'], env);
      expect(dear.code).toBe(3);
      expect(dear.stdout).toContain('balance: 100 credits: NOT affordable, 95 credits short');
      for (const r of [ok, text, dear]) expect(r.stdout + r.stderr).not.toContain(KEY);
    } finally {
      await sandbox.close();
    }
  });
});
