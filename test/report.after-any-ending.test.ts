import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../src/client/index.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * The reports are true after any ending (issue #26 item 6): a refusal before sending rewrites them with the
 * jobs left pending and why; each job records the invocation that last sent it and its expected price;
 * report.json has what each invocation sent, got done, failed and was charged; `report --invocation` shows one;
 * after a SIGKILL the lost invocation's charge is reconstructed from the next opening reading and says so.
 */

const SCALE = '0.005';
const START = 100_000;
/** alpha-image-2 at its default quality and resolution. */
const PRICE = 2;

let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({
    port: 0,
    keys: { 'sk-nightreport-refuse-01': START, 'sk-nightreport-kill-02': START },
    timeScale: Number(SCALE),
    seed: 7,
    faults: [{ endpoint: 'submit', kind: 'slow', rate: 1, delayMs: 300 }],
  });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-nightreport-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

async function balanceOf(key: string): Promise<number> {
  const client = new ServiceClient({ baseUrl: sb.url, apiKey: key });
  try {
    return await client.balance();
  } finally {
    await client.close();
  }
}

interface Inv {
  n: number;
  charged: number | null;
  charged_to: string | null;
  charged_source: string | null;
  jobs?: { sent: number; done: number; failed: number };
}
interface Report {
  summary: { counts: Record<string, number>; refused?: { reason: string; exit_code: number } | null; credits: { charged: number | null; invocations: Inv[] } };
  jobs: Array<{ id: string; state: string; sent_by?: number | null; expected_credits?: number | null; pending_reason?: string }>;
}
const reportOf = (out: string): Report => JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as Report;

describe('reports after a refusal, per invocation', () => {
  it('a refusal before sending rewrites the reports with the new jobs pending and the reason; a later invocation clears it; each invocation counts what it sent', async () => {
    const key = 'sk-nightreport-refuse-01';
    const w = work();
    const manifest = join(w.dir, 'nightly.yaml');
    imageManifest(manifest, 4, 'n');
    const base = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--concurrency', '4'];
    const night1 = await runCli(base, { GENBATCH_API_KEY: key });
    expect(night1.code).toBe(0);
    const r1 = reportOf(w.out);
    expect(r1.summary.counts.done).toBe(4);
    expect(r1.summary.refused ?? null).toBeNull();
    expect(r1.jobs.map((j) => [j.sent_by, j.expected_credits])).toEqual(Array.from({ length: 4 }, () => [1, PRICE]));
    expect(r1.summary.credits.invocations).toMatchObject([{ n: 1, charged: 4 * PRICE, charged_source: 'measured', jobs: { sent: 4, done: 4, failed: 0 } }]);

    // Night 2: the manifest grew by 3 jobs, and a cap below one job's price: nothing fits, nothing is sent (exit 5).
    imageManifest(manifest, 7, 'n');
    const before = await balanceOf(key);
    const night2 = await runCli([...base, '--max-credits', '1'], { GENBATCH_API_KEY: key });
    expect(night2.code).toBe(5);
    expect(await balanceOf(key)).toBe(before);
    const r2 = reportOf(w.out);
    expect(r2.summary.counts).toMatchObject({ done: 4, pending: 3 });
    expect(r2.summary.refused).toMatchObject({ exit_code: 5 });
    expect(r2.summary.refused!.reason).toContain('--max-credits 1');
    const pending = r2.jobs.filter((j) => j.state === 'pending');
    expect(pending.map((j) => j.id)).toEqual(['n-0004', 'n-0005', 'n-0006']);
    for (const j of pending) expect(j.pending_reason).toBe(r2.summary.refused!.reason);
    for (const j of pending) expect(j.sent_by ?? null).toBeNull();
    expect(readFileSync(join(w.out, 'report.md'), 'utf8')).toContain('The last invocation was refused before sending');
    expect(readFileSync(join(w.out, 'report.csv'), 'utf8').match(/n-000[456]/g)).toHaveLength(3);
    expect(readFileSync(join(w.out, 'report.html'), 'utf8')).toContain('refused before sending');

    // Night 3: no cap; the refusal is gone, invocation 2 sent the 3 new jobs.
    const night3 = await runCli(base, { GENBATCH_API_KEY: key });
    expect(night3.code).toBe(0);
    const r3 = reportOf(w.out);
    expect(r3.summary.refused ?? null).toBeNull();
    expect(r3.jobs.every((j) => j.pending_reason === undefined)).toBe(true);
    expect(r3.jobs.map((j) => j.sent_by)).toEqual([1, 1, 1, 1, 2, 2, 2]);
    expect(r3.summary.credits.invocations.map((i) => [i.n, i.charged, i.charged_source, i.jobs])).toEqual([
      [1, 4 * PRICE, 'measured', { sent: 4, done: 4, failed: 0 }],
      [2, 3 * PRICE, 'measured', { sent: 3, done: 3, failed: 0 }],
    ]);

    const last = await runCli(['report', '--state', w.state, '--invocation', 'last', '--json']);
    expect(last.code).toBe(0);
    const view = JSON.parse(last.stdout) as { invocation: Inv; jobs: Array<{ id: string; state: string; expected_credits: number }>; expected_credits: number };
    expect(view.invocation).toMatchObject({ n: 2, charged: 3 * PRICE, charged_source: 'measured', jobs: { sent: 3, done: 3, failed: 0 } });
    expect(view.jobs.map((j) => [j.id, j.state, j.expected_credits])).toEqual([
      ['n-0004', 'done', PRICE],
      ['n-0005', 'done', PRICE],
      ['n-0006', 'done', PRICE],
    ]);
    expect(view.expected_credits).toBe(3 * PRICE);
    const first = await runCli(['report', '--state', w.state, '--invocation', '1']);
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(`charged ${4 * PRICE} (measured)`);
    expect(first.stdout).toContain('jobs it last sent: 4, done 4, failed 0');
    const none = await runCli(['report', '--state', w.state, '--invocation', '3']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--invocation 3: no such invocation; the run has 2: 1 to 2');
  }, 180_000);
});

describe('the charge of a killed invocation', () => {
  it('is unknown until a reading exists, then reconstructed from the next invocation\'s opening reading and labelled so', async () => {
    const key = 'sk-nightreport-kill-02';
    const w = work();
    const manifest = imageManifest(join(w.dir, 'k.yaml'), 30, 'k');
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--concurrency', '2'];
    const b0 = await balanceOf(key);
    await new Promise<void>((resolve) => {
      const child = spawnCli([...args, '--json'], { GENBATCH_API_KEY: key });
      let submitted = 0;
      child.stdout!.on('data', (d: Buffer) => {
        submitted += d.toString().split('"to":"submitted"').length - 1;
        if (submitted >= 3) child.kill('SIGKILL');
      });
      child.stderr!.resume();
      child.on('exit', () => resolve());
    });
    const b1 = await balanceOf(key);
    expect(b1).toBeLessThan(b0);

    // No reading after the kill yet: the reports say unknown (null), with no source.
    expect((await runCli(['report', '--state', w.state])).code).toBe(0);
    const lost = reportOf(w.out).summary.credits;
    expect(lost.charged).toBeNull();
    expect(lost.invocations).toMatchObject([{ n: 1, charged: null, charged_to: null, charged_source: null }]);

    // The resumed invocation's submits answered at once (a scripted ok per job still pending, the submits it sends,
    // ahead of the slow fault): only the killed invocation needs them slow, for the kill to land mid-run.
    sb.script('submit', Array<'ok'>(readJobs(w.state).filter((j) => j.state === 'pending').length).fill('ok'));
    const second = await runCli(args, { GENBATCH_API_KEY: key });
    expect([0, 4]).toContain(second.code);
    const b2 = await balanceOf(key);
    const c = reportOf(w.out).summary.credits;
    expect(c.charged).toBe(b0 - b2);
    expect(c.invocations.map((i) => [i.n, i.charged, i.charged_source])).toEqual([
      [1, b0 - b1, 'reconstructed'],
      [2, b1 - b2, 'measured'],
    ]);
    const view = await runCli(['report', '--state', w.state, '--invocation', '1']);
    expect(view.stdout).toContain(`charged ${b0 - b1} (reconstructed)`);
  }, 180_000);
});
