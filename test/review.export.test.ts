import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * `genbatch export`: the chosen results of a run into a folder, with a metadata.jsonl in the Hugging Face
 * ImageFolder layout (or an export.jsonl / export.csv index). CLI as a child process, the sandbox in this
 * process; the export folder on the same filesystem as the output folder, so files are hard-linked.
 */
const SCALE = '0.005';
const KEY = 'sk-review-export-0123456789abcdef';
const env = { GENBATCH_API_KEY: KEY };

let sb: Sandbox;
/**
 * One marked run for the tests that only read it (each exports into a folder of its own, never inside the
 * output folder); a test that changes the run (a mark, a result file) makes its own.
 */
let shared: { dir: string; out: string; m: string };
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 31, policyWords: [] });
  shared = await markedRun();
}, 60_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

/** A run of four image jobs, x-2 rejected and x-3 approved. */
async function markedRun(): Promise<{ dir: string; out: string; m: string }> {
  const t = tempDir('genbatch-export-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  const lines = ['jobs:'];
  for (const id of ['x-1', 'x-2', 'x-3', 'x-4']) {
    lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "a lighthouse at dusk, ${id}"`, '      size: "1:1"');
    if (id === 'x-4') lines.push('      resolution: 4K');
  }
  const m = join(t.dir, 'm.yaml');
  writeFileSync(m, lines.join('\n') + '\n');
  const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', out], env);
  expect(r.code).toBe(0);
  expect((await runCli(['mark', m, '--out', out, '--reject', 'x-2'], env)).code).toBe(0);
  expect((await runCli(['mark', m, '--out', out, '--approve', 'x-3'], env)).code).toBe(0);
  return { dir: t.dir, out, m };
}

const sha = (p: string) => createHash('sha256').update(readFileSync(p)).digest('hex');

/** report.json's files by job: path (relative to the output folder) and sha256. */
function recorded(out: string): Map<string, Array<{ path: string; sha256: string }>> {
  const jobs = (JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; files: Array<{ path: string; sha256: string }> }> }).jobs;
  return new Map(jobs.map((j) => [j.id, j.files]));
}

type Row = { file_name: string; job_id: string; model: string; prompt: string; sha256: string; size?: string };
const lines = (p: string): Row[] => readFileSync(p, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Row);

describe('genbatch export', () => {
  it('by default exports every done result not marked rejected, hard-linked, with a metadata.jsonl whose every file_name exists with the recorded sha256', async () => {
    const { dir, out, m } = shared;
    const to = join(dir, 'dataset');
    const r = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const rows = lines(join(to, 'metadata.jsonl'));
    expect(rows.map((x) => x.job_id)).toEqual(['x-1', 'x-3', 'x-4']);
    const rec = recorded(out);
    for (const row of rows) {
      expect(row.model).toBe('alpha-image-2');
      expect(row.prompt).toBe(`a lighthouse at dusk, ${row.job_id}`);
      expect(row.size).toBe('1:1');
      expect(Object.keys(row).filter((k) => k.includes('prompt'))).toEqual(['prompt']);
      expect(row.file_name.startsWith(`${row.job_id}/`)).toBe(true);
      const file = join(to, row.file_name);
      const source = rec.get(row.job_id)!.find((f) => f.path.split('/').at(-1) === row.file_name.split('/').at(-1))!;
      expect(sha(file)).toBe(source.sha256);
      // Same filesystem: a hard link to the file of the output folder (same inode).
      expect(statSync(file).ino).toBe(statSync(join(out, source.path)).ino);
    }
    expect(r.stdout).toContain('3 hard-linked, 0 copied');
    // Every line has the same keys (datasets takes its columns from the first lines): null where a job has no such field.
    expect(rows.map((x) => Object.keys(x))).toEqual([Object.keys(rows[0]!), Object.keys(rows[0]!), Object.keys(rows[0]!)]);
    expect(rows.map((x) => (x as Record<string, unknown>).resolution)).toEqual([null, null, '4K']);
  }, 60_000);

  it('copies (and checks) each file when the export folder is on another filesystem', async (ctx) => {
    const { out, m } = shared;
    if (!existsSync('/dev/shm') || statSync('/dev/shm').dev === statSync(out).dev) return ctx.skip();
    const t = mkdtempSync(join('/dev/shm', 'genbatch-export-'));
    cleanups.push(() => rmSync(t, { recursive: true, force: true }));
    const r = await runCli(['export', m, '--out', out, '--to', t], env);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('0 hard-linked, 3 copied');
    for (const row of lines(join(t, 'metadata.jsonl'))) expect(sha(join(t, row.file_name))).toBe(row.sha256);
  }, 60_000);

  it('never writes through a symbolic link in the export folder: a job folder that is a link is refused, named, exit 1', async () => {
    const { dir, out, m } = shared;
    const to = join(dir, 'dataset-with-link');
    const elsewhere = join(dir, 'elsewhere');
    mkdirSync(to);
    mkdirSync(elsewhere);
    symlinkSync(elsewhere, join(to, 'x-1'));
    const r = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/x-1\/[^:]+: a folder on the way .* is a symbolic link or a file; not exported/);
    expect(readdirSync(elsewhere)).toEqual([]);
    expect(lines(join(to, 'metadata.jsonl')).map((x) => x.job_id)).toEqual(['x-3', 'x-4']);
  }, 60_000);

  it('--only approved exports the approved results alone; --only done every done one; --format jsonl and csv write export.jsonl and export.csv', async () => {
    const { dir, out, m } = shared;
    const approved = join(dir, 'approved');
    expect((await runCli(['export', m, '--out', out, '--to', approved, '--only', 'approved'], env)).code).toBe(0);
    expect(lines(join(approved, 'metadata.jsonl')).map((x) => x.job_id)).toEqual(['x-3']);
    expect(readdirSync(approved).filter((n) => !n.startsWith('.')).sort()).toEqual(['metadata.jsonl', 'x-3']);

    const all = join(dir, 'all');
    expect((await runCli(['export', m, '--out', out, '--to', all, '--only', 'done', '--format', 'jsonl'], env)).code).toBe(0);
    expect(existsSync(join(all, 'metadata.jsonl'))).toBe(false);
    expect(lines(join(all, 'export.jsonl')).map((x) => x.job_id)).toEqual(['x-1', 'x-2', 'x-3', 'x-4']);

    const csv = join(dir, 'csv');
    expect((await runCli(['export', m, '--out', out, '--to', csv, '--format', 'csv'], env)).code).toBe(0);
    const text = readFileSync(join(csv, 'export.csv'), 'utf8').split('\r\n');
    expect(text[0]).toBe('file_name,job_id,model,prompt,sha256,input');
    expect(text.filter((l) => l !== '').length).toBe(4);
    expect(text[1]).toMatch(/^x-1\/[^,]+,x-1,alpha-image-2,"a lighthouse at dusk, x-1",[0-9a-f]{64},"\{.*""prompt"":""a lighthouse at dusk, x-1"".*""size"":""1:1""/);

    const within = await runCli(['export', m, '--out', out, '--to', join(out, 'set')], env);
    expect(within.code).toBe(2);
    expect(within.stderr).toContain(`the export folder must be outside the run's output folder ${out}`);
    expect(existsSync(join(out, 'set'))).toBe(false);

    const bad = await runCli(['export', m, '--out', out, '--to', csv, '--only', 'rejected'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--only expects approved or done, got "rejected"');
  }, 60_000);

  it('a re-export copies nothing again, drops what is no longer chosen, and never overwrites a file it did not write', async () => {
    const { dir, out, m } = await markedRun();
    const to = join(dir, 'dataset');
    expect((await runCli(['export', m, '--out', out, '--to', to], env)).code).toBe(0);
    const again = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('(0 hard-linked, 0 copied, 3 already there)');

    // x-4 rejected since: its file goes, its line too.
    const x4 = lines(join(to, 'metadata.jsonl')).find((x) => x.job_id === 'x-4')!.file_name;
    expect((await runCli(['mark', m, '--out', out, '--reject', 'x-4'], env)).code).toBe(0);
    const third = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(third.code).toBe(0);
    expect(third.stdout).toContain('1 no longer chosen removed');
    expect(existsSync(join(to, x4))).toBe(false);
    expect(lines(join(to, 'metadata.jsonl')).map((x) => x.job_id)).toEqual(['x-1', 'x-3']);

    // A file genbatch did not write, where an exported file would go: left as it is, named, exit 1.
    const fresh = join(dir, 'fresh');
    const x1 = recorded(out).get('x-1')![0]!.path.split('/').at(-1)!;
    mkdirSync(join(fresh, 'x-1'), { recursive: true });
    writeFileSync(join(fresh, 'x-1', x1), 'my own file');
    const foreign = await runCli(['export', m, '--out', out, '--to', fresh], env);
    expect(foreign.code).toBe(1);
    expect(foreign.stderr).toContain(`${join(fresh, 'x-1', x1)}: already there and genbatch did not write it`);
    expect(readFileSync(join(fresh, 'x-1', x1), 'utf8')).toBe('my own file');
    expect(lines(join(fresh, 'metadata.jsonl')).map((x) => x.job_id)).toEqual(['x-3']);
  }, 60_000);

  it('a result file changed since it was downloaded is not exported: exit 1 naming it, no file left under its name or a temporary one', async () => {
    const { dir, out, m } = await markedRun();
    const rec = recorded(out).get('x-1')![0]!;
    writeFileSync(join(out, rec.path), 'tampered');
    const to = join(dir, 'dataset');
    const r = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${join(out, rec.path)}: sha256 `);
    expect(r.stderr).toContain(`is not the recorded ${rec.sha256}`);
    expect(readdirSync(join(to, 'x-1'))).toEqual([]);
    expect(lines(join(to, 'metadata.jsonl')).map((x) => x.job_id)).toEqual(['x-3', 'x-4']);
  }, 60_000);
});
