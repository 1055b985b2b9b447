import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EXIT } from '../src/errors.js';
import { imageManifest, runCli } from './helpers/cli.js';
import { pgSandbox } from './helpers/pg-fixture.js';
import { keyBalance } from './helpers/balance.js';

/**
 * Three processes on one PostgreSQL run share one credit cap and one record of what was charged (the budget
 * row, issue #21 item 3): against a sandbox charging 18.5 x every price (alpha-image-2: 37 for a published 2),
 * --max-credits 300 charges at most 300 + one task per worker, every worker exits 5 (the cap's code) with the
 * rest pending; the same three with --max-credits 600 go on, and the total stays within 600 + one task per worker.
 */

const KEY = 'sk-pg-cap-test-0123456789abcdef';
const CHARGE = 37;
const WORKERS = 3;
const f = pgSandbox({ prefix: 'genbatch-pg-cap-', key: KEY, migrate: false, sandbox: { priceFactor: 18.5 } });

const balance = (): Promise<number> => keyBalance(f.sandbox.url, KEY);

const measured: string[] = [];
afterAll(() => console.log(`credit cap on PostgreSQL, charged totals measured:\n${measured.join('\n')}`));

describe('a credit cap shared by the workers of a PostgreSQL run', () => {
  it(`${WORKERS} workers with --max-credits 300: at most 300 + one task per worker charged, exit 5, the rest pending; then --max-credits 600 goes on within 600 + one task per worker`, async () => {
    const manifest = imageManifest(join(f.dir, 'cats.yaml'), 80, 'cat');
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: f.sandbox.url, GENBATCH_PRICE_BOOK: join(f.dir, 'book.json') };
    const states = async () =>
      Object.fromEntries((await f.pool.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM jobs GROUP BY state')).rows.map((r) => [r.state, r.n]));
    const b0 = await balance();
    const args = (cap: number) => ['run', manifest, '--state', f.db.url, '--time-scale', '0.01', '--concurrency', '8', '--max-credits', String(cap)];

    const first = await Promise.all(Array.from({ length: WORKERS }, () => runCli(args(300), env)));
    for (const r of first) expect(r.code, r.stderr + r.stdout).toBe(EXIT.capReached);
    const spent1 = b0 - (await balance());
    measured.push(`${WORKERS} workers, --max-credits 300: charged ${spent1}`);
    expect(spent1).toBeGreaterThan(0);
    expect(spent1).toBeLessThanOrEqual(300 + WORKERS * CHARGE);
    const s1 = await states();
    expect(s1.done).toBe(spent1 / CHARGE);
    expect(s1.pending).toBe(80 - spent1 / CHARGE);
    // The run's one record of what was charged is the balance's drop.
    const row1 = (await f.pool.query<{ spent: number; reserved: number; stopped: boolean }>('SELECT spent, reserved, stopped FROM budget')).rows[0]!;
    expect(row1).toEqual({ spent: spent1, reserved: 0, stopped: true });
    expect(first.some((r) => r.stdout.includes(`stopped at --max-credits 300: charged ${spent1}`))).toBe(true);
    const report = JSON.parse(readFileSync(join(f.dir, 'genbatch-out', 'cats', 'report.json'), 'utf8')) as { summary: { credits: { charged: number; cap: unknown } } };
    expect(report.summary.credits.charged).toBe(spent1);
    expect(report.summary.credits.cap).toEqual({ credits: 300, name: '--max-credits 300', stopped: true });
    const st = JSON.parse((await runCli(['status', 'cats', '--json'], { GENBATCH_STATE: f.db.url })).stdout) as { cap: unknown };
    expect(st.cap).toEqual({ credits: 300, name: '--max-credits 300', stopped: true, charged: spent1 });

    const second = await Promise.all(Array.from({ length: WORKERS }, () => runCli(args(600), env)));
    for (const r of second) expect(r.code, r.stderr + r.stdout).toBe(EXIT.capReached);
    const spent2 = b0 - (await balance());
    measured.push(`${WORKERS} workers, then --max-credits 600: charged ${spent2} in all`);
    expect(spent2).toBeGreaterThan(spent1);
    expect(spent2).toBeLessThanOrEqual(600 + WORKERS * CHARGE);
    const s2 = await states();
    expect(s2.done).toBe(spent2 / CHARGE);
    expect((await f.pool.query<{ spent: number }>('SELECT spent FROM budget')).rows[0]!.spent).toBe(spent2);
  }, 180_000);
});
