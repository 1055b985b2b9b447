import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { callbackToken, readJobs } from './helpers/verify.js';
import { admin } from './helpers/admin.js';

/**
 * Callback URLs carry the job's attempt (`?job=<id>&attempt=<n>`), and only a callback of the
 * job's latest attempt adopts it. Seen before: a job's first submit made task T1 and lost its
 * answer (uncertain); the user changed the prompt and resubmitted; that submit's answer was lost
 * too (uncertain again); then a replayed callback of T1 arrived and the job adopted T1, ending
 * `done` with the result of the OLD prompt.
 */
const KEY = 'sk-callback-attempt-0123456789';
const SCALE = '0.01';
let sb: Sandbox;
const t = tempDir('genbatch-callback-attempt-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 3, allowLoopback: true });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

const manifest = (prompt: string): string => {
  const path = join(t.dir, 'm.yaml');
  writeFileSync(path, ['jobs:', '  - id: a', '    model: alpha-image-2', '    input:', `      prompt: "${prompt}"`].join('\n') + '\n');
  return path;
};
const tasks = async (): Promise<Array<{ task_id: string }>> => ((await (await fetch(`${sb.url}/__sandbox/tasks`, admin(sb))).json()) as { tasks: Array<{ task_id: string }> }).tasks;

describe('callbacks of an earlier attempt', () => {
  it('never adopt a job that was submitted again', async () => {
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const base = ['--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'];
    const env = { GENBATCH_API_KEY: KEY };
    // Attempt 1: the task is made, its answer lost (no receiver: its callback reaches nobody).
    sb.script('submit', ['500-after']);
    const first = await runCli(['run', manifest('a red kite'), ...base], env);
    expect(first.code).toBe(4);
    expect(readJobs(state)[0]!.state).toBe('uncertain');
    const [t1] = await tasks();
    expect(t1).toBeDefined();

    // Attempt 2, new prompt: no task made (a 500 before creation), so the job is uncertain again;
    // while the run waits for late callbacks, a replay of T1's callback (attempt 1's URL) comes in.
    sb.script('submit', ['500']);
    const child = spawnCli(['run', manifest('a blue heron'), ...base, '--uncertain', 'resubmit', '--listen', '127.0.0.1:0', '--json'], env);
    let publicUrl = '';
    let replayed: Promise<number> | null = null;
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += String(d);
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const e = JSON.parse(buf.slice(0, i)) as { type: string; id?: string; to?: string; public_url?: string };
        buf = buf.slice(i + 1);
        if (e.type === 'listening') publicUrl = e.public_url!;
        if (e.type === 'job' && e.id === 'a' && e.to === 'uncertain' && replayed === null) {
          // The token is made once per state file (here by this run, before it listens).
          replayed = fetch(`${publicUrl.replace(/\/$/, '')}/${callbackToken(state)}?job=a&attempt=1`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ code: 200, msg: 'success', data: { task_id: t1!.task_id, status: 'finished' } }),
          }).then((r) => r.status);
        }
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(replayed).not.toBeNull();
    expect(await replayed!).toBe(200); // received (a callback is answered at once), but it adopts nothing
    const [job] = readJobs(state);
    expect(job!.state).toBe('uncertain');
    expect(job!.task_id).toBeNull();
    expect(code).toBe(4);
  }, 60_000);
});

