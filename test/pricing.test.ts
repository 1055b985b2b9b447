import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { UsageError, formatProblem } from '../src/errors.js';
import { openManifest, validateManifest, type ManifestJob } from '../src/manifest/index.js';
import { estimate, loadPrices, priceJob } from '../src/pricing/index.js';

/** Pricing aggregation: contract prices, user prices (labelled), unknown prices (never 0). */

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'genbatch-pricing-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function job(model: string, input: Record<string, unknown>, kind: 'submit' | 'chat' = 'submit', id = 'j'): ManifestJob {
  return { id, model, kind, input, where: 'm.yaml:1', dir, problems: [] };
}

describe('priceJob', () => {
  it('uses the service price when the model gives one', () => {
    expect(priceJob(job('alpha-image-2', { prompt: 'x', quality: 'high', size: '16:9', resolution: '4K' }), null)).toMatchObject({ credits: 48, source: 'service' });
    expect(priceJob(job('motion-1.6/pro', { prompt: 'x', duration: 10 }), { 'motion-1.6/pro': 1 })).toMatchObject({ credits: 150, source: 'service' });
  });

  it('prices user-supplied image prices per image times n, and other models per request', () => {
    expect(priceJob(job('dream-4', { prompt: 'x', n: 4 }), { 'dream-4': 2.5 })).toEqual({ credits: 10, basis: 'user-supplied: 2.5 credits per image x 4', source: 'user' });
    expect(priceJob(job('generate-music', { custom_mode: false, prompt: 'x' }), { 'generate-music': 10 })).toEqual({ credits: 10, basis: 'user-supplied: 10 credits per request', source: 'user' });
    expect(priceJob(job('vendora/chat-5', { messages: [] }, 'chat'), { 'vendora/chat-5': 0.2 })).toMatchObject({ credits: 0.2, source: 'user' });
  });

  it('gives unknown (null, never 0) without a service or user price', () => {
    const p = priceJob(job('dream-4', { prompt: 'x', n: 2 }), { 'kontext-pro': 1 });
    expect(p.credits).toBeNull();
    expect(p.source).toBe('unknown');
    expect(p.basis).toContain('dream-4');
    expect(priceJob(job('vendora/chat-5', {}, 'chat'), null)).toEqual({ credits: null, basis: 'the service gives no chat prices', source: 'unknown' });
  });
});

describe('estimate', () => {
  it('sums known prices per model and in total, lists unknown jobs apart and counts user-supplied credits', async () => {
    const jobs = [
      job('alpha-image-2', { prompt: 'x', quality: 'medium', size: '1:1', resolution: '2K' }, 'submit', 'a'),
      job('alpha-image-2', { prompt: 'x', quality: 'low' }, 'submit', 'b'),
      job('dream-4', { prompt: 'x', n: 3 }, 'submit', 'c'),
      job('kontext-pro', { prompt: 'x' }, 'submit', 'd'),
      job('imagine-video-1.5', { prompt: 'x', duration: 3, resolution: '480p' }, 'submit', 'e'),
    ];
    const est = await estimate(jobs, { 'dream-4': 2 }, { keepJobs: true });
    expect(est.total_credits).toBe(6 + 2 + 6 + 43.5);
    expect(est.user_supplied_credits).toBe(6);
    expect(est.unknown_price_jobs).toEqual(['d']);
    expect(est.per_model['alpha-image-2']).toEqual({ jobs: 2, credits: 8, known_jobs: 2, unknown_jobs: 0, unknown_count_jobs: 0, user_jobs: 0, observed_jobs: 0 });
    expect(est.per_model['dream-4']).toEqual({ jobs: 1, credits: 6, known_jobs: 1, unknown_jobs: 0, unknown_count_jobs: 0, user_jobs: 1, observed_jobs: 0 });
    expect(est.per_model['kontext-pro']).toEqual({ jobs: 1, credits: null, known_jobs: 0, unknown_jobs: 1, unknown_count_jobs: 0, user_jobs: 0, observed_jobs: 0 });
    expect(est.jobs?.map((j) => [j.id, j.credits, j.source])).toEqual([
      ['a', 6, 'service'],
      ['b', 2, 'service'],
      ['c', 6, 'user'],
      ['d', null, 'unknown'],
      ['e', 43.5, 'service'],
    ]);
  });

  it('per model: credits null when every job is unknown, the known sum (with counts) when only some are', async () => {
    const jobs = [
      job('dream-4', { prompt: 'x' }, 'submit', 'a'),
      job('dream-4', { prompt: 'x' }, 'submit', 'b'),
      job('kontext-pro', { prompt: 'x' }, 'submit', 'c'),
      job('vendora/chat-5', { messages: [] }, 'chat', 'd'),
    ];
    const est = await estimate(jobs, null);
    expect(est.per_model['dream-4']).toEqual({ jobs: 2, credits: null, known_jobs: 0, unknown_jobs: 2, unknown_count_jobs: 0, user_jobs: 0, observed_jobs: 0 });
    expect(est.per_model['vendora/chat-5']?.credits).toBeNull();
    expect(JSON.parse(JSON.stringify(est.per_model))['kontext-pro'].credits).toBeNull();
    const mixed = await estimate([job('alpha-image-2', { prompt: 'x' }, 'submit', 'e'), ...jobs], { 'kontext-pro': 3 });
    expect(mixed.per_model['kontext-pro']).toEqual({ jobs: 1, credits: 3, known_jobs: 1, unknown_jobs: 0, unknown_count_jobs: 0, user_jobs: 1, observed_jobs: 0 });
    expect(mixed.per_model['dream-4']?.credits).toBeNull();
    expect(mixed.total_credits).toBe(5);
  });

  it('rejects a non-finite or absurd user price naming the model, instead of a null (Infinity) total', async () => {
    const jobs = [job('dream-4', { prompt: 'x', n: 15 }, 'submit', 'a')];
    await expect(estimate(jobs, { 'dream-4': 1e308 })).rejects.toThrow(/dream-4: must be at most 1,000,000,000 credits per unit \(got 1e\+308\)/);
    await expect(estimate(jobs, { 'dream-4': Number.POSITIVE_INFINITY })).rejects.toThrow(/dream-4: must be a finite number/);
    await expect(estimate(jobs, { 'kontext-pro': Number.NaN })).rejects.toThrow(UsageError);
    expect(() => priceJob(jobs[0] as ManifestJob, { 'dream-4': 2e9 })).toThrow(/user-supplied price for dream-4 must be at most/);
    const est = await estimate(jobs, { 'dream-4': 1e9 });
    expect(est.total_credits).toBe(1.5e10);
    expect(est.unknown_price_jobs).toEqual([]);
  });

  it('rejects an absurd price in a manifest pricing: block', async () => {
    const p = join(dir, 'huge.yaml');
    writeFileSync(p, 'pricing: {dream-4: 1e308}\njobs:\n  - {id: a, model: dream-4, input: {prompt: x, n: 15}}\n');
    const m = await openManifest(p);
    await expect(estimate(m.jobs(), { 'dream-4': 1e308 })).rejects.toThrow(/dream-4: must be at most/);
    expect(m.pricing).toBeNull();
  });

  it('validate reports an absurd pricing: block price with its line, as estimate and run refuse it', async () => {
    const p = join(dir, 'huge.yaml');
    writeFileSync(p, 'jobs:\n  - {id: a, model: dream-4, input: {prompt: x, n: 15}}\npricing:\n  kontext-pro: 4\n  dream-4: 2e9\n');
    const r = await validateManifest(p);
    expect(r.problems.map(formatProblem)).toEqual([`${p}:5 pricing.dream-4: must be at most 1,000,000,000 credits per unit`]);
  });

  it('keeps no per-job list unless asked, and does not price invalid jobs', async () => {
    const bad: ManifestJob = { ...job('alpha-image-2', {}, 'submit', 'z'), problems: [{ job: 'z', where: 'm.yaml:3', path: 'input.prompt', message: 'is required' }] };
    const est = await estimate([job('alpha-image-2', { prompt: 'x' }, 'submit', 'a'), bad], null);
    expect(est.jobs).toBeNull();
    expect(est.jobs_count).toBe(2);
    expect(est.invalid_jobs).toBe(1);
    expect(est.total_credits).toBe(2);
    expect(est.problems).toEqual(bad.problems);
  });

  it('consumes a manifest stream and uses its pricing block', async () => {
    const p = join(dir, 'm.yaml');
    writeFileSync(p, 'pricing: {kontext-pro: 5}\njobs:\n  - {id: a, model: kontext-pro, input: {prompt: x}}\n  - {id: b, model: alpha-image-2, input: {prompt: x, quality: high}}\n');
    const m = await openManifest(p);
    const est = await estimate(m.jobs(), m.pricing);
    expect(est.total_credits).toBe(17);
    expect(est.user_supplied_credits).toBe(5);
    expect(est.unknown_price_jobs).toEqual([]);
  });
});

describe('loadPrices', () => {
  it('reads YAML and JSON files', async () => {
    writeFileSync(join(dir, 'p.yaml'), 'dream-4: 3\nvendora/chat-5: 0.5\n');
    writeFileSync(join(dir, 'p.json'), '{"kontext-pro": 4}');
    expect(await loadPrices(join(dir, 'p.yaml'))).toEqual({ 'dream-4': 3, 'vendora/chat-5': 0.5 });
    expect(await loadPrices(join(dir, 'p.json'))).toEqual({ 'kontext-pro': 4 });
  });

  it('rejects a missing file, bad syntax and bad values with a usage error naming the entry', async () => {
    await expect(loadPrices(join(dir, 'none.yaml'))).rejects.toThrow(UsageError);
    writeFileSync(join(dir, 'bad.yaml'), 'a: [1,\n');
    await expect(loadPrices(join(dir, 'bad.yaml'))).rejects.toThrow(/not valid YAML or JSON/);
    writeFileSync(join(dir, 'neg.yaml'), 'dream-4: -1\nkontext-pro: cheap\n');
    await expect(loadPrices(join(dir, 'neg.yaml'))).rejects.toThrow(/dream-4: must be at least 0; kontext-pro: must be a number of credits/);
    writeFileSync(join(dir, 'huge.yaml'), 'dream-4: 1e308\nkontext-pro: .inf\nalpha-image-2: 1000000001\n');
    await expect(loadPrices(join(dir, 'huge.yaml'))).rejects.toThrow(/dream-4: must be at most 1,000,000,000 credits per unit; kontext-pro: must be .*; alpha-image-2: must be at most/);
    writeFileSync(join(dir, 'max.yaml'), 'dream-4: 1000000000\n');
    expect(await loadPrices(join(dir, 'max.yaml'))).toEqual({ 'dream-4': 1e9 });
  });
});
