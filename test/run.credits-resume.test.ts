import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../src/client/index.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * The charge in the reports is the whole run's, over every invocation of it: a run stopped (SIGINT, SIGKILL)
 * and resumed reports the balance spent over both invocations, as read from the sandbox; a rerun with nothing
 * to do keeps that total. Each test has its own key, so the sandbox's balance of that key moves only by the run.
 */

const SCALE = '0.005';
const START = 100_000;
/** alpha-image-2 at its default quality and resolution. */
const PRICE = 2;
const JOBS = 40;

let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  // Every submit answered after 300 ms: 40 jobs at concurrency 2 take 6 s to send, so the stop lands mid-run.
  sb = await startSandbox({
    port: 0,
    keys: { 'sk-credits-sigint-01': START, 'sk-credits-sigkill-02': START },
    timeScale: Number(SCALE),
    seed: 11,
    faults: [{ endpoint: 'submit', kind: 'slow', rate: 1, delayMs: 300 }],
  });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-credits-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

/** The key's balance, read from the sandbox through our own client. */
async function balanceOf(key: string): Promise<number> {
  const client = new ServiceClient({ baseUrl: sb.url, apiKey: key });
  try {
    return await client.balance();
  } finally {
    await client.close();
  }
}

/** Start `genbatch run ... --json` and send `signal` once `after` jobs are submitted; resolves with its exit. */
function stopAfterSubmits(args: string[], key: string, after: number, signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    const child = spawnCli([...args, '--json'], { GENBATCH_API_KEY: key });
    let text = '';
    let submitted = 0;
    let sent = false;
    child.stdout!.on('data', (d: Buffer) => {
      text += d.toString();
      const lines = text.split('\n');
      text = lines.pop() ?? '';
      for (const l of lines) if (l.includes('"to":"submitted"')) submitted++;
      if (submitted >= after && !sent) {
        sent = true;
        child.kill(signal);
      }
    });
    child.stderr!.resume();
    child.on('exit', (code, sig) => resolve({ code, signal: sig }));
  });
}

/**
 * The resumed invocation's submits answered at once: one scripted `ok` (which takes precedence over the slow
 * fault) for each job still pending, the submits it sends (nothing else fails here). Only the stopped invocation
 * needs its submits slow, for the stop to land mid-run.
 */
function fastResume(state: string): void {
  const pending = readJobs(state).filter((j) => j.state === 'pending').length;
  sb.script('submit', Array<'ok'>(pending).fill('ok'));
}

interface Credits {
  estimated_known: number;
  unknown_price_jobs: number;
  balance_before: number | null;
  balance_after: number | null;
  charged: number | null;
  invocations: Array<{ n: number; balance_before: number | null; balance_after: number | null; balance_before_at: string | null; balance_after_at: string | null; submits: number | null; charged: number | null; charged_to: string | null }>;
}

const creditsOf = (out: string): Credits => (JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { summary: { credits: Credits } }).summary.credits;

describe('the charge of a run stopped and resumed', () => {
  it('SIGINT, then resume: report.json, report.md and report.html charge the balance spent over both invocations; a no-change rerun keeps it', async () => {
    const key = 'sk-credits-sigint-01';
    const w = work();
    const manifest = imageManifest(join(w.dir, 'm.yaml'), JOBS, 'c');
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--concurrency', '2'];
    const b0 = await balanceOf(key);
    expect(b0).toBe(START);

    const first = await stopAfterSubmits(args, key, 3, 'SIGINT');
    expect(first.code).toBe(130);
    const mid = readJobs(w.state);
    const sentFirst = mid.filter((j) => j.task_id !== null).length;
    expect(mid.filter((j) => j.state === 'pending').length).toBeGreaterThan(0);
    const b1 = await balanceOf(key);
    expect(b0 - b1).toBe(sentFirst * PRICE);
    // The stopped invocation read the balance after the submits it waited for.
    const c1 = creditsOf(w.out);
    expect(c1.invocations).toHaveLength(1);
    expect(c1.invocations[0]).toMatchObject({ n: 1, balance_before: b0, balance_after: b1, charged: b0 - b1, charged_to: 'end' });
    // Submit requests started: a request the stop caught before it was sent counts too.
    expect(c1.invocations[0]!.submits).toBeGreaterThanOrEqual(sentFirst);
    expect(c1.charged).toBe(b0 - b1);

    fastResume(w.state);
    const second = await runCli(args, { GENBATCH_API_KEY: key });
    expect(second.code).toBe(0);
    const b2 = await balanceOf(key);
    const spent = b0 - b2;
    expect(spent).toBe(JOBS * PRICE);
    const c2 = creditsOf(w.out);
    expect(c2.charged).toBe(spent);
    expect(c2.estimated_known).toBe(JOBS * PRICE);
    expect(c2.unknown_price_jobs).toBe(0);
    expect(c2.invocations.map((i) => [i.n, i.balance_before, i.balance_after, i.charged, i.charged_to])).toEqual([
      [1, b0, b1, b0 - b1, 'end'],
      [2, b1, b2, b1 - b2, 'end'],
    ]);
    for (const i of c2.invocations) for (const at of [i.balance_before_at, i.balance_after_at]) expect(Number.isNaN(Date.parse(at ?? ''))).toBe(false);
    expect(c2.balance_before).toBe(b0);
    expect(c2.balance_after).toBe(b2);
    const md = readFileSync(join(w.out, 'report.md'), 'utf8');
    expect(md).toContain(`- Charged over the run (2 invocations): ${spent}\n`);
    expect(md).toContain(`charged ${spent} over 2 invocations (balance ${b0} -> ${b2})`);
    expect(md).toContain('"Charged" is measured, not computed from prices');
    expect(md).toContain('"Estimated" is the sum of the known prices');
    const html = readFileSync(join(w.out, 'report.html'), 'utf8');
    expect(html).toContain(`charged ${spent} over 2 invocations (balance ${b0} -&#62; ${b2})`);
    expect(html).toContain('&#34;Charged&#34; is measured, not computed from prices');
    // The end-of-run line says the run's charge and this invocation's.
    expect(second.stdout).toContain(`charged ${spent} credits over the run, ${b1 - b2} in this invocation`);

    // A rerun with nothing to do reads no balance and keeps the run's total, also when it writes the reports
    // again (one is missing) and when `genbatch report` rewrites them.
    rmSync(join(w.out, 'report.md'));
    const third = await runCli(args, { GENBATCH_API_KEY: key });
    expect(third.code).toBe(0);
    expect(third.stdout).toContain(`charged ${spent} credits over the run`);
    expect(third.stdout).not.toContain('in this invocation');
    expect(creditsOf(w.out).charged).toBe(spent);
    expect(creditsOf(w.out).invocations).toHaveLength(2);
    expect(readFileSync(join(w.out, 'report.md'), 'utf8')).toContain(`- Charged over the run (2 invocations): ${spent}\n`);
    const rep = await runCli(['report', '--state', w.state]);
    expect(rep.code).toBe(0);
    expect(creditsOf(w.out).charged).toBe(spent);
    expect(await balanceOf(key)).toBe(b2);
  }, 120_000);

  it('SIGKILL, then resume: the killed invocation is measured to the next opening reading, and the total is the balance spent', async () => {
    const key = 'sk-credits-sigkill-02';
    const w = work();
    const manifest = imageManifest(join(w.dir, 'k.yaml'), JOBS, 'k');
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--concurrency', '2'];
    const b0 = await balanceOf(key);
    const first = await stopAfterSubmits(args, key, 3, 'SIGKILL');
    expect(first.signal).toBe('SIGKILL');
    const b1 = await balanceOf(key);
    expect(b1).toBeLessThan(b0);

    // Jobs whose submit was cut by the kill are uncertain (their tasks may exist, and are charged); the rest run.
    fastResume(w.state);
    const second = await runCli(args, { GENBATCH_API_KEY: key });
    expect([0, 4]).toContain(second.code);
    const b2 = await balanceOf(key);
    const c = creditsOf(w.out);
    expect(c.charged).toBe(b0 - b2);
    expect(c.invocations.map((i) => [i.n, i.balance_before, i.balance_after, i.charged, i.charged_to])).toEqual([
      [1, b0, null, b0 - b1, 'next-start'],
      [2, b1, b2, b1 - b2, 'end'],
    ]);
    const md = readFileSync(join(w.out, 'report.md'), 'utf8');
    expect(md).toContain('Invocation 1 has no closing balance reading (stopped before it, or the read failed): it is measured up to the opening reading of invocation 2.');
  }, 120_000);
});
