import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';
import { keyBalance } from './helpers/balance.js';

/**
 * --max-credits in a run resumed after a SIGKILL, with tasks of the killed run still at the service that fail (and
 * are refunded): a class's first job goes alone so that its charge is its price, but the tasks the run resumed were
 * not counted as in flight, so their refunds during its measure were read as its charge. Here dream-4 n=15 is
 * charged 60 a task; the killed run left 5 tasks that fail. The resumed run's first submit is slow (2 s) and the
 * sandbox's clock is moved on meanwhile, so the resumed tasks fail and are refunded while it is on the way: the class
 * was learned at 0 and every job was sent (a cap of 400 charged 2400). The bound is the cap plus one task.
 */

const KEY = 'sk-cap-resumed-0123456789';
const START = 100_000;
const SCALE = '0.2';
const TASK_CHARGE = 60;

let sb: Sandbox;
const tmp = tempDir('genbatch-cap-resumed-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: START }, timeScale: Number(SCALE), seed: 11, slowMs: 2000 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  tmp.cleanup();
});

const balance = (): Promise<number> => keyBalance(sb.url, KEY);

/** `genbatch run ... --json`; `onLine` sees each stdout line (and may kill the child). */
function run(args: string[], env: Record<string, string>, onLine: (line: string, kill: () => void) => void): Promise<number | null> {
  return new Promise((resolve) => {
    const child = spawnCli([...args, '--json'], env);
    let text = '';
    child.stdout!.on('data', (d: Buffer) => {
      text += d.toString();
      const lines = text.split('\n');
      text = lines.pop() ?? '';
      for (const l of lines) onLine(l, () => child.kill('SIGKILL'));
    });
    child.stderr!.resume();
    child.on('exit', (code) => resolve(code));
  });
}

describe('--max-credits after a SIGKILL, with the resumed tasks refunded', () => {
  it("a resumed task's refund is not read as the charge of a class's first job: charged at most the cap plus one task", async () => {
    const lines = ['jobs:'];
    for (let i = 0; i < 5; i++) lines.push(`  - id: f-${i}`, '    model: dream-4', '    input:', `      prompt: "A harbour number ${i} fail-output"`, '      n: 15');
    for (let i = 0; i < 40; i++) lines.push(`  - id: d-${i}`, '    model: dream-4', '    input:', `      prompt: "A lighthouse number ${i}"`, '      n: 15');
    const manifest = join(tmp.dir, 'dream.yaml');
    writeFileSync(manifest, lines.join('\n') + '\n');
    const out = join(tmp.dir, 'out');
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sb.url, GENBATCH_PRICE_BOOK: join(tmp.dir, 'book.json') };
    const args = ['run', manifest, '--out', out, '--time-scale', SCALE, '--concurrency', '8', '--yes'];

    // The first run sends the 5 jobs that will fail, and is killed once all of them are at the service.
    let submitted = 0;
    const first = await run([...args, '--only', 'f-*'], env, (l, kill) => {
      if (l.includes('"to":"submitted"') && ++submitted === 5) kill();
    });
    expect(first).toBe(null);

    // The resumed run's first submit takes 2 s; meanwhile every resumed task ends (failed, refunded). A run that
    // counts the resumed tasks as in flight (the fix) holds its first submit until they end instead (a "wait" for
    // the jobs in flight): the clock is then moved on at that wait, so that they end in moments rather than at the
    // time scale; the first submit then still comes after their refunds, as it must.
    sb.script('submit', ['slow']);
    let moved = false;
    // Once the run's own first task is at the service (its submit answered: with the fix the resumed tasks ended before
    // it was sent; without it, their refunds were taken during the submit), the sandbox's clock runs fast, so that
    // task and the jobs sent after the class's price is learned end in moments rather than at the time scale (the
    // charges were taken at their submits already).
    let fast: NodeJS.Timeout | undefined;
    await run([...args, '--max-credits', '400'], env, (l) => {
      if (!moved && (l.includes('"from":"pending","to":"submitting"') || (l.includes('"type":"wait"') && l.includes('jobs in flight to end before')))) {
        moved = true;
        setTimeout(() => sb.clock.advance(600), 300);
      }
      if (!fast && (l.includes('"from":"submitting","to":"submitted"') || l.includes('"type":"cap-price"'))) fast = setInterval(() => sb.clock.advance(600), 100);
    });
    clearInterval(fast);
    const spent = START - (await balance());
    expect(spent).toBeLessThanOrEqual(400 + TASK_CHARGE);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.filter((j) => j.id.startsWith('f-') && j.state === 'failed').length).toBe(5);
    expect(jobs.filter((j) => j.state === 'pending').length).toBeGreaterThan(0);
  }, 180_000);
});
