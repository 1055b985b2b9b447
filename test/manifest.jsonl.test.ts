import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { openManifest, type ManifestJob } from '../src/manifest/index.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * JSONL manifests: one job object a line, read line by line, every problem at its line, the same ids and
 * resume rules as YAML and CSV; OpenAI Batch lines (custom_id, method, url, body) are taken as they are.
 */

const SCALE = '0.005';
const KEY = 'sk-test-jsonl-0123456789';
let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 11 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): string {
  const t = tempDir('genbatch-jsonl-');
  cleanups.push(t.cleanup);
  return t.dir;
}

const image = (id: string, prompt: string, more: Record<string, unknown> = {}) => JSON.stringify({ id, model: 'alpha-image-2', input: { prompt, ...more } });

describe('JSONL manifests', () => {
  it('validate names the line of every problem (blank lines skipped; not JSON, not an object, field rules, unknown keys, duplicate ids) and exits 2', async () => {
    const dir = work();
    const file = join(dir, 'jobs.jsonl');
    writeFileSync(
      file,
      [
        image('a1', 'A cat'),
        '',
        '   ',
        image('a2', 'A dog', { size: '4000x2000', resolution: '4K' }),
        '{"id": "a3", "model": "alpha-image-2", "input": {"prompt": "x"',
        '["a4"]',
        JSON.stringify({ id: 'a5', model: 'alpha-image-2', promt: 'x', input: { prompt: 'y' } }),
        image('a1', 'again'),
        JSON.stringify({ custom_id: 'b1', method: 'GET', url: '/v1/chat/completions', body: { model: 'vendora/chat-4o-mini', messages: [{ role: 'user', content: 'hi' }] } }),
      ].join('\n') + '\n',
    );
    const r = await runCli(['validate', file]);
    expect(r.code).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toContain(`job a2 (${file}:4) input.size: custom size 4000x2000 has a longest edge over 3840`);
    expect(lines.find((l) => l.startsWith(`${file}:5: not JSON: `))).toBeDefined();
    expect(lines).toContain(`${file}:6: a line must be a JSON object, one job: {"id": ..., "model": ..., "input": {...}}`);
    expect(lines.find((l) => l.startsWith(`job a5 (${file}:7) promt: unknown key "promt"`))).toBeDefined();
    expect(lines).toContain(`job a1 (${file}:8) id: duplicate id (first used at ${file}:1)`);
    expect(lines).toContain(`job b1 (${file}:9) method: must be "POST" (a batch line is a POST request)`);
    // Nothing but these problems: line 1 is valid, the blank lines are skipped.
    expect(lines.filter((l) => [1, 2, 3].some((n) => l.includes(`(${file}:${n})`) || l.startsWith(`${file}:${n}:`)))).toEqual([]);
  });

  it('reads an OpenAI Batch line: custom_id is the id, body the model and input, url the chat protocol', async () => {
    const dir = work();
    const file = join(dir, 'batch.jsonl');
    const messages = [{ role: 'user', content: 'Name three harbours.' }];
    writeFileSync(file, `\uFEFF${JSON.stringify({ custom_id: 'req-1', method: 'POST', url: '/v1/responses', body: { model: 'vendora/chat-4o-mini', input: 'Name a harbour.' } })}\n${JSON.stringify({ custom_id: 'req-2', method: 'POST', url: '/v1/chat/completions', body: { model: 'vendora/chat-4o-mini', messages, max_tokens: 50 } })}\n`);
    const m = await openManifest(file);
    const jobs: ManifestJob[] = [];
    for await (const j of m.jobs()) jobs.push(j);
    expect(m.problems).toEqual([]);
    expect(jobs.map((j) => [j.id, j.model, j.kind, j.protocol, j.where, j.problems.length])).toEqual([
      ['req-1', 'vendora/chat-4o-mini', 'chat', 'responses', `${file}:1`, 0],
      ['req-2', 'vendora/chat-4o-mini', 'chat', 'chat-completions', `${file}:2`, 0],
    ]);
    expect(jobs[1]!.input).toMatchObject({ messages, max_tokens: 50 });
  });

  it('runs against the sandbox; a rerun sends nothing, a changed line sends only its job, and a run stopped by SIGINT resumes without sending a job twice', async () => {
    const dir = work();
    const file = join(dir, 'jobs.jsonl');
    const out = join(dir, 'out');
    const lines = Array.from({ length: 40 }, (_, i) => image(`j${String(i).padStart(2, '0')}`, `Picture ${i} of a lighthouse`));
    lines.push(JSON.stringify({ custom_id: 'chat-1', method: 'POST', url: '/v1/chat/completions', body: { model: 'vendora/chat-4o-mini', messages: [{ role: 'user', content: 'Say hello.' }] } }));
    writeFileSync(file, lines.join('\n') + '\n');
    const args = ['run', file, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', '--concurrency', '2'];
    const total0 = sb.stats().tasks_total;

    // Stopped once the estimate is printed, then resumed: every job once.
    const first = await new Promise<{ code: number | null }>((resolve) => {
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
      child.on('exit', (code) => resolve({ code }));
    });
    expect(first.code).toBe(130);
    const rest = await runCli(args, { GENBATCH_API_KEY: KEY });
    expect(rest.stderr).toBe('');
    expect(rest.code).toBe(0);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => j.state)).toEqual(Array(41).fill('done'));
    expect(sb.stats().tasks_total - total0).toBe(40);
    expect(existsSync(join(out, 'chat-1', 'response.txt'))).toBe(true);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; where: string }> };
    expect(report.jobs.find((j) => j.id === 'j07')?.where).toBe(`${file}:8`);

    const again = await runCli(args, { GENBATCH_API_KEY: KEY });
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('nothing changed');
    expect(sb.stats().tasks_total - total0).toBe(40);

    writeFileSync(file, readFileSync(file, 'utf8').replace('Picture 5 of', 'Picture 5 (changed) of'));
    const third = await runCli(args, { GENBATCH_API_KEY: KEY });
    expect(third.code).toBe(0);
    expect(sb.stats().tasks_total - total0).toBe(41);
    const after = readJobs(join(out, 'state.db'));
    expect(after.filter((j, i) => j.task_id !== jobs[i]!.task_id).map((j) => j.id)).toEqual(['j05']);
  }, 120_000);

  it('a line with a rows source makes one job per row, and a rerun after the rows file changed sends the changed row again', async () => {
    const dir = work();
    const file = join(dir, 'rows.jsonl');
    const out = join(dir, 'out');
    writeFileSync(join(dir, 'prompts.csv'), 'prompt\nA red boat\nA blue boat\nA green boat\n');
    writeFileSync(file, `${JSON.stringify({ id: 'boat-{{row}}', model: 'alpha-image-2', rows: { file: 'prompts.csv' }, input: { prompt: '{{prompt}}' } })}\n`);
    const args = ['run', file, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'];
    const total0 = sb.stats().tasks_total;
    const first = await runCli(args, { GENBATCH_API_KEY: KEY });
    expect(first.code).toBe(0);
    expect(readJobs(join(out, 'state.db')).map((j) => j.id)).toEqual(['boat-1', 'boat-2', 'boat-3']);
    expect(sb.stats().tasks_total - total0).toBe(3);
    // The manifest is unchanged; the rows file is not: the rerun must read it again.
    writeFileSync(join(dir, 'prompts.csv'), 'prompt\nA red boat\nA blue boat at night\nA green boat\n');
    const again = await runCli(args, { GENBATCH_API_KEY: KEY });
    expect(again.code).toBe(0);
    expect(sb.stats().tasks_total - total0).toBe(4);
  }, 60_000);
});
