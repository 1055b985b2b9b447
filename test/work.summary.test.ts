import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { imageManifest, runCli } from './helpers/cli.js';
import { pgSandbox } from './helpers/pg-fixture.js';

/**
 * The end of a run on PostgreSQL names the jobs that need a decision, as a run on SQLite does: every submit
 * is answered by a dropped connection after the task was made (the sandbox's `drop-after`), so each job ends
 * uncertain, and the summary lists their ids (it once said ": , and 4 more", the ids read from nowhere).
 */

const KEY = 'sk-work-summary-0123456789abcdef';
const JOBS = 4;
const f = pgSandbox({ prefix: 'genbatch-work-summary-', key: KEY, sandbox: { faults: 'submit:drop-after=1', seed: 7 } });
let manifest: string;

beforeAll(() => {
  manifest = imageManifest(join(f.dir, 'owls.yaml'), JOBS, 'owl');
});

describe('the summary of a run on PostgreSQL', () => {
  it('lists the uncertain jobs by id (text and --json) and exits 4', async () => {
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_STATE: f.db.url };
    const out = join(f.dir, 'out');
    const text = await runCli(['run', manifest, '--base-url', f.sandbox.url, '--out', out, '--time-scale', '0.01', '--yes'], env);
    expect(text.code, text.stderr).toBe(4);
    const ids = (await f.pool.query<{ id: string }>(`SELECT id FROM jobs WHERE state = 'uncertain' ORDER BY seq`)).rows.map((r) => r.id);
    expect(ids).toHaveLength(JOBS);
    expect(text.stdout).toContain(`uncertain (their submit's outcome is unknown; a task may exist): ${ids.join(', ')}\n`);

    // A worker joining the finished run says the same, in its JSON summary too.
    const json = await runCli(['work', '--until-empty', '--base-url', f.sandbox.url, '--time-scale', '0.01', '--json'], env);
    expect(json.code, json.stderr).toBe(4);
    const finish = json.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; uncertain_ids?: string[] })
      .find((e) => e.type === 'finish');
    expect(finish?.uncertain_ids).toEqual(ids);
  });

  it('a worker whose callback URL the service would refuse (--listen alone, a service not on this machine) exits 2 before it works', async () => {
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_STATE: f.db.url };
    const workers = async () => (await f.pool.query('SELECT count(*)::int AS n FROM workers')).rows[0] as { n: number };
    const before = await workers();
    const r = await runCli(['work', '--until-empty', '--base-url', 'https://api.example.com', '--listen', '127.0.0.1:0'], env);
    expect(r.code, r.stdout + r.stderr).toBe(2);
    expect(r.stderr).toContain('--listen 127.0.0.1:0 without --callback-url gives the service http://127.0.0.1:0/ to call back');
    expect(await workers()).toEqual(before);
  });
});
