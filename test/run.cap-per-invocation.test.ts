import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient } from '../src/client/index.js';
import { EXIT } from '../src/errors.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { BIN, cliEnv, ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A cap per invocation (issue #26 item 1) and the exit-code table (item 2), from real runs against the sandbox:
 * a growing manifest under --max-credits-per-invocation sends only the new jobs that fit, in manifest order, night
 * after night; measured by the balance (a sandbox that charges 3 x the published price) the charge stays under the
 * cap plus one task; the manifest's budget_per_invocation does the same; `run --json` ends with the summary object;
 * the printed follow-up command, run as printed, goes on; SIGTERM exits 143. Each test has its own key.
 */

const SCALE = '0.005';
const START = 100_000;
const keys = { grow: 'sk-night-grow-0123456789', dear: 'sk-night-dear-0123456789', yaml: 'sk-night-yaml-0123456789', term: 'sk-night-term-0123456789' };
let sb: Sandbox;
let dear: Sandbox;
const tmp = tempDir('genbatch-night-cap-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [keys.grow]: START, [keys.yaml]: START, [keys.term]: START }, timeScale: Number(SCALE), seed: 26 });
  dear = await startSandbox({ port: 0, keys: { [keys.dear]: START }, timeScale: Number(SCALE), seed: 27, priceFactor: 3 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  await dear?.close();
  tmp.cleanup();
});

async function balance(s: Sandbox, key: string): Promise<number> {
  const client = new ServiceClient({ baseUrl: s.url, apiKey: key });
  try {
    return await client.balance();
  } finally {
    await client.close();
  }
}

function run(s: Sandbox, key: string, manifest: string, out: string, extra: string[]) {
  return runCli(['run', manifest, '--base-url', s.url, '--out', out, '--time-scale', SCALE, ...extra], { GENBATCH_API_KEY: key, GENBATCH_PRICE_BOOK: join(tmp.dir, `book-${key}.json`) });
}

interface Summary {
  type: string;
  outcome: string;
  exit_code: number;
  counts: Record<string, number> | null;
  not_done: Record<string, { count: number; ids: string[]; more?: number }> | null;
  charged: number | null;
  charged_now: number | null;
  caps: { max_credits: { credits: number; name: string } | null; per_invocation: { credits: number; name: string } | null } | null;
  error: string | null;
}
const lastLine = (stdout: string): Summary => JSON.parse(stdout.trim().split('\n').pop()!) as Summary;
const ids = (prefix: string, from: number, to: number) => Array.from({ length: to - from }, (_, i) => `${prefix}-${String(from + i).padStart(4, '0')}`);

const measured: string[] = [];
afterAll(() => console.log(`per-invocation cap, charges measured:\n${measured.join('\n')}`));

describe('--max-credits-per-invocation', () => {
  it('a growing manifest: each night sends only the new jobs that fit the per-invocation cap, in manifest order (done jobs do not count), exit 5 with the rest pending and the reason, then 0', async () => {
    const manifest = join(tmp.dir, 'grow.yaml');
    const out = join(tmp.dir, 'out-grow');
    const cap = ['--max-credits-per-invocation', '30', '--json'];
    // Night 1: 10 jobs, 20 credits: all fit.
    imageManifest(manifest, 10, 'img');
    let b = await balance(sb, keys.grow);
    const n1 = await run(sb, keys.grow, manifest, out, cap);
    expect(n1.code, n1.stderr).toBe(EXIT.ok);
    const c1 = b - (await balance(sb, keys.grow));
    // Night 2: the manifest grows to 30 jobs (60 credits in all, 40 of new work): the 15 new jobs 30 credits buy are sent.
    imageManifest(manifest, 30, 'img');
    b = await balance(sb, keys.grow);
    const t0 = sb.stats().tasks_total;
    const n2 = await run(sb, keys.grow, manifest, out, cap);
    expect(n2.code, n2.stderr).toBe(EXIT.capReached);
    const c2 = b - (await balance(sb, keys.grow));
    expect(sb.stats().tasks_total - t0).toBe(15);
    expect(c2).toBeLessThanOrEqual(30 + 2);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.filter((j) => j.state === 'done').map((j) => j.id)).toEqual(ids('img', 0, 25));
    expect(n2.stdout).toContain('"type":"held","over":["the known estimate of 40 credits for the jobs of this invocation exceeds --max-credits-per-invocation 30"],"sent":15,"sent_credits":30');
    const s2 = lastLine(n2.stdout);
    expect(s2).toMatchObject({
      type: 'summary',
      outcome: 'cap-reached',
      exit_code: EXIT.capReached,
      counts: { done: 25, pending: 5 },
      not_done: { 'pending: over --max-credits-per-invocation 30': { count: 5, ids: ids('img', 25, 30) } },
      charged: c1 + c2,
      charged_now: c2,
      caps: { max_credits: null, per_invocation: { credits: 30, name: '--max-credits-per-invocation 30' } },
      error: null,
    });
    // Night 3: the same command sends the 5 left.
    b = await balance(sb, keys.grow);
    const n3 = await run(sb, keys.grow, manifest, out, cap);
    expect(n3.code, n3.stderr).toBe(EXIT.ok);
    const c3 = b - (await balance(sb, keys.grow));
    expect(lastLine(n3.stdout)).toMatchObject({ type: 'summary', outcome: 'done', exit_code: EXIT.ok, counts: { done: 30, pending: 0 }, not_done: {}, charged_now: c3 });
    measured.push(`growing manifest, --max-credits-per-invocation 30: nights charged ${c1}, ${c2}, ${c3} (exit 0, 5, 0)`);
  }, 120_000);

  it('measured by the balance: against a sandbox that charges 3 x the published price, the invocation is charged at most the cap plus one task (exit 5), the next invocation as much again', async () => {
    const manifest = imageManifest(join(tmp.dir, 'dear.yaml'), 20, 'dear');
    const out = join(tmp.dir, 'out-dear');
    for (const night of [1, 2]) {
      const b = await balance(dear, keys.dear);
      const r = await run(dear, keys.dear, manifest, out, ['--max-credits-per-invocation', '30']);
      expect(r.code, r.stderr + r.stdout).toBe(EXIT.capReached);
      const charged = b - (await balance(dear, keys.dear));
      measured.push(`x3 prices, --max-credits-per-invocation 30, night ${night}: charged ${charged}`);
      expect(charged).toBeGreaterThan(0);
      expect(charged).toBeLessThanOrEqual(30 + 6);
      expect(r.stdout).toContain('stopped at --max-credits-per-invocation 30');
      // The follow-up command, with the run's own flags.
      expect(r.stdout).toMatch(/\ngenbatch: \d+ job\(s\) left pending \(the credit cap stopped the sending\): genbatch run \S+ --out \S+ --base-url \S+ --max-credits-per-invocation 30 --time-scale 0\.005 sends what fits the next time\n/);
    }
    // 2 x (at most 36 / 6) of the 20 jobs: the run's total is not what the per-invocation cap bounds.
    const done = readJobs(join(out, 'state.db')).filter((j) => j.state === 'done').length;
    expect(done).toBeGreaterThan(6);
    expect(done).toBeLessThanOrEqual(12);
  }, 120_000);

  it("the manifest's budget_per_invocation does the same, and the printed follow-up command, run as printed, sends the rest", async () => {
    const manifest = imageManifest(join(tmp.dir, 'yaml.yaml'), 6, 'y');
    writeFileSync(manifest, `budget_per_invocation: 5\n${(await import('node:fs')).readFileSync(manifest, 'utf8')}`);
    const out = join(tmp.dir, 'out yaml');
    const r = await run(sb, keys.yaml, manifest, out, ['--max-credits', '100']);
    expect(r.code, r.stderr).toBe(EXIT.capReached);
    expect(readJobs(join(out, 'state.db')).filter((j) => j.state === 'done').map((j) => j.id)).toEqual(['y-0000', 'y-0001']);
    const line = r.stdout.split('\n').find((l) => l.startsWith('genbatch: 4 job(s) left pending (over the manifest budget_per_invocation of 5): '));
    expect(line, r.stdout).toBeDefined();
    const command = line!.replace(/^.*?: (genbatch run .*) sends what fits the next time$/, '$1');
    // The run's own flags: where it is, how it runs, its caps.
    expect(command).toBe(`genbatch run ${manifest} --out '${out}' --base-url ${sb.url} --max-credits 100 --time-scale ${SCALE}`);
    for (let night = 0; night < 2; night++) {
      // Through a shell, as pasted (not spawnSync: the sandbox answers from this process's event loop).
      const child = spawn('sh', ['-c', command.replace(/^genbatch /, `'${process.execPath}' '${BIN}' `)], { env: cliEnv({ GENBATCH_API_KEY: keys.yaml }), stdio: ['ignore', 'ignore', 'pipe'] });
      let stderr = '';
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect(status, stderr).toBe(night === 0 ? EXIT.capReached : EXIT.ok);
    }
    expect(readJobs(join(out, 'state.db')).every((j) => j.state === 'done')).toBe(true);
  }, 120_000);
});

describe('a PostgreSQL state', () => {
  it('refuses the per-invocation cap, from the flag or the manifest, as a usage error before connecting (exit 2, nothing sent)', async () => {
    const manifest = imageManifest(join(tmp.dir, 'pg.yaml'), 2, 'pg');
    const t0 = sb.stats().tasks_total;
    // Nothing listens on port 1: the refusal comes before any connection.
    const state = ['--state', 'postgres://u:secret@127.0.0.1:1/db'];
    const flag = await run(sb, keys.yaml, manifest, join(tmp.dir, 'out-pg'), [...state, '--max-credits-per-invocation', '5']);
    expect(flag.code).toBe(EXIT.usage);
    expect(flag.stderr).toContain('--max-credits-per-invocation with a PostgreSQL state');
    writeFileSync(manifest, `budget_per_invocation: 5\n${(await import('node:fs')).readFileSync(manifest, 'utf8')}`);
    const key = await run(sb, keys.yaml, manifest, join(tmp.dir, 'out-pg'), state);
    expect(key.code).toBe(EXIT.usage);
    expect(key.stderr).toContain('budget_per_invocation');
    expect(key.stderr).toContain('with a PostgreSQL state is not built yet');
    expect(sb.stats().tasks_total).toBe(t0);
  }, 60_000);
});

describe('exit codes of the table from real runs', () => {
  it('SIGTERM stops the run cleanly with exit 143 (130 stays SIGINT), and the --json summary line says interrupted', async () => {
    const manifest = imageManifest(join(tmp.dir, 'term.yaml'), 60, 'term');
    const out = join(tmp.dir, 'out-term');
    const child = spawnCli(['run', manifest, '--base-url', sb.url, '--out', out, '--time-scale', SCALE, '--concurrency', '2', '--json'], { GENBATCH_API_KEY: keys.term });
    let stdout = '';
    let sent = false;
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!sent && stdout.includes('"to":"submitted"')) {
        sent = true;
        child.kill('SIGTERM');
      }
    });
    child.stderr!.resume();
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code).toBe(EXIT.sigterm);
    expect(lastLine(stdout)).toMatchObject({ type: 'summary', outcome: 'interrupted', exit_code: EXIT.sigterm });
    expect(lastLine(stdout).not_done!['pending: interrupted']!.count).toBeGreaterThan(0);
  }, 120_000);

  it('a refusal (unknown prices without --yes) still ends --json with the summary line: exit 3, the error, no counts', async () => {
    const manifest = join(tmp.dir, 'unk.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: castle\n    model: kontext-pro\n    input: { prompt: "A castle" }\n');
    const r = await run(sb, keys.yaml, manifest, join(tmp.dir, 'out-unk'), ['--json']);
    expect(r.code).toBe(EXIT.budget);
    const s = lastLine(r.stdout);
    expect(s).toMatchObject({ type: 'summary', outcome: 'refused', exit_code: EXIT.budget, counts: null, not_done: null });
    expect(s.error).toContain('no known price');
  }, 60_000);
});
