import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { pgSandbox } from './helpers/pg-fixture.js';

/**
 * The end-of-run lines on a PostgreSQL state: the failed jobs by id (the finish event of a worker had no ids,
 * so the line read `failed: , and 2 more`), and a command that sends them again that exists (`work` has no
 * --redo: it suggested `genbatch work ... --redo failed`, an unknown option).
 */

const KEY = 'sk-pg-failed-ids-0123456789abcdef';
const f = pgSandbox({ prefix: 'genbatch-pg-failed-', key: KEY });

describe('the end of a run on PostgreSQL with failed jobs', () => {
  it('run and work list the failed ids; work suggests genbatch run --redo failed, which sends them again', async () => {
    // Jobs whose prompt holds one of the sandbox's fail words fail there (a failure a retry may fix).
    const ids = ['fine-0', 'bad-0', 'bad-1'];
    const manifest = join(f.dir, 'm.yaml');
    const lines = ['jobs:'];
    for (const id of ids) lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "${id.startsWith('bad') ? 'a fail-output picture' : 'a quiet harbour'} for ${id}"`);
    writeFileSync(manifest, `${lines.join('\n')}\n`);
    const out = join(f.dir, 'out');
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: f.sandbox.url, GENBATCH_STATE: f.db.url };

    const r = await runCli(['run', manifest, '--out', out, '--time-scale', '0.01'], env);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stdout).toContain('genbatch: failed: bad-0, bad-1\n');
    // The follow-up repeats the run's own flags (--time-scale here; the state came from GENBATCH_STATE).
    expect(r.stdout).toContain(`genbatch: to send the failed jobs again: genbatch run ${manifest} --out ${out} --time-scale 0.01 --redo failed\n`);

    const w = await runCli(['work', '--until-empty', '--time-scale', '0.01'], { GENBATCH_API_KEY: KEY, GENBATCH_STATE: f.db.url });
    expect(w.code, w.stderr).toBe(1);
    expect(w.stdout).toContain('genbatch: failed: bad-0, bad-1\n');
    const prefix = 'genbatch: to send the failed jobs again: ';
    const line = w.stdout.split('\n').find((l) => l.startsWith(prefix));
    expect(line).toBe(`${prefix}genbatch run ${manifest} --out ${out} --base-url ${f.sandbox.url} --time-scale 0.01 --redo failed`);

    // The command it suggests exists, and sends the two failed jobs again.
    const tasks = (await f.sandbox.stats()).tasks_total;
    const words = line!.slice(prefix.length).split(' ');
    expect(words[0]).toBe('genbatch');
    const again = await runCli([...words.slice(1), '--time-scale', '0.01'], env);
    expect(again.stderr).not.toMatch(/unknown option/);
    expect(again.stdout).toContain('genbatch: --redo failed: 2 job(s) sent again\n');
    expect((await f.sandbox.stats()).tasks_total - tasks).toBe(2);
  }, 120_000);
});
