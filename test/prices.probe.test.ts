import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkSubmit, listModels } from '../src/models/index.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { admin } from './helpers/admin.js';

/**
 * `genbatch prices probe` against the sandbox, which charges a price for every model: each price it
 * learns equals what the sandbox charged for that task (per image, per request, music, chat), a
 * failed task teaches nothing, another client spending on the same key never makes a wrong price,
 * and estimate then prices every job, equal to what the run is charged.
 */
// Each probe runs its task alone, one class after another, so the task durations add up: the sandbox's
// time runs 200 times faster than the service's (a video task takes 0.45 to 1.5 s). The test with another
// client spending on the key has a sandbox of its own at 0.02: its tasks must run long enough for the
// other client's charges to fall inside them.
const SCALE = '0.005';
const BUSY_SCALE = '0.02';
const KEY = 'sk-prices-probe-0123456789';
let sb: Sandbox;
let busy: Sandbox;
const t = tempDir('genbatch-probe-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 12 });
  busy = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(BUSY_SCALE), seed: 12 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  await busy?.close();
  t.cleanup();
});

interface TaskRow {
  task_id: string;
  model: string;
  credits: number;
}

async function sandboxTasks(s: Sandbox = sb): Promise<TaskRow[]> {
  return ((await (await fetch(`${s.url}/__sandbox/tasks`, admin(s))).json()) as { tasks: TaskRow[] }).tasks;
}

/** One prompt-only job of every model family whose price the service does not publish. */
function familyJobs(): string[] {
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const m of listModels()) {
    if (seen.has(m.family)) continue;
    const input = m.family === 'music' ? { prompt: 'a calm tune', custom_mode: false, instrumental: true } : { prompt: 'a lighthouse at dusk' };
    if (m.price(input).credits !== null || checkSubmit({ model: m.id, input }).issues.length > 0) continue;
    seen.add(m.family);
    lines.push(`  - {id: fam-${m.family.replace(/[^\w-]/g, '-')}, model: ${m.id}, input: ${JSON.stringify(input)}}`);
  }
  return lines;
}

function env(book: string, s: Sandbox = sb): Record<string, string> {
  return { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: s.url, GENBATCH_PRICE_BOOK: book };
}

interface ProbeJson {
  measured: number;
  unmeasured: number;
  probes: Array<{ class: string; job: string; outcome: string; credits: number | null; why: string | null; task_id: string | null }>;
}

describe('genbatch prices probe against the sandbox', () => {
  it('learns the price of every model family (per image, per request, music, lyrics, chat) equal to what the sandbox charged; a failed task is not recorded', async () => {
    const families = familyJobs();
    expect(families.length).toBeGreaterThanOrEqual(10);
    const manifest = join(t.dir, 'families.yaml');
    writeFileSync(
      manifest,
      [
        'jobs:',
        ...families,
        '  - {id: owls-x2, model: dream-4, input: {prompt: two owls, n: 2}}',
        '  - {id: lyrics, model: generate-lyrics, input: {prompt: a sea shanty}}',
        '  - {id: talk, model: vendorb/verse-4.5-fast, protocol: messages, input: {messages: [{role: user, content: say hi}], max_tokens: 32}}',
        // The sandbox fails tasks whose input holds a policy word (then refunds them): a class of its own.
        '  - {id: refused, model: kontext-max, input: {prompt: unsafe-output here, size: "16:9"}}',
      ].join('\n') + '\n',
    );
    const book = join(t.dir, 'book.json');
    const before = new Set((await sandboxTasks()).map((x) => x.task_id));

    const dry = await runCli(['prices', 'probe', manifest, '--time-scale', SCALE], env(book));
    expect(dry.code).toBe(3);
    expect(dry.stderr).toContain('nothing was sent: add --yes');
    expect((await sandboxTasks()).length).toBe(before.size);

    const r = await runCli(['prices', 'probe', manifest, '--yes', '--json', '--time-scale', SCALE], env(book));
    const out = JSON.parse(r.stdout) as ProbeJson;
    const tasks = new Map((await sandboxTasks()).filter((x) => !before.has(x.task_id)).map((x) => [x.task_id, x]));
    const measured = out.probes.filter((p) => p.outcome === 'measured');
    // Every probe that sent a task: the price learned is exactly the sandbox's charge for it.
    for (const p of measured.filter((x) => x.task_id !== null)) expect(p.credits, p.job).toBe(tasks.get(p.task_id!)!.credits);
    expect(measured.find((p) => p.job === 'owls-x2')!.credits).toBe(2 * measured.find((p) => p.job === 'fam-dream-4')!.credits!);
    expect(measured.find((p) => p.job === 'talk')!.credits).toBeGreaterThan(0);
    const refused = out.probes.find((p) => p.job === 'refused')!;
    expect(refused.outcome).toBe('failed');
    expect(refused.why).toContain('failed');
    expect(out.unmeasured).toBe(1);
    expect(r.code).toBe(1);
    // One task per class sent, nothing else; the book never holds the key.
    expect(tasks.size).toBe(out.probes.filter((p) => p.task_id !== null).length);
    const text = readFileSync(book, 'utf8');
    expect(text).not.toContain(KEY);
    expect(JSON.parse(text).genbatch_price_book).toBe(1);

    const list = await runCli(['prices', 'list'], env(book));
    expect(list.stdout).toContain('dream-4 (text-to-image, n=2');
    expect(list.stdout).toContain('observed 1x, last ');

    // Estimate: every job but the refused one priced, from the observed prices, and so is the run.
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace(/ {2}- \{id: refused.*\n/, ''));
    const est = JSON.parse((await runCli(['estimate', manifest, '--json'], env(book))).stdout) as { total_credits: number; unknown_price_jobs: string[]; observed_credits: number; jobs: Array<{ source: string }> };
    expect(est.unknown_price_jobs).toEqual([]);
    expect(est.observed_credits).toBe(est.total_credits);
    expect(new Set(est.jobs.map((j) => j.source))).toEqual(new Set(['observed']));
    const run = await runCli(['run', manifest, '--out', join(t.dir, 'out'), '--time-scale', SCALE], env(book));
    expect(run.code).toBe(0);
    const charged = (JSON.parse(readFileSync(join(t.dir, 'out', 'report.json'), 'utf8')) as { summary: { credits: { charged: number } } }).summary.credits.charged;
    expect(Math.abs(charged - est.total_credits)).toBeLessThanOrEqual(est.total_credits * 0.01);
  }, 240_000);

  it('while another client spends on the same key, records no wrong price (each probe is measured right or reported unreliable)', async () => {
    const manifest = join(t.dir, 'busy.yaml');
    writeFileSync(
      manifest,
      ['jobs:', '  - {id: a, model: imagine-image, input: {prompt: a busy day}}', '  - {id: b, model: zed-image, input: {prompt: a busy night}}', '  - {id: c, model: frame-2-pro, input: {prompt: a busy street}}'].join('\n') + '\n',
    );
    const book = join(t.dir, 'busy-book.json');
    let stop = false;
    let spent = 0;
    const other = (async () => {
      // Another client of the same key: a cheap task every 120 ms for as long as the probe runs (bounded).
      for (let i = 0; i < 2000 && !stop; i++) {
        const res = await fetch(`${busy.url}/api/generate/submit`, { method: 'POST', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'kontext-pro', input: { prompt: `other ${i}` } }) });
        await res.arrayBuffer();
        spent++;
        await new Promise((r) => setTimeout(r, 120));
      }
    })();
    const before = new Set((await sandboxTasks(busy)).map((x) => x.task_id));
    const r = await runCli(['prices', 'probe', manifest, '--yes', '--json', '--time-scale', BUSY_SCALE], env(book, busy));
    stop = true;
    await other;
    expect(spent).toBeGreaterThan(3);
    const out = JSON.parse(r.stdout) as ProbeJson;
    const tasks = new Map((await sandboxTasks(busy)).filter((x) => !before.has(x.task_id)).map((x) => [x.task_id, x]));
    for (const p of out.probes) {
      if (p.outcome === 'measured') expect(p.credits, p.job).toBe(tasks.get(p.task_id!)!.credits);
      else expect(p.why).toMatch(/another client|kept moving/);
    }
    expect(out.probes.filter((p) => p.outcome === 'unreliable').length).toBeGreaterThan(0);
    const book2 = existsSync(book) ? (JSON.parse(readFileSync(book, 'utf8')) as { services: Record<string, Record<string, { credits: number }>> }) : { services: {} };
    const recorded = Object.values(book2.services).flatMap((s) => Object.values(s).map((e) => e.credits));
    expect(recorded.length).toBe(out.measured);
  }, 240_000);
});

describe('genbatch prices probe --max-credits', () => {
  it('stopped by --max-credits with classes not probed exits 5, the cap code of run', async () => {
    const manifest = join(t.dir, 'capped.yaml');
    writeFileSync(manifest, ['jobs:', ...familyJobs()].join('\n') + '\n');
    const before = (await sandboxTasks()).length;
    const r = await runCli(['prices', 'probe', manifest, '--yes', '--max-credits', '0', '--time-scale', SCALE], env(join(t.dir, 'book-capped.json')));
    expect(r.code, r.stderr).toBe(5);
    expect(r.stderr).toMatch(/stopped: 0 credits spent reaches --max-credits 0; \d+ class\(es\) not probed/);
    expect((await sandboxTasks()).length).toBe(before);
  }, 60_000);
});

describe('genbatch run --learn-prices', () => {
  it('sends one job of each unknown class alone first and keeps its charge: no extra task, the prices equal the sandbox charges, estimate then knows them', async () => {
    const manifest = join(t.dir, 'learn.yaml');
    writeFileSync(
      manifest,
      [
        'jobs:',
        '  - {id: k1, model: kontext-pro, input: {prompt: a fox}}',
        '  - {id: k2, model: kontext-pro, input: {prompt: a hare}}',
        '  - {id: d1, model: dream-4, input: {prompt: owls, n: 2}}',
        '  - {id: a1, model: alpha-image-2, input: {prompt: a priced one}}',
      ].join('\n') + '\n',
    );
    const book = join(t.dir, 'learn-book.json');
    const before = new Set((await sandboxTasks()).map((x) => x.task_id));
    const r = await runCli(['run', manifest, '--learn-prices', '--yes', '--out', join(t.dir, 'learn-out'), '--time-scale', SCALE], env(book));
    expect(r.code).toBe(0);
    const tasks = (await sandboxTasks()).filter((x) => !before.has(x.task_id));
    expect(tasks).toHaveLength(4); // one task per job: learning made none of its own
    expect(r.stderr).toMatch(/learned the price of kontext-pro \(text-to-image\) from job k1: \d+ credits/);
    const entries = Object.values((JSON.parse(readFileSync(book, 'utf8')) as { services: Record<string, Record<string, { model: string; credits: number }>> }).services).flatMap((s) => Object.values(s));
    const charge = (model: string) => tasks.find((x) => x.model === model)!.credits;
    expect(entries.map((e) => [e.model, e.credits]).sort()).toEqual([['dream-4', charge('dream-4')], ['kontext-pro', charge('kontext-pro')]].sort());
    const est = JSON.parse((await runCli(['estimate', manifest, '--json'], env(book))).stdout) as { unknown_price_jobs: string[] };
    expect(est.unknown_price_jobs).toEqual([]);
  }, 120_000);
});
