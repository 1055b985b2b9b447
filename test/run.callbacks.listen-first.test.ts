import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { callbackToken, readJobs } from './helpers/verify.js';
import { admin } from './helpers/admin.js';

/**
 * With --listen the receiver listens first thing, before the sync and the balance read: the service
 * retries a callback for a few seconds only (1, 2, 4 s), so a run restarted after a crash must be
 * reachable at once, also when its manifest is large. A callback that comes before the run is ready
 * is kept and handed over (here: it adopts the uncertain job). Before, the receiver started only
 * after the balance was read, and such a callback was refused (connection refused).
 */
const KEY = 'sk-listen-first-0123456789';
const SCALE = '0.01';
let sb: Sandbox;
const t = tempDir('genbatch-listen-first-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 4, allowLoopback: true, slowMs: 1500 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});


describe('the callback receiver', () => {
  it('listens before the sync and the balance read, and keeps what comes meanwhile', async () => {
    const manifest = join(t.dir, 'm.yaml');
    writeFileSync(manifest, ['jobs:', '  - id: a', '    model: alpha-image-2', '    input:', '      prompt: "a red kite"'].join('\n') + '\n');
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const base = ['--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'];
    const env = { GENBATCH_API_KEY: KEY };
    // The task is made, its answer lost: uncertain, with the task at the service.
    sb.script('submit', ['500-after']);
    expect((await runCli(['run', manifest, ...base], env)).code).toBe(4);
    const tasks = ((await (await fetch(`${sb.url}/__sandbox/tasks`, admin(sb))).json()) as { tasks: Array<{ task_id: string }> }).tasks;
    expect(tasks).toHaveLength(1);

    // The next run has a new job too, so it reads the balance: slowly (1.5 s). The uncertain job's
    // callback comes as soon as the run listens.
    writeFileSync(manifest, ['jobs:', '  - id: a', '    model: alpha-image-2', '    input:', '      prompt: "a red kite"', '  - id: b', '    model: alpha-image-2', '    input:', '      prompt: "a grey heron"'].join('\n') + '\n');
    sb.script('balance', ['slow']);
    const child = spawnCli(['run', manifest, ...base, '--listen', '127.0.0.1:0', '--json'], env);
    const seen: string[] = [];
    let answered: Promise<void> | null = null;
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += String(d);
      for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
        const e = JSON.parse(buf.slice(0, i)) as { type: string; public_url?: string };
        buf = buf.slice(i + 1);
        seen.push(e.type);
        if (e.type === 'listening') {
          answered = fetch(`${e.public_url!.replace(/\/$/, '')}/${callbackToken(state)}?job=a&attempt=1`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ code: 200, msg: 'success', data: { task_id: tasks[0]!.task_id, status: 'finished' } }),
          }).then((r) => {
            expect(r.status).toBe(200);
            seen.push('callback answered');
          });
        }
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(answered).not.toBeNull();
    await answered;
    expect(seen.indexOf('listening')).toBeLessThan(seen.indexOf('synced'));
    expect(seen.indexOf('callback answered')).toBeLessThan(seen.indexOf('estimate'));
    const jobs = readJobs(state);
    expect(jobs.map((j) => `${j.id} ${j.state}`)).toEqual(['a done', 'b done']);
    expect(jobs[0]!.task_id).toBe(tasks[0]!.task_id);
    expect(code).toBe(0);
  }, 60_000);
});
