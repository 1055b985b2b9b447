import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, readJobs } from './helpers/verify.js';

/** Uploads that fail transiently: retried by the client like a GET, and the job comes back in the same run. */
const SCALE = '0.005';
const KEY = 'sk-more-uploads-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-more-up-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), faults: 'upload:500=0.5', seed: 21 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

/** A manifest of `n` edits, each of its own local PNG (n distinct uploads). */
function editManifest(dir: string, name: string, n: number, seed: number): string {
  const lines = ['jobs:'];
  for (let i = 0; i < n; i++) {
    writeFileSync(join(dir, `${name}-${i}.png`), solidPng(8, 8, [(i * 37 + seed) % 256, (seed * 11) % 256, 90]));
    lines.push(`  - id: ${name}-${i}`, '    model: alpha-image-2-edit', '    input:', `      prompt: "edit ${i}"`, `      image_urls: ["${name}-${i}.png"]`);
  }
  const path = join(dir, `${name}.yaml`);
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

const run = (manifest: string, out: string) =>
  runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', '--concurrency', '4'], { GENBATCH_API_KEY: KEY });

describe('upload failures in a run', () => {
  it('with half of the uploads answered 500, every job is done in one run (exit 0)', async () => {
    const manifest = editManifest(t.dir, 'half', 8, 1);
    const out = join(t.dir, 'out-half');
    const before = sb.stats().faults_injected['upload:500'] ?? 0;
    const r = await run(manifest, out);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect((sb.stats().faults_injected['upload:500'] ?? 0) - before).toBeGreaterThan(0);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => j.state)).toEqual(Array(8).fill('done'));
    expect(checkFiles(join(out, 'state.db'), out)).toBeGreaterThanOrEqual(8);
  });

  it('an upload whose client retries are all used up (10 answers 500) is tried again in the same run', async () => {
    const manifest = editManifest(t.dir, 'spent', 1, 2);
    const out = join(t.dir, 'out-spent');
    sb.script('upload', Array(10).fill('500'));
    const r = await run(manifest, out);
    expect(r.code).toBe(0);
    const [job] = readJobs(join(out, 'state.db'));
    expect(job!.state).toBe('done');
    // The scripted tries were all consumed (ten 500s), so the job went back to the queue and came again.
    expect(sb.stats().faults_injected['upload:500']).toBeGreaterThanOrEqual(10);
  });
});
