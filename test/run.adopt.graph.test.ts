import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A job left `submitting` by a crash becomes uncertain at the start of the next run, which skips
 * its dependents; when its late callback then adopts the task, the job finishes, and so must its
 * dependents (found flaky in GENBATCH_SLOW crash.graph: "second-song skipped because job persona is
 * uncertain" after persona was adopted and done, run exit 0).
 */
const KEY = 'sk-adopt-graph-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-adopt-graph-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.005, seed: 5, allowLoopback: true });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

describe('a late callback adopts a parent left submitting by a crash', () => {
  it('its dependents, skipped when it became uncertain, run again and finish', async () => {
    const manifest = join(t.dir, 'g.yaml');
    writeFileSync(
      manifest,
      `jobs:
  - id: parent
    model: alpha-image-2
    input: {prompt: "a parent picture"}
  - id: child
    needs: [parent]
    model: alpha-image-2
    input: {prompt: "a child picture"}
  - id: grandchild
    needs: [child]
    model: alpha-image-2
    input: {prompt: "a grandchild picture"}
`,
    );
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const base = ['run', manifest, '--base-url', sb.url, '--time-scale', '0.02', '--out', out, '--listen', '127.0.0.1:0'];
    expect((await runCli(base, { GENBATCH_API_KEY: KEY })).code).toBe(0);
    // As after a SIGKILL between the parent's intent and its answer: parent `submitting` without a task, dependents not sent yet.
    const db = new Database(state);
    const token = (db.prepare(`SELECT value FROM meta WHERE key = 'callback_token'`).get() as { value: string }).value;
    db.prepare(`UPDATE jobs SET state = 'submitting', task_id = NULL, result = NULL, finished_at = NULL WHERE id = 'parent'`).run();
    db.prepare(`UPDATE jobs SET state = 'pending', task_id = NULL, result = NULL, finished_at = NULL, submitted_input = NULL, submitted_at = NULL WHERE id IN ('child', 'grandchild')`).run();
    db.prepare(`DELETE FROM files`).run();
    db.close();
    const total0 = sb.stats().tasks_total;
    const rerun = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawnCli(base, { GENBATCH_API_KEY: KEY });
      let stdout = '';
      let stderr = '';
      let sent = false;
      child.stdout!.on('data', (d: Buffer) => {
        stdout += d.toString();
        const m = /callback receiver on 127\.0\.0\.1:(\d+)/.exec(stdout);
        if (m && !sent) {
          sent = true;
          // The task the crashed run had sent: its callback URL carries the run's token and the job id.
          void fetch(`${sb.url}/api/generate/submit`, {
            method: 'POST',
            headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'a parent picture' }, callback_url: `http://127.0.0.1:${m[1]}/${token}?job=parent` }),
          });
        }
      });
      child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
    const jobs = readJobs(state);
    expect(jobs.map((j) => `${j.id} ${j.state}${j.state === 'done' ? '' : ` ${j.last_error ?? ''}`}`), rerun.stdout.slice(-3000) + rerun.stderr).toEqual(['parent done', 'child done', 'grandchild done']);
    expect(jobs[0]!.last_error).toContain('adopted');
    expect(rerun.code).toBe(0);
    // The adopted task plus one new task for each dependent: nothing sent twice.
    expect(sb.stats().tasks_total - total0).toBe(3);
  }, 60_000);
});
