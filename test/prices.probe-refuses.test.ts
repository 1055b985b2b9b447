import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { balanceProblem, chargeProblem, MAX_PROBE_BALANCE } from '../src/pricing/index.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { admin } from './helpers/admin.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { json, startFakeService, type FakeService } from './helpers/fake-service.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Prices that cannot be true are not learned (issue #21 item 5). The sandbox does the work; a small service
 * in front of it passes every request through and rewrites only the balance answer: a balance that never
 * moves, one given as a numeric string, one out of range, one that drops by more than it held, one where a
 * model's charges are given back (a class that looks free while the others are charged). Each probe records
 * nothing for a class it cannot learn and says why; a class at 0 is kept only when the balance moved for
 * another class, and then it still needs --yes.
 */
const SCALE = '0.005';
const KEY = 'sk-probe-refuses-0123456789';
let sb: Sandbox;
let front: FakeService;
const t = tempDir('genbatch-probe-refuses-');

type Mode = 'real' | 'frozen' | 'string' | 'string-after' | 'huge' | 'absurd' | 'free-kontext';
let mode: Mode = 'real';
/** Submits passed through since the mode was set. */
let submits = 0;
/** Credits of the free model's tasks, given back in the balance answer ('free-kontext'). */
let givenBack = 0;

function setMode(m: Mode): void {
  mode = m;
  submits = 0;
  givenBack = 0;
}

async function sandboxTasks(): Promise<Array<{ task_id: string; model: string; credits: number }>> {
  return ((await (await fetch(`${sb.url}/__sandbox/tasks`, admin(sb))).json()) as { tasks: Array<{ task_id: string; model: string; credits: number }> }).tasks;
}

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 7 });
  front = await startFakeService(async (req, body, res) => {
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers[k] = v;
    const upstream = await fetch(`${sb.url}${req.url}`, { method: req.method!, headers, ...(body !== '' ? { body } : {}) });
    const text = await upstream.text();
    if (req.url === '/api/user/balance' && upstream.status === 200) {
      const real = (JSON.parse(text) as { data: { balance: number } }).data.balance;
      const answers: Record<Mode, unknown> = {
        real,
        frozen: 5000,
        string: String(real),
        'string-after': submits > 0 ? String(real) : real,
        huge: 1e300,
        absurd: submits > 0 ? real - 10_000_000 : real,
        'free-kontext': real + givenBack,
      };
      return json(res, 200, { code: 200, data: { balance: answers[mode] } });
    }
    if (req.url === '/api/generate/submit' && upstream.status === 200) {
      submits++;
      const taskId = (JSON.parse(text) as { data: { task_id: string } }).data.task_id;
      const task = (await sandboxTasks()).find((x) => x.task_id === taskId);
      if (mode === 'free-kontext' && task?.model === 'kontext-pro') givenBack += task.credits;
    }
    res.writeHead(upstream.status, { 'content-type': upstream.headers.get('content-type') ?? 'application/json' }).end(text);
  });
}, 60_000);
afterAll(async () => {
  await front?.close();
  await sb?.close();
  t.cleanup();
});

function env(book: string): Record<string, string> {
  return { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: front.base, GENBATCH_PRICE_BOOK: book };
}

function manifest(name: string, jobs: string[]): string {
  const file = join(t.dir, `${name}.yaml`);
  writeFileSync(file, ['jobs:', ...jobs].join('\n') + '\n');
  return file;
}

const KONTEXT = '  - {id: k1, model: kontext-pro, input: {prompt: a fox}}';
const DREAM = '  - {id: d1, model: dream-4, input: {prompt: owls, n: 2}}';

interface ProbeJson {
  measured: number;
  unmeasured: number;
  probes: Array<{ job: string; outcome: string; credits: number | null; why: string | null }>;
}

function recorded(book: string): Array<{ model: string; credits: number }> {
  if (!existsSync(book)) return [];
  const data = JSON.parse(readFileSync(book, 'utf8')) as { services: Record<string, Record<string, { model: string; credits: number }>> };
  return Object.values(data.services).flatMap((s) => Object.values(s).map((e) => ({ model: e.model, credits: e.credits })));
}

async function probe(name: string, m: Mode, jobs: string[]): Promise<{ code: number | null; out: ProbeJson; stderr: string; book: string; sent: number }> {
  const file = manifest(name, jobs);
  const book = join(t.dir, `${name}-book.json`);
  setMode(m);
  const r = await runCli(['prices', 'probe', file, '--yes', '--json', '--time-scale', SCALE], env(book));
  return { code: r.code, out: JSON.parse(r.stdout) as ProbeJson, stderr: r.stderr, book, sent: submits };
}

describe('genbatch prices probe refuses prices that cannot be true', () => {
  it('a balance that never moves: no class is recorded (not even as free), each says the balance never moved', async () => {
    const p = await probe('frozen', 'frozen', [KONTEXT, DREAM]);
    expect(p.sent).toBe(2); // both tasks were sent and charged by the sandbox; the balance answer never showed it
    expect(p.out.probes.map((x) => [x.job, x.outcome, x.credits])).toEqual([['k1', 'unmoved', null], ['d1', 'unmoved', null]]);
    for (const x of p.out.probes) expect(x.why).toContain('the balance never moved in this probe');
    expect(p.stderr).toMatch(/kontext-pro .*\(job k1\): not recorded: the balance never moved in this probe/);
    expect(recorded(p.book)).toEqual([]);
    expect(p.code).toBe(1);
  }, 120_000);

  it('a class whose task moved nothing is recorded free when another class moved the balance, and its jobs still need --yes', async () => {
    const p = await probe('free', 'free-kontext', [KONTEXT, DREAM]);
    expect(p.out.probes.map((x) => [x.job, x.outcome])).toEqual([['k1', 'measured'], ['d1', 'measured']]);
    const dream = (await sandboxTasks()).filter((x) => x.model === 'dream-4').at(-1)!.credits;
    expect(recorded(p.book).sort((a, b) => a.model.localeCompare(b.model))).toEqual([{ model: 'dream-4', credits: dream }, { model: 'kontext-pro', credits: 0 }]);
    expect(p.stderr).toMatch(/\(job k1\): 0 credits .*never taken as confirmed: its jobs still need --yes/);
    expect(p.code).toBe(0);

    // The learned 0 is not a price: estimate counts k1 unknown, a run without --yes is refused before anything is sent.
    const file = manifest('free-run', [KONTEXT, DREAM]);
    setMode('real');
    const est = JSON.parse((await runCli(['estimate', file, '--json'], env(p.book))).stdout) as { unknown_price_jobs: string[]; total_credits: number };
    expect(est.unknown_price_jobs).toEqual(['k1']);
    expect(est.total_credits).toBe(dream);
    const run = await runCli(['run', file, '--out', join(t.dir, 'free-out'), '--time-scale', SCALE], env(p.book));
    expect(run.code).toBe(3);
    expect(run.stderr).toContain('k1');
    expect(run.stderr).toContain('--yes');
    expect(submits).toBe(0);
    // Nor is it probed again: it is in the book.
    const again = await runCli(['prices', 'probe', file, '--yes', '--time-scale', SCALE], env(p.book));
    expect(again.stderr).toContain('nothing to probe');
  }, 120_000);

  it('a balance given as a numeric string is unusable: nothing is sent, nothing recorded', async () => {
    const p = await probe('string', 'string', [KONTEXT]);
    expect(p.sent).toBe(0);
    expect(p.out.probes).toEqual([expect.objectContaining({ job: 'k1', outcome: 'refused', credits: null })]);
    expect(p.out.probes[0]!.why).toMatch(/^the balance answer is a numeric string \("\d+(\.\d+)?"\), not a number: unusable for learning a price \(read before the task was sent\)$/);
    expect(recorded(p.book)).toEqual([]);
    expect(p.code).toBe(1);
  }, 60_000);

  it('a balance out of range is unusable: nothing is sent, nothing recorded', async () => {
    const p = await probe('huge', 'huge', [KONTEXT]);
    expect(p.sent).toBe(0);
    expect(p.out.probes[0]!.outcome).toBe('refused');
    expect(p.out.probes[0]!.why).toContain(`the balance answer 1e+300 is out of range (above ${MAX_PROBE_BALANCE} credits`);
    expect(recorded(p.book)).toEqual([]);
  }, 60_000);

  it('a charge above the balance before the task is refused with the reason', async () => {
    const p = await probe('absurd', 'absurd', [KONTEXT]);
    expect(p.sent).toBe(1);
    expect(p.out.probes[0]!.outcome).toBe('refused');
    expect(p.out.probes[0]!.why).toMatch(/^the charge of \d+(\.\d+)? credits exceeds the balance before the task \(\d+(\.\d+)?\)$/);
    expect(p.stderr).toMatch(/\(job k1\): not recorded: the charge of/);
    expect(recorded(p.book)).toEqual([]);
  }, 60_000);

  it('a charge that is not finite, negative, or above the balance is refused; a balance that is quoted, not finite, or out of range is unusable', () => {
    expect(chargeProblem(Number.NaN, 10)).toBe('the charge (NaN) is not a finite number');
    expect(chargeProblem(-3, 10)).toBe('the charge is negative: the balance rose by 3 credits during the probe');
    expect(chargeProblem(11, 10)).toBe('the charge of 11 credits exceeds the balance before the task (10)');
    expect(chargeProblem(10, 10)).toBeNull();
    expect(chargeProblem(0, 10)).toBeNull();
    expect(balanceProblem({ credits: 10, quoted: true }, false)).toContain('numeric string');
    expect(balanceProblem({ credits: Number.POSITIVE_INFINITY, quoted: false }, false)).toContain('not a finite number');
    expect(balanceProblem({ credits: -1, quoted: false }, false)).toContain('out of range (negative)');
    expect(balanceProblem({ credits: -1, quoted: false }, true)).toBeNull(); // after the task: judged as a charge
    expect(balanceProblem({ credits: MAX_PROBE_BALANCE + 1, quoted: false }, true)).toContain('out of range');
    expect(balanceProblem({ credits: 1234.5, quoted: false }, false)).toBeNull();
  });
});

describe('genbatch run --learn-prices refuses prices that cannot be true', () => {
  it('a balance that never moves: no price learned, the run goes on and says why', async () => {
    const file = manifest('learn-frozen', [KONTEXT, DREAM]);
    const book = join(t.dir, 'learn-frozen-book.json');
    setMode('frozen');
    const r = await runCli(['run', file, '--learn-prices', '--yes', '--out', join(t.dir, 'learn-frozen-out'), '--time-scale', SCALE], env(book));
    expect(r.code).toBe(0);
    expect(submits).toBe(2); // each job once: learning made no task of its own
    expect(r.stderr).toMatch(/no price learned from job k1 \(kontext-pro .*\): the balance never moved in this probe/);
    expect(r.stderr).toMatch(/no price learned from job d1 \(dream-4 .*\): the balance never moved in this probe/);
    expect(recorded(book)).toEqual([]);
  }, 120_000);

  it('a balance given as a numeric string: no price learned, the run goes on', async () => {
    const file = manifest('learn-string', [KONTEXT]);
    const book = join(t.dir, 'learn-string-book.json');
    setMode('string');
    const r = await runCli(['run', file, '--learn-prices', '--yes', '--out', join(t.dir, 'learn-string-out'), '--time-scale', SCALE], env(book));
    expect(r.code).toBe(0);
    expect(submits).toBe(1);
    expect(r.stderr).toMatch(/no price learned from job k1 \(kontext-pro .*\): the balance answer is a numeric string/);
    expect(recorded(book)).toEqual([]);
  }, 120_000);

  it('a balance answer that turns unusable after the job was sent: no price learned, and the job\'s own run ends before the rest of the run starts', async () => {
    const file = manifest('learn-string-after', [KONTEXT, '  - {id: k2, model: kontext-pro, input: {prompt: a hare}}']);
    const book = join(t.dir, 'learn-string-after-book.json');
    setMode('string-after');
    const r = await runCli(['run', file, '--learn-prices', '--yes', '--out', join(t.dir, 'learn-string-after-out'), '--time-scale', SCALE], env(book));
    expect(r.stderr).toMatch(/no price learned from job k1 \(kontext-pro .*\): the balance answer is a numeric string \("\d+(\.\d+)?"\), not a number: unusable for learning a price \(read after the task was sent\)/);
    expect(r.code).toBe(0);
    expect(submits).toBe(2); // k1 once (alone), k2 once: nothing sent twice
    expect(recorded(book)).toEqual([]);
  }, 120_000);

  it('a charge above the balance before the job: no price learned, says why', async () => {
    const file = manifest('learn-absurd', [KONTEXT]);
    const book = join(t.dir, 'learn-absurd-book.json');
    setMode('absurd');
    const r = await runCli(['run', file, '--learn-prices', '--yes', '--out', join(t.dir, 'learn-absurd-out'), '--time-scale', SCALE], env(book));
    expect(r.stderr).toMatch(/no price learned from job k1 \(kontext-pro .*\): the charge of \d+(\.\d+)? credits exceeds the balance before the task/);
    expect(recorded(book)).toEqual([]);
  }, 120_000);
});
