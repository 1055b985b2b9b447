import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../src/errors.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { admin } from './helpers/admin.js';
import { BIN, ROOT, cliEnv, ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { keyBalance } from './helpers/balance.js';

/**
 * Five nights of the nightly example (manifests/nightly: nightly.yaml and nightly.sh run as written, `genbatch` on
 * PATH) against the sandbox, as a scheduler would run them (issue #26): a CSV that grows, faults in the service, a
 * content refusal, a lost submit answer, a template edit behind the re-send guard, a low balance, and a SIGKILL in
 * the middle of a run. Each night: the exit code of the table (README, Exit codes), a charge within the cap per
 * night plus one task, no job sent twice unless a flag asked for it, and report.json equal to the state.
 */
const SCALE = '0.005';
const KEY = 'sk-five-nights-0123456789abcdef';
const PRICE = 2; // alpha-image-2, low, 1:1
const PER_NIGHT = 20;

let sb: Sandbox;
const t = tempDir('genbatch-five-nights-');
const dir = join(t.dir, 'nightly');
const out = join(t.dir, 'out');
const state = join(out, 'state.db');
const env = { GENBATCH_API_KEY: KEY, GENBATCH_PRICE_BOOK: join(t.dir, 'prices.json') };
const charges: string[] = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000 }, timeScale: Number(SCALE), seed: 2605 });
  mkdirSync(dir);
  // The example as tracked, with its cap per night lowered to PER_NIGHT so a few rows fill a night.
  writeFileSync(join(dir, 'nightly.yaml'), readFileSync(join(ROOT, 'manifests/nightly/nightly.yaml'), 'utf8').replace('budget_per_invocation: 40', `budget_per_invocation: ${PER_NIGHT}`));
  copyFileSync(join(ROOT, 'manifests/nightly/nightly.sh'), join(dir, 'nightly.sh'));
  chmodSync(join(dir, 'nightly.sh'), 0o755);
  mkdirSync(join(t.dir, 'bin'));
  writeFileSync(join(t.dir, 'bin', 'genbatch'), `#!/bin/sh\nexec "${process.execPath}" "${BIN}" "$@"\n`, { mode: 0o755 });
}, 120_000);
afterAll(async () => {
  console.log(`five nights, measured:\n${charges.join('\n')}`);
  await sb?.close();
  t.cleanup();
});

/** products.csv with rows 1..n; `refused` rows carry the sandbox's content-policy word. */
function rows(n: number, refused: number[] = []): void {
  const lines = ['sku,name'];
  for (let i = 1; i <= n; i++) lines.push(`p${String(i).padStart(3, '0')},${refused.includes(i) ? 'an unsafe-output poster' : `product number ${i}`}`);
  writeFileSync(join(dir, 'products.csv'), lines.join('\n') + '\n');
}

const balance = (): Promise<number> => keyBalance(sb.url, KEY);
async function tasksTotal(): Promise<number> {
  return ((await (await fetch(`${sb.url}/__sandbox/stats`, admin(sb))).json()) as { tasks_total: number }).tasks_total;
}

interface Summary {
  type: string;
  exit_code: number;
  counts: Record<string, number> | null;
  not_done: Record<string, { count: number; ids: string[] }> | null;
  error: string | null;
}
interface Night {
  code: number;
  summary: Summary;
  charged: number;
  tasks: number;
}

const flags = ['--base-url', '', '--time-scale', SCALE, '--out', out];
/** One night: nightly.sh as cron runs it; the code is the run's own, from the summary line it wrote. */
async function night(name: string): Promise<Night> {
  flags[1] = sb.url;
  const b0 = await balance();
  const k0 = await tasksTotal();
  // Not spawnSync: the sandbox answers from this process.
  const sh = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn('sh', [join(dir, 'nightly.sh')], { env: cliEnv({ ...env, PATH: `${join(t.dir, 'bin')}:${process.env.PATH}`, GENBATCH_NIGHTLY_FLAGS: flags.join(' ') }) });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
  const lines = readFileSync(join(dir, 'last-night.jsonl'), 'utf8').trim().split('\n');
  if (lines.at(-1) === '') throw new Error(`nightly.sh wrote no summary (exit ${sh.status}): ${sh.stdout}${sh.stderr}`);
  const summary = JSON.parse(lines.at(-1)!) as Summary;
  expect(summary.type, sh.stderr).toBe('summary');
  // nightly.sh passes on the codes a person must act on, and exits 0 for those that need no one.
  expect(sh.status).toBe([0, 5, 6, 7, 1].includes(summary.exit_code) ? 0 : summary.exit_code);
  const n = { code: summary.exit_code, summary, charged: b0 - (await balance()), tasks: (await tasksTotal()) - k0 };
  charges.push(`${name}: exit ${n.code}, charged ${n.charged}, tasks ${n.tasks}`);
  if (process.env.FIVE_NIGHTS_DEBUG) writeFileSync(process.env.FIVE_NIGHTS_DEBUG, `${name}\n${lines.join('\n')}\n${sh.stderr}\n`, { flag: 'a' });
  // The cap per night, measured by the balance: at most the cap plus one task.
  expect(n.charged).toBeLessThanOrEqual(PER_NIGHT + PRICE);
  reportMatchesState();
  return n;
}

interface Job {
  id: string;
  state: string;
  attempts: number;
  permanent: number;
}
function jobs(): Job[] {
  const db = new Database(state, { readonly: true });
  try {
    return db.prepare('SELECT id, state, attempts, permanent FROM jobs ORDER BY seq').all() as Job[];
  } finally {
    db.close();
  }
}
const ids = (s: string) => jobs().filter((j) => j.state === s).map((j) => j.id);

/** report.json counts what the state holds, after every ending. */
function reportMatchesState(): void {
  const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { summary: { counts: Record<string, number> } };
  const counts: Record<string, number> = {};
  for (const j of jobs()) counts[j.state] = (counts[j.state] ?? 0) + 1;
  for (const [s, n] of Object.entries(report.summary.counts)) expect(n, `report.json counts.${s}`).toBe(counts[s] ?? 0);
}

/** Backdate the moment every uncertain job became uncertain by `hours` (a night passes), and the sandbox's clock. */
function nightPasses(hours: number): void {
  const db = new Database(state);
  try {
    db.prepare(`UPDATE jobs SET uncertain_at = ? WHERE state = 'uncertain'`).run(new Date(Date.now() - hours * 3_600_000).toISOString());
  } finally {
    db.close();
  }
  sb.clock.advance(hours * 3600);
}

describe('the nightly example, five nights from a scheduler', () => {
  it('every night exits with the code of the table, charges at most its cap plus one task, sends no job twice unless a flag asks, and leaves true reports', async () => {
    // Night 1: 6 rows, one refused by the service for its content; status reads and downloads fail now and then.
    rows(6, [3]);
    sb.script('status', ['502', '429', 'ok', '503']);
    sb.script('file', ['truncate']);
    const n1 = await night('night 1 (6 rows, one refused, faults)');
    expect(n1.code).toBe(EXIT.failedPermanent);
    expect(ids('failed')).toEqual(['product-p003']);
    expect(jobs().find((j) => j.id === 'product-p003')!.permanent).toBe(1);
    expect(ids('done')).toHaveLength(5);
    expect(n1.charged).toBe(5 * PRICE); // the refused task is refunded

    // Night 2: 20 rows (14 new, 28 credits): the cap per night sends the 10 that fit; one submit answer is lost.
    rows(20, [3]);
    sb.script('submit', ['500-after']);
    const n2 = await night('night 2 (14 new rows, cap 20, a lost submit answer)');
    expect(n2.code).toBe(EXIT.incomplete); // uncertain (4) comes before the cap (5)
    expect(ids('uncertain')).toEqual(['product-p007']);
    expect(ids('pending')).toEqual(['product-p017', 'product-p018', 'product-p019', 'product-p020']);
    const reasons = Object.keys(n2.summary.not_done ?? {});
    expect(reasons.some((r) => r.includes('budget_per_invocation'))).toBe(true);
    expect(reasons.some((r) => r.startsWith('uncertain'))).toBe(true);
    // --redo failed did not send the refused job again.
    expect(jobs().find((j) => j.id === 'product-p003')).toMatchObject({ state: 'failed', attempts: 1 });

    // Night 3: a template edit would send the 15 finished jobs again: the guard stops before sending anything.
    const template = readFileSync(join(dir, 'nightly.yaml'), 'utf8');
    writeFileSync(join(dir, 'nightly.yaml'), template.replace('soft light', 'hard light'));
    const n3 = await night('night 3 (template edit)');
    expect(n3.code).toBe(EXIT.incomplete);
    expect(n3.charged).toBe(0);
    expect(n3.tasks).toBe(0);
    expect(n3.summary.error).toContain('--redo changed');
    // Its examples show where the prompts differ, not their common start.
    expect(n3.summary.error).toMatch(/product-p001: input\.prompt: .*soft light.* -> .*hard light/);
    // The person on call keeps the finished results and lets the pending ones go (the edit stays).
    const kept = await runCli(['run', join(dir, 'nightly.yaml'), ...flags, '--keep-changed', '--max-credits', '2000'], env);
    expect([EXIT.incomplete]).toContain(kept.code); // the uncertain job still waits for its day
    expect(ids('pending')).toEqual([]);

    // Night 4: a day later; 6 new rows; the account is low: 7 credits buy 3 jobs. The uncertain job, uncertain for
    // over 24 h with no sign of its task, is sent again (the flag asked for it) and counts among them.
    nightPasses(25);
    rows(26, [3]);
    sb.topUp(KEY, 7 - (await balance()));
    const n4 = await night('night 4 (6 new rows, 7 credits left)');
    expect(n4.code).toBe(EXIT.budget);
    expect(n4.tasks).toBe(3);
    expect(ids('uncertain')).toEqual([]);
    expect(jobs().find((j) => j.id === 'product-p007')!.attempts).toBe(2);
    expect(ids('pending')).toHaveLength(4);

    // Night 5: topped up; 4 new rows; the machine dies (SIGKILL) in the middle of the run, and the night's
    // command runs again.
    sb.topUp(KEY, 500);
    rows(30, [3]);
    const b5 = await balance();
    const run = spawnCli(['run', join(dir, 'nightly.yaml'), ...flags, '--max-credits', '2000', '--redo', 'failed', '--uncertain', 'resubmit-after=24h', '--concurrency', '1'], env);
    await until(() => jobs().some((j) => j.state !== 'pending' && ['product-p023', 'product-p024', 'product-p025', 'product-p026', 'product-p027', 'product-p028', 'product-p029', 'product-p030'].includes(j.id)));
    run.kill('SIGKILL');
    await new Promise((r) => run.once('close', r));
    const submitting = ids('submitting');
    const n5 = await night('night 5 (after a SIGKILL)');
    const killedCharge = b5 - (await balance()) - n5.charged;
    charges.push(`night 5, the killed run: charged ${killedCharge}`);
    // A job caught between its intent and the service's answer is uncertain (exit 4); otherwise every job is settled.
    if (submitting.length > 0) {
      expect(n5.code).toBe(EXIT.incomplete);
      expect(ids('uncertain')).toEqual(submitting);
    } else {
      expect(n5.code).toBe(EXIT.failedPermanent);
      expect(ids('done')).toHaveLength(29);
    }
    expect(killedCharge + n5.charged).toBeLessThanOrEqual(PER_NIGHT + 2 * PRICE);

    // Over five nights: one task per send. Two jobs were sent twice, each for a reason: the refused one because the
    // template edit changed its spec (a permanent failure is sent again when its spec changes; refused again), and
    // the one the uncertain policy sent again.
    const all = jobs();
    expect(all.filter((j) => j.attempts > 1).map((j) => j.id)).toEqual(['product-p003', 'product-p007']);
    expect(all.find((j) => j.id === 'product-p003')).toMatchObject({ state: 'failed', permanent: 1 });
    expect(await tasksTotal()).toBeLessThanOrEqual(all.reduce((a, j) => a + j.attempts, 0));
  }, 300_000);
});

async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 600; i++) {
    try {
      if (cond()) return;
    } catch {
      // the state file is being made
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('timed out');
}
