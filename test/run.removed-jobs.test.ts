import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Issue #23 item 3: jobs removed from the manifest stayed in the run: status, the reports, view, export and the
 * grid still showed them (an "outdoor" column after "outdoor" was removed). Now a removed job is kept in the
 * state (its files on disk untouched) and left out of what the readers show; --include-removed shows it.
 */
const KEY = 'sk-removed-jobs-0123456789';
const t = tempDir('genbatch-removed-');
let sb: Sandbox;
const env = () => ({ GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sb.url });
const fast = ['--time-scale', '0.005'];
let manifest: string;
let out: string;

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.005 });
  manifest = imageManifest(join(t.dir, 'r.yaml'), 3, 'r');
  out = join(t.dir, 'genbatch-out', 'r');
  const first = await runCli(['run', manifest, ...fast], env(), t.dir);
  if (first.code !== 0) throw new Error(first.stderr);
  // r-0002 leaves the manifest.
  imageManifest(manifest, 2, 'r');
}, 120_000);

afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

const ids = (jsonl: string) => jsonl.trimEnd().split('\n').map((l) => (JSON.parse(l) as { job_id: string }).job_id);

describe('a job removed from the manifest', () => {
  it('run says how many left, and the reports leave it out while its files stay on disk', async () => {
    const tasks = sb.stats().tasks_total;
    const r = await runCli(['run', manifest, ...fast], env(), t.dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toContain('genbatch: 1 jobs no longer in the manifest (kept in the state, left out of the reports)');
    expect(sb.stats().tasks_total).toBe(tasks);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { summary: { counts: Record<string, number> }; jobs: Array<{ id: string }> };
    expect(report.jobs.map((j) => j.id)).toEqual(['r-0000', 'r-0001']);
    expect(report.summary.counts.done).toBe(2);
    expect(readFileSync(join(out, 'report.csv'), 'utf8')).not.toContain('r-0002');
    expect(readFileSync(join(out, 'report.html'), 'utf8')).not.toContain('r-0002');
    expect(existsSync(join(out, 'r-0002', 'result.json'))).toBe(true);
  });

  it('status and genbatch report leave it out; --include-removed shows it', async () => {
    const st = await runCli(['status', manifest, '--json', '--jobs'], {}, t.dir);
    expect(st.code, st.stderr).toBe(0);
    const s = JSON.parse(st.stdout) as { counts: Record<string, number>; jobs: Array<{ id: string }> };
    expect(s.counts.done).toBe(2);
    expect(s.jobs.map((j) => j.id)).toEqual(['r-0000', 'r-0001']);
    const all = JSON.parse((await runCli(['status', manifest, '--json', '--jobs', '--include-removed'], {}, t.dir)).stdout) as typeof s;
    expect(all.counts.done).toBe(3);
    expect(all.jobs.map((j) => j.id)).toEqual(['r-0000', 'r-0001', 'r-0002']);
    const rep = await runCli(['report', manifest, '--include-removed'], {}, t.dir);
    expect(rep.code, rep.stderr).toBe(0);
    expect(readFileSync(join(out, 'report.csv'), 'utf8')).toContain('r-0002');
    expect((await runCli(['report', manifest], {}, t.dir)).code).toBe(0);
    expect(readFileSync(join(out, 'report.csv'), 'utf8')).not.toContain('r-0002');
  });

  it('export leaves it out; --include-removed exports it', async () => {
    const to = join(t.dir, 'exp');
    const e = await runCli(['export', manifest, '--to', to], {}, t.dir);
    expect(e.code, e.stderr).toBe(0);
    expect(ids(readFileSync(join(to, 'metadata.jsonl'), 'utf8'))).toEqual(['r-0000', 'r-0001']);
    const to2 = join(t.dir, 'exp-all');
    expect((await runCli(['export', manifest, '--to', to2, '--include-removed'], {}, t.dir)).code).toBe(0);
    expect(ids(readFileSync(join(to2, 'metadata.jsonl'), 'utf8'))).toEqual(['r-0000', 'r-0001', 'r-0002']);
  });

  it('back in the manifest, it is part of the run again (nothing sent: its result is kept)', async () => {
    imageManifest(manifest, 3, 'r');
    const tasks = sb.stats().tasks_total;
    const r = await runCli(['run', manifest, ...fast], env(), t.dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).not.toContain('no longer in the manifest');
    expect(sb.stats().tasks_total).toBe(tasks);
    const s = JSON.parse((await runCli(['status', manifest, '--json'], {}, t.dir)).stdout) as { counts: Record<string, number> };
    expect(s.counts.done).toBe(3);
  });
});
