import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { BIN, cliEnv, ensureBuilt, imageManifest, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/** Ctrl-C (a real SIGINT to the CLI child) ends with `stopped after`, the counts and the command that resumes the run. */

const SCALE = '0.005';
const KEY = 'sk-test-interrupt-0123456789';
let sb: Sandbox;
let tmp: { dir: string; cleanup: () => void };

beforeAll(async () => {
  ensureBuilt();
  tmp = tempDir('genbatch-interrupt-');
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 3 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  tmp?.cleanup();
});

describe('genbatch run stopped by Ctrl-C', () => {
  it('says stopped, the counts, and the same command with its own flags; that command resumes and finishes the run', async () => {
    const manifest = imageManifest(join(tmp.dir, 'parti two.yaml'), 120, 'stop');
    const out = join(tmp.dir, 'out');
    const state = join(tmp.dir, 'st.db');
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--state', state, '--max-credits', '5000', '--concurrency', '2', '--only', 'stop-*', '--yes'];
    const first = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = spawnCli(args, { GENBATCH_API_KEY: KEY });
      let stdout = '';
      let sent = false;
      child.stdout!.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (!sent && stdout.includes('estimate')) {
          sent = true;
          child.kill('SIGINT');
        }
      });
      child.stderr!.resume();
      child.on('close', (code) => resolve({ code, stdout }));
    });
    expect(first.code).toBe(130);
    expect(first.stdout).not.toContain('finished in');
    const line = first.stdout.split('\n').find((l) => l.startsWith('genbatch: stopped after '));
    expect(line, first.stdout).toMatch(/^genbatch: stopped after \d+\.\d s: .*\d+ pending.*; run the same command to resume: genbatch run /);
    const command = line!.slice(line!.indexOf('resume: ') + 'resume: '.length);
    expect(command).toBe(
      `genbatch run '${manifest}' --out ${out} --state ${state} --base-url ${sb.url} --max-credits 5000 --time-scale ${SCALE} --concurrency 2 --yes --only 'stop-*'`,
    );
    expect(readJobs(state).filter((j) => j.state === 'pending').length).toBeGreaterThan(0);

    // The printed command, run by a shell as a user would paste it, finishes the run (async: the sandbox is in this process).
    const again = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn('sh', ['-c', command.replace(/^genbatch /, `'${process.execPath}' '${BIN}' `)], { env: cliEnv({ GENBATCH_API_KEY: KEY }) });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
    expect(again.status, again.stdout + again.stderr).toBe(0);
    expect(again.stdout).toContain('finished in');
    expect(readJobs(state).map((j) => j.state)).toEqual(Array(120).fill('done'));
  }, 180_000);
});
