import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../src/client/index.js';
import { EXIT } from '../src/errors.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * --max-credits bounds what is charged, measured by the balance (issue #21): against a sandbox that charges
 * 18.5 x every price (alpha-image-2: published 2, charged 37), a run of 80 jobs with --max-credits 200 is
 * charged at most 200 + one task, exits 5 (the cap's code) with the rest pending; the same command with a
 * higher cap goes on, and the cap is the run's total. A model with no published price (sent with --yes) the
 * same. A failed task is refunded: the balance rising makes room again. Each test has its own key.
 */

const FACTOR = 18.5;
const START = 100_000;
const SCALE = '0.005';
/** alpha-image-2 at its defaults: published 2 credits; charged 37 by this sandbox. */
const IMAGE_CHARGE = 2 * FACTOR;
/** vendora/dream-v5.0-flash/text-to-image: no published price; the sandbox charges 4, x 18.5 = 74. */
const FLASH_CHARGE = 4 * FACTOR;

let sb: Sandbox;
let cheap: Sandbox;
const tmp = tempDir('genbatch-credit-cap-');
const keys = { image: 'sk-cap-image-0123456789', flash: 'sk-cap-flash-0123456789', refund: 'sk-cap-refund-0123456789' };

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [keys.image]: START, [keys.flash]: START }, timeScale: Number(SCALE), seed: 5, priceFactor: FACTOR });
  cheap = await startSandbox({ port: 0, keys: { [keys.refund]: START }, timeScale: Number(SCALE), seed: 6, priceFactor: 2 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  await cheap?.close();
  tmp.cleanup();
});

/** The key's balance, read from the sandbox through our own client. */
async function balance(s: Sandbox, key: string): Promise<number> {
  const client = new ServiceClient({ baseUrl: s.url, apiKey: key });
  try {
    return await client.balance();
  } finally {
    await client.close();
  }
}

function run(s: Sandbox, key: string, manifest: string, out: string, extra: string[]) {
  const env = { GENBATCH_API_KEY: key, GENBATCH_BASE_URL: s.url, GENBATCH_PRICE_BOOK: join(tmp.dir, `book-${key}.json`) };
  return runCli(['run', manifest, '--out', out, '--time-scale', SCALE, '--concurrency', '8', ...extra], env);
}

function report(out: string) {
  return JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as {
    summary: { counts: Record<string, number>; credits: { charged: number | null; cap: { credits: number; name: string; stopped: boolean } | null } };
  };
}

/** Charged totals measured, printed for the record (the note asks for them). */
const measured: string[] = [];
afterAll(() => console.log(`credit cap, charged totals measured:\n${measured.join('\n')}`));

describe('--max-credits bounds what is charged', () => {
  it('80 image jobs charged 18.5 x their published price: --max-credits 200 stops at <= 200 + one task (exit 5, the rest pending); --max-credits 400 goes on, <= 400 + one task in all', async () => {
    const manifest = imageManifest(join(tmp.dir, 'cats.yaml'), 80, 'cat');
    const out = join(tmp.dir, 'out-image');
    const b0 = await balance(sb, keys.image);
    const first = await run(sb, keys.image, manifest, out, ['--max-credits', '200']);
    expect(first.code, first.stderr + first.stdout).toBe(EXIT.capReached);
    const spent1 = b0 - (await balance(sb, keys.image));
    measured.push(`image x18.5, --max-credits 200: charged ${spent1}`);
    expect(spent1).toBeLessThanOrEqual(200 + IMAGE_CHARGE);
    expect(spent1).toBeGreaterThan(0);
    const jobs1 = readJobs(join(out, 'state.db'));
    const pending1 = jobs1.filter((j) => j.state === 'pending').length;
    expect(jobs1.filter((j) => j.state === 'done').length).toBe(spent1 / IMAGE_CHARGE);
    expect(pending1).toBe(80 - spent1 / IMAGE_CHARGE);
    expect(first.stdout).toContain(`stopped at --max-credits 200: charged ${spent1}, ${pending1} jobs left pending`);
    expect(first.stdout).toContain('(raise the cap to go on)');
    expect(first.stderr).toContain('credit cap 200 (--max-credits 200)');
    const r1 = report(out);
    expect(r1.summary.credits.charged).toBe(spent1);
    expect(r1.summary.credits.cap).toEqual({ credits: 200, name: '--max-credits 200', stopped: true });
    expect(readFileSync(join(out, 'report.md'), 'utf8')).toContain('cap 200 (--max-credits 200): the run stopped at the cap');

    const second = await run(sb, keys.image, manifest, out, ['--max-credits', '400']);
    expect(second.code, second.stderr + second.stdout).toBe(EXIT.capReached);
    const spent2 = b0 - (await balance(sb, keys.image));
    measured.push(`image x18.5, then --max-credits 400: charged ${spent2} in all`);
    expect(spent2).toBeGreaterThan(spent1);
    expect(spent2).toBeLessThanOrEqual(400 + IMAGE_CHARGE);
    const jobs2 = readJobs(join(out, 'state.db'));
    expect(jobs2.filter((j) => j.state === 'done').length).toBe(spent2 / IMAGE_CHARGE);
    expect(jobs2.filter((j) => j.state === 'pending').length).toBe(80 - spent2 / IMAGE_CHARGE);
    expect(report(out).summary.credits.charged).toBe(spent2);
  }, 120_000);

  it('jobs of a model with no published price, with --yes: the first is sent alone and its charge counted for the rest; <= 200 + one task, then <= 400 + one task', async () => {
    const lines = ['jobs:'];
    for (let i = 0; i < 40; i++) lines.push(`  - id: f-${i}`, '    model: vendora/dream-v5.0-flash/text-to-image', '    input:', `      prompt: "A lighthouse number ${i}"`);
    const manifest = join(tmp.dir, 'flash.yaml');
    writeFileSync(manifest, lines.join('\n') + '\n');
    const out = join(tmp.dir, 'out-flash');
    const b0 = await balance(sb, keys.flash);
    const first = await run(sb, keys.flash, manifest, out, ['--max-credits', '200', '--yes']);
    expect(first.code, first.stderr + first.stdout).toBe(EXIT.capReached);
    const spent1 = b0 - (await balance(sb, keys.flash));
    measured.push(`no published price (charged 74), --max-credits 200 --yes: charged ${spent1}`);
    expect(spent1).toBeLessThanOrEqual(200 + FLASH_CHARGE);
    expect(first.stderr).toContain(`was charged ${FLASH_CHARGE} credits (expected unknown)`);
    const second = await run(sb, keys.flash, manifest, out, ['--max-credits', '400', '--yes']);
    expect(second.code, second.stderr + second.stdout).toBe(EXIT.capReached);
    const spent2 = b0 - (await balance(sb, keys.flash));
    measured.push(`no published price, then --max-credits 400 --yes: charged ${spent2} in all`);
    expect(spent2).toBeGreaterThan(spent1);
    expect(spent2).toBeLessThanOrEqual(400 + FLASH_CHARGE);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.filter((j) => j.state === 'done').length).toBe(spent2 / FLASH_CHARGE);
  }, 120_000);

  it('estimate shows the cap, the estimate and how many jobs have no confirmed price; over the cap it exits 5 (as run)', async () => {
    const manifest = imageManifest(join(tmp.dir, 'est.yaml'), 80, 'est');
    const r = await runCli(['estimate', manifest, '--offline', '--max-credits', '200'], { GENBATCH_PRICE_BOOK: join(tmp.dir, 'book-est.json') });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('total: 160 credits');
    expect(r.stdout).toContain('cap: 200 credits (--max-credits 200): a run is charged at most that plus one task per process, measured by the balance');
    expect(r.stdout).toContain('80 jobs have no price confirmed by a charge on this account');
    const json = await runCli(['estimate', manifest, '--offline', '--max-credits', '100', '--json'], { GENBATCH_PRICE_BOOK: join(tmp.dir, 'book-est.json') });
    expect(json.code).toBe(EXIT.capReached);
    expect(JSON.parse(json.stdout)).toMatchObject({ total_credits: 160, cap: { credits: 100, name: '--max-credits 100' }, unconfirmed_price_jobs: 80 });
  }, 60_000);

  it('a failed task is refunded: the balance rising makes room again, so every job is sent within a cap that covers only the tasks that succeed', async () => {
    // 12 jobs published at 2 (estimate 24), charged 4 by this sandbox (48 in all); 6 of them fail at the end of
    // their run (a fail word: a generation error, not a permanent refusal) and are refunded, so 24 is charged. Under --max-credits 30 every job is sent only
    // because the refunds give room back: a cap that counted what was sent, not what the balance says, stops at 7.
    const lines = ['jobs:'];
    for (let i = 0; i < 12; i++) lines.push(`  - id: r-${i}`, '    model: alpha-image-2', '    input:', `      prompt: "Harbour ${i}${i % 2 === 1 ? ' fail-output' : ''}"`);
    const manifest = join(tmp.dir, 'refund.yaml');
    writeFileSync(manifest, lines.join('\n') + '\n');
    const out = join(tmp.dir, 'out-refund');
    const b0 = await balance(cheap, keys.refund);
    const r = await run(cheap, keys.refund, manifest, out, ['--max-credits', '30']);
    expect(r.code, r.stderr + r.stdout).toBe(EXIT.jobsFailed);
    const spent = b0 - (await balance(cheap, keys.refund));
    measured.push(`refunds (12 jobs charged 4, 6 refunded), --max-credits 30: charged ${spent}`);
    expect(spent).toBe(24);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.filter((j) => j.state === 'done').length).toBe(6);
    expect(jobs.filter((j) => j.state === 'failed').length).toBe(6);
  }, 120_000);
});
