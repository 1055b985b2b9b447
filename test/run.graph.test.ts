import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ROOT, ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, readJobs } from './helpers/verify.js';

/**
 * Job graphs through `genbatch run` against an in-process sandbox: a parent
 * whose task fails (its prompt holds the sandbox's policy word) skips exactly
 * its descendants, with the reason in the state and the report; a 409 is the
 * outcome `exists`; a resume changes nothing.
 */
const SCALE = '0.005';
const KEY = 'sk-test-graph-0123456789';

let sb: Sandbox;
const t = tempDir('genbatch-run-graph-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 11 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

const song = (id: string, prompt: string) => `  - id: ${id}
    model: generate-music
    input: {custom_mode: false, instrumental: false, prompt: "${prompt}"}
`;

const MANIFEST = `pricing: {generate-music: 10, convert-to-wav: 1, generate-music-cover: 2, create-music-video: 5, alpha-image-2: 2}
jobs:
${song('good', 'a calm harbour song')}${song('bad', 'a song with unsafe-output in it')}  - id: good-wav
    for_each: \${{ jobs.good.audio }}
    model: convert-to-wav
    input: {task_id: "\${{ jobs.good.task_id }}", audio_id: "\${{ item.audio_id }}"}
  - id: bad-wav
    for_each: \${{ jobs.bad.audio }}
    model: convert-to-wav
    input: {task_id: "\${{ jobs.bad.task_id }}", audio_id: "\${{ item.audio_id }}"}
  - id: bad-cover
    model: generate-music-cover
    input: {task_id: "\${{ jobs.bad.task_id }}"}
  - id: bad-poster
    needs: [bad-cover]
    model: alpha-image-2
    input: {prompt: "a poster"}
  - id: video-a
    model: create-music-video
    input: {task_id: "\${{ jobs.good.task_id }}", audio_id: "\${{ jobs.good.audio[0].audio_id }}"}
  - id: video-b
    needs: [video-a]
    model: create-music-video
    input: {task_id: "\${{ jobs.good.task_id }}", audio_id: "\${{ jobs.good.audio[0].audio_id }}"}
  - id: after-b
    needs: [video-b]
    model: alpha-image-2
    input: {prompt: "after the second video"}
  - id: bad-size
    model: alpha-image-2
    input: {prompt: "a square poster", size: "\${{ jobs.good.audio[0].title }}"}
  - id: free
    model: alpha-image-2
    input: {prompt: "an unrelated lighthouse"}
`;

interface ReportJob {
  id: string;
  state: string;
  error: string | null;
}

describe('job graphs in a run', () => {
  it('a failed parent skips exactly its descendants, naming why; a 409 is `exists`; a resume changes nothing', async () => {
    const manifest = join(t.dir, 'graph.yaml');
    writeFileSync(manifest, MANIFEST);
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', '--concurrency', '2'];
    const before = sb.stats().tasks_total;
    const r = await runCli(args, { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(1); // some failed

    const jobs = new Map(readJobs(state).map((j) => [j.id, j]));
    const states = Object.fromEntries([...jobs].map(([id, j]) => [id, j.state]));
    expect(states).toEqual({
      good: 'done',
      bad: 'failed',
      'good-wav': 'done',
      'good-wav.0': 'done',
      'good-wav.1': 'done',
      'bad-wav': 'skipped',
      'bad-cover': 'skipped',
      'bad-poster': 'skipped',
      'video-a': 'done',
      'video-b': 'exists',
      'after-b': 'skipped',
      'bad-size': 'failed',
      free: 'done',
    });
    expect(jobs.get('bad')!.last_error).toContain('content policy');
    for (const id of ['bad-wav', 'bad-cover', 'bad-poster']) expect(jobs.get(id)!.last_error).toMatch(/^skipped because job bad is failed: content policy/);
    expect(jobs.get('video-b')!.last_error).toContain('a music video already exists');
    expect(jobs.get('after-b')!.last_error).toMatch(/^skipped because job video-b is exists: .*a music video already exists/);
    // A referenced value that breaks the model's rules fails that job at submit time, naming the field.
    expect(jobs.get('bad-size')!.last_error).toMatch(/^input after filling references does not fit alpha-image-2: input\.size: /);
    // Tasks: good, bad, 2 wav, video-a, free; video-b was refused (409, nothing created); skipped jobs sent nothing.
    expect(sb.stats().tasks_total - before).toBe(6);
    expect(checkFiles(state, out)).toBeGreaterThan(0);

    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: ReportJob[] };
    const inReport = new Map(report.jobs.map((j) => [j.id, j]));
    expect(inReport.get('bad-poster')).toMatchObject({ state: 'skipped', error: expect.stringMatching(/^skipped because job bad is failed/) });
    expect(inReport.get('video-b')).toMatchObject({ state: 'exists' });
    const md = readFileSync(join(out, 'report.md'), 'utf8');
    expect(md).toContain('skipped because job bad is failed');

    // Resume: skipped jobs stay skipped (their parent is still failed), nothing is sent.
    const again = await runCli(args, { GENBATCH_API_KEY: KEY });
    expect(again.code, again.stderr).toBe(1);
    expect(Object.fromEntries(readJobs(state).map((j) => [j.id, j.state]))).toEqual(states);
    expect(sb.stats().tasks_total - before).toBe(6);
  }, 120_000);

  it('a for_each job with a local image: each child sends the uploaded URL (uploaded once) and its own item', async () => {
    const manifest = join(t.dir, 'edit.yaml');
    writeFileSync(
      manifest,
      `jobs:
${song('tune', 'a calm tune')}  - id: covers
    for_each: \${{ jobs.tune.audio }}
    model: alpha-image-2-edit
    input:
      prompt: "A cover for \${{ item.title }}, variation \${{ index }}"
      image_urls: [${join(ROOT, 'manifests', 'assets', 'ref.png')}]
`,
    );
    const out = join(t.dir, 'edit-out');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    const inputs = [0, 1].map((i) => (JSON.parse(readFileSync(join(out, `covers.${i}`, 'result.json'), 'utf8')) as { input: { prompt: string; image_urls: string[] } }).input);
    expect(inputs[0]!.image_urls[0]).toMatch(/^http:\/\/.*\/temp\//);
    expect(inputs[1]!.image_urls).toEqual(inputs[0]!.image_urls);
    expect(inputs.map((x) => x.prompt)).toEqual([expect.stringMatching(/, variation 0$/), expect.stringMatching(/, variation 1$/)]);

    // The parent changes: it runs again, and so do the children made from its results (new tasks, nothing else).
    const before = readJobs(join(out, 'state.db'));
    const tasks = sb.stats().tasks_total;
    writeFileSync(manifest, readFileSync(manifest, 'utf8').replace('a calm tune', 'a bright tune'));
    const again = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(again.code, again.stderr).toBe(0);
    const after = readJobs(join(out, 'state.db'));
    expect(after.map((j) => [j.id, j.state])).toEqual([['tune', 'done'], ['covers', 'done'], ['covers.0', 'done'], ['covers.1', 'done']]);
    for (const id of ['tune', 'covers.0', 'covers.1']) expect(after.find((j) => j.id === id)!.task_id).not.toBe(before.find((j) => j.id === id)!.task_id);
    expect(sb.stats().tasks_total - tasks).toBe(3);
  }, 120_000);
});
