import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { freePort } from './client.server.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';
import { admin } from './helpers/admin.js';

/**
 * A job left uncertain by a run that was then killed, while its task still runs at the service:
 * the next run with --listen waits for that task's callback (until its model's typical maximum
 * time has passed) and adopts it. Before, only jobs recovered from `submitting` at that very start
 * were waited for: this run had nothing else to do, ended at once (exit 4), and the task's callback
 * later found nobody listening; the paid task was never fetched. Seen as a rare failure of the
 * random-kill test crash.graph.test.ts (a stem-split task running, unknown to the state).
 */
const KEY = 'sk-earlier-run-0123456789';
const SCALE = '0.02'; // a video task takes 1.8-6 s here
let sb: Sandbox;
const t = tempDir('genbatch-earlier-run-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 8, allowLoopback: true });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

describe('an uncertain job from a killed run', () => {
  it("is adopted by the next run from its task's late callback", async () => {
    const manifest = join(t.dir, 'm.yaml');
    writeFileSync(manifest, ['jobs:', '  - id: v', '    model: vidmodel2.5-text-to-video', '    input:', '      prompt: "waves on a pebble beach"'].join('\n') + '\n');
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const port = await freePort();
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', '--listen', `127.0.0.1:${port}`];
    const env = { GENBATCH_API_KEY: KEY };
    // Run 1: the task is made, the answer lost (uncertain); killed while it waits for the callback.
    sb.script('submit', ['500-after']);
    const first = spawnCli([...args, '--json'], env);
    let buf = '';
    first.stdout!.on('data', (d: Buffer) => {
      buf += String(d);
      if (buf.includes('"to":"uncertain"')) first.kill('SIGKILL');
    });
    await new Promise((resolve) => first.on('close', resolve));
    expect(readJobs(state).map((j) => j.state)).toEqual(['uncertain']);
    const tasks = ((await (await fetch(`${sb.url}/__sandbox/tasks`, admin(sb))).json()) as { tasks: Array<{ task_id: string; state: string }> }).tasks;
    expect(tasks).toHaveLength(1);
    expect(tasks[0]!.state).not.toBe('finished'); // still running: its callback is still to come

    // Run 2: nothing to submit; it waits for that callback and adopts the task.
    const second = await runCli(args, env);
    const [job] = readJobs(state);
    expect(`${job!.state} ${job!.task_id}`).toBe(`done ${tasks[0]!.task_id}`);
    expect(second.code, second.stderr).toBe(0);
  }, 60_000);
});
