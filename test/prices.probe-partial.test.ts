import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { admin } from './helpers/admin.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * A probe whose task delivers fewer outputs than asked: the service charges the whole task when it is sent and
 * refunds the missing outputs at its end. The price learned is the charge when sent (what the next task of the
 * class is charged, and what run's credit cap counts), not the charge less the refund; before, `prices probe`
 * reported such a task as "another client is using the key" and learned nothing. With --partial-rate 1 every
 * task of n > 1 delivers fewer than asked.
 */
const SCALE = '0.01';
const KEY = 'sk-probe-partial-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-probe-partial-');

interface TaskRow {
  task_id: string;
  model: string;
  credits: number;
}

async function sandboxTasks(): Promise<TaskRow[]> {
  return ((await (await fetch(`${sb.url}/__sandbox/tasks`, admin(sb))).json()) as { tasks: TaskRow[] }).tasks;
}

async function balance(): Promise<number> {
  const r = await fetch(`${sb.url}/api/user/balance`, { headers: { authorization: `Bearer ${KEY}` } });
  return ((await r.json()) as { data: { balance: number } }).data.balance;
}

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 5, partialRate: 1 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

const env = (book: string) => ({ GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sb.url, GENBATCH_PRICE_BOOK: book });

function recorded(book: string): Array<[string, number]> {
  const data = JSON.parse(readFileSync(book, 'utf8')) as { services: Record<string, Record<string, { model: string; credits: number }>> };
  return Object.values(data.services).flatMap((s) => Object.values(s).map((e): [string, number] => [e.model, e.credits]));
}

describe('a probe task partly refunded at its end', () => {
  it('prices probe records the charge when the task was sent and reports the refund apart', async () => {
    const manifest = join(t.dir, 'probe.yaml');
    writeFileSync(manifest, 'jobs:\n  - {id: f1, model: frame-2-pro, input: {prompt: a lighthouse, n: 4}}\n');
    const book = join(t.dir, 'probe-book.json');
    const start = await balance();
    const r = await runCli(['prices', 'probe', manifest, '--yes', '--json', '--time-scale', SCALE], env(book));
    expect(r.code, r.stderr).toBe(0);
    const [task] = await sandboxTasks();
    const net = start - (await balance());
    expect(net).toBeLessThan(task!.credits); // the task was refunded in part
    const out = JSON.parse(r.stdout) as { probes: Array<{ outcome: string; credits: number; refunded: number }> };
    expect(out.probes).toEqual([expect.objectContaining({ outcome: 'measured', credits: task!.credits, refunded: task!.credits - net })]);
    expect(recorded(book)).toEqual([['frame-2-pro', task!.credits]]);
    expect(r.stderr).toContain(`refunded at its end for outputs it did not deliver`);
  }, 60_000);

  it('run --learn-prices keeps the charge when sent too', async () => {
    const manifest = join(t.dir, 'learn.yaml');
    writeFileSync(manifest, 'jobs:\n  - {id: z1, model: zed-image, input: {prompt: a harbour, n: 3}}\n  - {id: z2, model: zed-image, input: {prompt: a quay, n: 3}}\n');
    const book = join(t.dir, 'learn-book.json');
    const before = new Set((await sandboxTasks()).map((x) => x.task_id));
    const r = await runCli(['run', manifest, '--learn-prices', '--yes', '--out', join(t.dir, 'learn-out'), '--time-scale', SCALE], env(book));
    expect(r.code, r.stderr).toBe(0);
    const tasks = (await sandboxTasks()).filter((x) => !before.has(x.task_id));
    expect(tasks).toHaveLength(2);
    expect(recorded(book)).toEqual([['zed-image', tasks[0]!.credits]]);
  }, 60_000);
});
