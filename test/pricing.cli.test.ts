import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { estimate, unknownPriceModels } from '../src/pricing/index.js';
import { ensureBuilt, genbatch } from './fixtures/manifest/cli.js';

/** User prices through `genbatch estimate` (the built CLI): unknown-model entries warned about, absurd prices refused, unknown per-model totals null. */

let dir: string;
beforeAll(() => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'genbatch-pricing-cli-'));
}, 180_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function write(name: string, text: string): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

describe('unknownPriceModels', () => {
  it('lists entries naming neither a catalogued model nor a model any job uses', async () => {
    const prices = { 'dream-4': 1, dream4: 2, 'vendora/chat-5': 0.1, 'acme/private-llm': 0.2, 'kontext-pro': 3 };
    expect(unknownPriceModels(prices, ['acme/private-llm'])).toEqual(['dream4']);
    expect(unknownPriceModels(prices, [])).toEqual(['dream4', 'acme/private-llm']);
    expect(unknownPriceModels(null, [])).toEqual([]);
    const est = await estimate([], prices);
    expect(unknownPriceModels(prices, Object.keys(est.per_model))).toEqual(['dream4', 'acme/private-llm']);
  });
});

describe('genbatch estimate with user prices', () => {
  it('warns on stderr about a price naming no known model (file and pricing: block), and lists it in --json', async () => {
    const manifest = write('typo.yaml', 'pricing: {kontext-prro: 4}\njobs:\n  - {id: a, model: dream-4, input: {prompt: x, n: 2}}\n');
    const prices = write('typo-prices.yaml', 'dream-4: 3\ndream4: 3\n');
    const text = await genbatch(['estimate', '--offline', '--prices', prices, manifest]);
    expect(text.code).toBe(0);
    expect(text.stderr).toContain('warning: the user-supplied price for "dream4" names no known model');
    expect(text.stderr).toContain('warning: the user-supplied price for "kontext-prro" names no known model');
    expect(text.stderr).not.toContain('"dream-4"');
    expect(text.stdout).toContain('total: 6 credits');
    const json = await genbatch(['estimate', '--offline', '--json', '--prices', prices, manifest]);
    expect(json.code).toBe(0);
    expect(json.stderr).toContain('"dream4"');
    const out = JSON.parse(json.stdout) as { user_prices_unknown_models: string[] };
    expect(out.user_prices_unknown_models.sort()).toEqual(['dream4', 'kontext-prro']);
  });

  it('--json per_model credits are null (never 0) for a model whose jobs are all unknown', async () => {
    const manifest = write('unknown.yaml', 'jobs:\n  - {id: a, model: dream-4, input: {prompt: x}}\n  - {id: b, model: alpha-image-2, input: {prompt: x}}\n');
    const r = await genbatch(['estimate', '--offline', '--json', manifest]);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as { per_model: Record<string, { credits: number | null; unknown_jobs: number; known_jobs: number }> };
    expect(out.per_model['dream-4']).toMatchObject({ credits: null, unknown_jobs: 1, known_jobs: 0 });
    expect(out.per_model['alpha-image-2']).toMatchObject({ credits: 2, unknown_jobs: 0, known_jobs: 1 });
  });

  it('refuses an absurd price (1e308 x 15 images would overflow) with exit 2 naming the model', async () => {
    const manifest = write('huge.yaml', 'jobs:\n  - {id: a, model: dream-4, input: {prompt: x, n: 15}}\n');
    const prices = write('huge-prices.yaml', 'dream-4: 1e308\n');
    const file = await genbatch(['estimate', '--offline', '--json', '--prices', prices, manifest]);
    expect(file.code).toBe(2);
    expect(file.stdout).toBe('');
    expect(file.stderr).toMatch(/dream-4: must be at most 1,000,000,000 credits per unit/);
    const block = write('huge-block.yaml', 'pricing: {dream-4: 1e308}\njobs:\n  - {id: a, model: dream-4, input: {prompt: x, n: 15}}\n');
    const inline = await genbatch(['estimate', '--offline', '--json', block]);
    expect(inline.code).toBe(2);
    expect(inline.stderr).toContain(`${block}:1 pricing.dream-4: must be at most 1,000,000,000 credits per unit`);
  });
});
