import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { setBudgetCap } from '../src/store/pg/budget.js';
import { imageManifest, runCli } from './helpers/cli.js';
import { copyToPostgres } from './helpers/pg-copy.js';
import { pgSandbox } from './helpers/pg-fixture.js';

/**
 * genbatch work --until-empty on a run whose credit cap holds back its last pending jobs: the worker
 * sends what fits (the first job alone, its charge read), and once the next would go over what was charged
 * and nothing is in flight it exits (5: stopped at the cap) instead of waiting forever for credits.
 */

const KEY = 'sk-work-budget-0123456789abcdef';
const JOBS = 6;
const f = pgSandbox({ prefix: 'genbatch-work-budget-', key: KEY, sandbox: { allowLoopback: true } });

beforeAll(async () => {
  const { pool, sandbox } = f;
  const manifest = imageManifest(join(f.dir, 'cats.yaml'), JOBS, 'cat');
  // The run's jobs, synced and left pending (none fits --max-credits 1: exit 5), then copied to PostgreSQL.
  const made = await runCli(['run', manifest, '--sandbox', '--max-credits', '1']);
  expect(made.code, made.stderr).toBe(5);
  const out = join(f.dir, 'genbatch-out', 'cats.sandbox');
  await copyToPostgres(join(out, 'state.db'), pool);
  rmSync(join(out, 'state.db'));
  // As if made against this sandbox before services were recorded: the worker's service is adopted.
  await pool.query('UPDATE runs SET base_url = $1, sandbox = 0', [sandbox.url]);
  await pool.query("DELETE FROM meta WHERE key LIKE 'service:%'");
}, 180_000);

it('work --until-empty exits (5) once the next job would go over the credit cap and nothing is in flight', async () => {
  const { db, pool, sandbox } = f;
  const price = (await pool.query<{ c: number }>('SELECT max(estimated_credits) AS c FROM jobs')).rows[0]!.c;
  expect(price).toBeGreaterThan(0);
  const runId = (await pool.query<{ id: number }>('SELECT id FROM runs')).rows[0]!.id;
  // Room for two jobs of the six.
  await setBudgetCap(pool, Number(runId), price * 2.5);
  const r = await runCli(['work', '--until-empty', '--time-scale', '0.01', '--json'], { GENBATCH_API_KEY: KEY, GENBATCH_STATE: db.url });
  expect(r.code, r.stderr).toBe(5);
  const states = await pool.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM jobs GROUP BY state ORDER BY state');
  expect(states.rows).toEqual([
    { state: 'done', n: 2 },
    { state: 'pending', n: JOBS - 2 },
  ]);
  expect((await sandbox.stats()).tasks_total).toBe(2);
  expect(r.stdout).toContain(`"type":"finish"`);
  expect(r.stdout).toContain(`"cap":{"credits":${price * 2.5},"name":"the run's credit cap of ${price * 2.5}","stopped":true,"charged":${price * 2}`);
}, 60_000);
