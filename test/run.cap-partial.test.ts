import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../src/errors.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';
import { keyBalance } from './helpers/balance.js';

/**
 * --max-credits when the task that teaches a class its price delivers fewer outputs than asked: the service
 * charges the whole task at submission and refunds the missing outputs when it ends. The class's price must be
 * what a task is charged, not what the first one cost after its refund: dream-4 with n 15 is charged 60 a task;
 * with seed 2427 and --partial-rate 0.1 the sandbox's first task delivers 1 image of 15 (56 refunded at its end)
 * and every later one all 15. Learned at 4, the jobs sent next each reserved 4 and were charged 60: a cap of 300
 * was charged 1864. The bound is the cap plus one task.
 */

const KEY = 'sk-cap-partial-0123456789';
const START = 100_000;
const SCALE = '0.02';
const TASK_CHARGE = 60;

let sb: Sandbox;
const tmp = tempDir('genbatch-cap-partial-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: START }, timeScale: Number(SCALE), seed: 2427, partialRate: 0.1 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  tmp.cleanup();
});

const balance = (): Promise<number> => keyBalance(sb.url, KEY);

describe('--max-credits with a partly refunded first task', () => {
  it('prices the class at the charge before the refund: charged at most the cap plus one task (exit 5, the rest pending)', async () => {
    const lines = ['jobs:'];
    for (let i = 0; i < 60; i++) lines.push(`  - id: d-${i}`, '    model: dream-4', '    input:', `      prompt: "A lighthouse number ${i}"`, '      n: 15');
    const manifest = join(tmp.dir, 'dream.yaml');
    writeFileSync(manifest, lines.join('\n') + '\n');
    const out = join(tmp.dir, 'out');
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sb.url, GENBATCH_PRICE_BOOK: join(tmp.dir, 'book.json') };
    const r = await runCli(['run', manifest, '--out', out, '--time-scale', SCALE, '--concurrency', '8', '--max-credits', '300', '--yes'], env);
    expect(r.code, r.stderr + r.stdout).toBe(EXIT.capReached);
    const spent = START - (await balance());
    expect(spent).toBeLessThanOrEqual(300 + TASK_CHARGE);
    // The first task cost 4 after its refund: the class's price is what it was charged at submission.
    expect(r.stderr).toContain(`was charged ${TASK_CHARGE} credits (expected unknown)`);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.filter((j) => j.state === 'pending').length).toBeGreaterThan(0);
  }, 120_000);
});
