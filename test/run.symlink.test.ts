import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A job folder replaced by a symbolic link (out/cat -> ../victim) is never followed: genbatch
 * creates, writes and moves nothing outside the output folder, and says which path (exit 74).
 */
const KEY = 'sk-run-symlink-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-symlink-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.005, seed: 3 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

const env = { GENBATCH_API_KEY: KEY };

function setup(name: string, prompt = 'a cat reading'): { manifest: string; out: string; victim: string } {
  const dir = join(t.dir, name);
  mkdirSync(join(dir, 'victim'), { recursive: true });
  writeFileSync(join(dir, 'victim', 'important.txt'), 'the user\'s own file\n');
  const manifest = join(dir, 'm.yaml');
  writeFileSync(manifest, `jobs:\n  - {id: cat, model: alpha-image-2, input: {prompt: ${prompt}}}\n  - {id: dog, model: alpha-image-2, input: {prompt: a dog}}\n`);
  return { manifest, out: join(dir, 'out'), victim: join(dir, 'victim') };
}

describe('a symbolic link in place of a job folder', () => {
  it('placed before the first run: exit 74 naming it, nothing sent, nothing written through it', async () => {
    const { manifest, out, victim } = setup('before');
    mkdirSync(out);
    symlinkSync('../victim', join(out, 'cat'));
    const tasksBefore = sb.stats().tasks_total;
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', '0.005', '--out', out, '--yes'], env);
    expect(r.stderr).toContain(`${join(out, 'cat')} is a symbolic link`);
    expect(r.code).toBe(74);
    expect(sb.stats().tasks_total).toBe(tasksBefore);
    expect(readdirSync(victim)).toEqual(['important.txt']);
  });

  it('placed before a rerun that changes the job: the user\'s files are not moved into previous-<n>/', async () => {
    const { manifest, out, victim } = setup('rerun');
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', '0.005', '--out', out, '--yes'];
    expect((await runCli(args, env)).code).toBe(0);
    rmSync(join(out, 'cat'), { recursive: true });
    symlinkSync('../victim', join(out, 'cat'));
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('a cat reading', 'a cat sleeping'));
    const r = await runCli(args, env);
    expect(r.code).toBe(74);
    expect(r.stderr).toContain(`${join(out, 'cat')} is a symbolic link`);
    expect(readdirSync(victim)).toEqual(['important.txt']);
    expect(readFileSync(join(victim, 'important.txt'), 'utf8')).toBe('the user\'s own file\n');
  });

  it('placed while the task runs: the result is not written through it, the job is left for the next run', async () => {
    const { manifest, out, victim } = setup('during');
    // Slow enough that the task is still running when the link is placed (alpha-image-2 takes seconds, scaled by 0.2).
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', '0.2', '--out', out, '--yes', '--json'];
    const child = spawnCli(args, env);
    let placed = false;
    let stdout = '';
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (!placed && /"id":"cat","from":"submitting","to":"submitted"/.test(stdout)) {
        placed = true;
        if (!existsSync(join(out, 'cat'))) symlinkSync('../victim', join(out, 'cat'));
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(placed).toBe(true);
    expect(readdirSync(victim)).toEqual(['important.txt']);
    const cat = readJobs(join(out, 'state.db')).find((j) => j.id === 'cat')!;
    expect(cat.state).toBe('downloading');
    expect(cat.last_error).toContain('is a symbolic link');
    expect(code).toBe(7); // left downloading for the next run
  }, 60_000);
});

describe('a symbolic link in place of the state file', () => {
  it('out/state.db -> a file outside: exit 74 naming it, nothing sent, nothing written through it', async () => {
    const { manifest, out, victim } = setup('state');
    mkdirSync(out);
    // An empty file is what SQLite makes a new database in: before, the run's state went there (outside the
    // output folder), its journal beside the target where genbatch did not look, and the job sent stayed
    // `submitting` with its task id lost.
    writeFileSync(join(victim, 'empty.db'), '');
    symlinkSync('../victim/empty.db', join(out, 'state.db'));
    const tasksBefore = sb.stats().tasks_total;
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', '0.005', '--out', out, '--yes'], env);
    expect(r.stderr).toContain(`${join(out, 'state.db')} is a symbolic link`);
    expect(r.code).toBe(74);
    expect(sb.stats().tasks_total).toBe(tasksBefore);
    expect(readdirSync(victim).sort()).toEqual(['empty.db', 'important.txt']);
    expect(readFileSync(join(victim, 'empty.db'), 'utf8')).toBe('');
  });
});
