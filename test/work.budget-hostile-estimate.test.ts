import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, expect, it } from 'vitest';
import { setBudgetCap } from '../src/store/pg/budget.js';
import { keyBalance } from './helpers/balance.js';
import { runCli } from './helpers/cli.js';
import { copyToPostgres } from './helpers/pg-copy.js';
import { pgSandbox } from './helpers/pg-fixture.js';

/**
 * A job whose estimate in the database is negative (a row edited by hand or written by another client) under the
 * run's credit cap. The first job of its price class goes alone and reserved its estimate as it stood: a
 * reservation of -1000 added 1000 credits to the worker's hold without taking them from the budget row, and the
 * worker then sent every other job from that hold, past the cap (room for 2.5 jobs: all 10 sent, 21 credits
 * charged). Now an estimate that is not a finite number of credits >= 0 counts as unknown: the job goes alone,
 * reserving nothing, only while the cap has room, and the charge stays within the cap plus one task.
 */

const KEY = 'sk-work-budget-hostile-0123456789ab';
const f = pgSandbox({ prefix: 'genbatch-work-budget-hostile-', key: KEY, sandbox: { allowLoopback: true } });

beforeAll(async () => {
  const { pool, sandbox } = f;
  // Job 1 is of another price class (quality medium) than the others, so it is the first of its class, sent alone.
  const lines = ['jobs:'];
  for (let i = 0; i < 10; i++) lines.push(`  - id: cat-${i}`, '    model: alpha-image-2', `    input: {prompt: "cat ${i}"${i === 1 ? ', quality: medium' : ''}}`);
  const manifest = join(f.dir, 'cats.yaml');
  writeFileSync(manifest, `${lines.join('\n')}\n`);
  // The run's jobs, synced and left pending (none fits --max-credits 1: exit 5), then copied to PostgreSQL.
  const made = await runCli(['run', manifest, '--sandbox', '--max-credits', '1']);
  expect(made.code, made.stderr).toBe(5);
  const out = join(f.dir, 'genbatch-out', 'cats.sandbox');
  await copyToPostgres(join(out, 'state.db'), pool);
  rmSync(join(out, 'state.db'));
  await pool.query('UPDATE runs SET base_url = $1, sandbox = 0', [sandbox.url]);
  await pool.query("DELETE FROM meta WHERE key LIKE 'service:%'");
}, 180_000);

it('a negative estimate in the database lets no send past the credit cap', async () => {
  const { db, pool } = f;
  const price = (await pool.query<{ c: number }>(`SELECT estimated_credits AS c FROM jobs WHERE id = 'cat-0'`)).rows[0]!.c;
  const top = (await pool.query<{ c: number }>('SELECT max(estimated_credits) AS c FROM jobs')).rows[0]!.c;
  await pool.query(`UPDATE jobs SET estimated_credits = -1000 WHERE id = 'cat-1'`);
  const runId = (await pool.query<{ id: number }>('SELECT id FROM runs')).rows[0]!.id;
  const cap = price * 2.5;
  await setBudgetCap(pool, Number(runId), cap);
  const before = await keyBalance(f.sandbox.url, KEY);
  const r = await runCli(['work', '--until-empty', '--time-scale', '0.01', '--concurrency', '2'], { GENBATCH_API_KEY: KEY, GENBATCH_STATE: db.url });
  expect(r.code, r.stderr + r.stdout).toBe(5);
  const charged = before - (await keyBalance(f.sandbox.url, KEY));
  expect(charged).toBeGreaterThan(0);
  expect(charged).toBeLessThanOrEqual(cap + top);
  expect((await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM jobs WHERE state = 'pending'`)).rows[0]!.n).toBeGreaterThan(0);
}, 60_000);
