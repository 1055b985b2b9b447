import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * `genbatch export` into a folder against what is on disk: a forged `.genbatch-export.json` (an entry through a
 * symbolic link, one with `../`), a `--to` that leads into the output folder through a link, a recorded file
 * that is missing, a recorded name too long for the export folder. Each is a named problem or a refusal; nothing
 * outside the export folder is removed or written.
 */
const SCALE = '0.005';
const KEY = 'sk-export-hostile-0123456789abcdef';
const env = { GENBATCH_API_KEY: KEY };

let sb: Sandbox;
/**
 * One run for the tests that leave its output folder as it is (each writes only beside it, under names of its
 * own); a test that changes the output folder or its state makes its own.
 */
let shared: { dir: string; out: string; m: string; state: string };
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 7, policyWords: [] });
  shared = await run();
}, 60_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

/** A run of three image jobs into `<dir>/out`. */
async function run(): Promise<{ dir: string; out: string; m: string; state: string }> {
  const t = tempDir('genbatch-export-hostile-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  const lines = ['jobs:'];
  for (const id of ['x-1', 'x-2', 'x-3']) lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "a lighthouse, ${id}"`);
  const m = join(t.dir, 'm.yaml');
  writeFileSync(m, lines.join('\n') + '\n');
  const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', out], env);
  expect(r.code).toBe(0);
  return { dir: t.dir, out, m, state: join(out, 'state.db') };
}

const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');
const ids = (index: string) => readFileSync(index, 'utf8').trimEnd().split('\n').map((l) => (JSON.parse(l) as { job_id: string }).job_id);
const ledgerOf = (to: string) => JSON.parse(readFileSync(join(to, '.genbatch-export.json'), 'utf8')) as { version: 1; files: Record<string, string> };

function recordedPath(state: string, job: string): string {
  const db = new Database(state, { readonly: true });
  try {
    return (db.prepare(`SELECT path FROM files WHERE job_id = ? AND state = 'done'`).get(job) as { path: string }).path;
  } finally {
    db.close();
  }
}

describe('genbatch export: the export record is data from outside', () => {
  it('a forged record entry through a symbolic link, or with ../, removes nothing outside the export folder: named, exit 1', async () => {
    const { dir, out, m } = shared;
    const to = join(dir, 'dataset');
    expect((await runCli(['export', m, '--out', out, '--to', to], env)).code).toBe(0);
    // A file of the user's outside the export folder, and a link in the export folder leading to its folder.
    const victim = join(dir, 'victim');
    mkdirSync(victim);
    const secret = 'precious bytes';
    writeFileSync(join(victim, 'keep.png'), secret);
    writeFileSync(join(dir, 'also.png'), secret);
    symlinkSync(victim, join(to, 'evil'));
    const ledger = ledgerOf(to);
    ledger.files['evil/keep.png'] = sha(secret);
    ledger.files['../also.png'] = sha(secret);
    ledger.files[join(dir, 'also.png')] = sha(secret);
    writeFileSync(join(to, '.genbatch-export.json'), JSON.stringify(ledger));

    const r = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(existsSync(join(victim, 'keep.png'))).toBe(true);
    expect(existsSync(join(dir, 'also.png'))).toBe(true);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('the entry "evil/keep.png" leads through');
    expect(r.stderr).toContain('is a symbolic link; nothing removed for it');
    expect(r.stderr).toContain('the entry "../also.png" has a ".." part');
    expect(r.stderr).toContain('is an absolute name');
    expect(readFileSync(join(victim, 'keep.png'), 'utf8')).toBe(secret);
    expect(readFileSync(join(dir, 'also.png'), 'utf8')).toBe(secret);
    // The export itself went on; the new record no longer holds the forged names.
    expect(ids(join(to, 'metadata.jsonl'))).toEqual(['x-1', 'x-2', 'x-3']);
    expect(Object.keys(ledgerOf(to).files).filter((n) => n.includes('evil') || n.includes('also'))).toEqual([]);
  }, 60_000);

  it('a record file in --to that is a symbolic link is not read or written through: the refusal names --to, not --out', async () => {
    const { dir, out, m } = shared;
    const to = join(dir, 'linked-record');
    mkdirSync(to);
    const outside = join(dir, 'someone-elses.json');
    writeFileSync(outside, '{"not":"ours"}');
    symlinkSync(outside, join(to, '.genbatch-export.json'));
    const r = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(r.code).toBe(74);
    expect(r.stderr).toContain(`${join(to, '.genbatch-export.json')} is a symbolic link`);
    expect(r.stderr).toContain('choose another --to');
    expect(r.stderr).not.toContain('--out');
    expect(readFileSync(outside, 'utf8')).toBe('{"not":"ours"}');
  }, 60_000);

  it('--to that leads into the output folder through a symbolic link is refused like a plain path into it (exit 2, nothing written)', async () => {
    const { dir, out, m } = shared;
    symlinkSync(out, join(dir, 'link'));
    const before = readdirSync(out).sort();
    const r = await runCli(['export', m, '--out', out, '--to', join(dir, 'link', 'set')], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`the export folder must be outside the run's output folder ${out}`);
    expect(readdirSync(out).sort()).toEqual(before);
  }, 60_000);

  it('a recorded file that is missing is a named problem: the rest is exported, metadata.jsonl and the record list what was, exit 1 without a stack trace', async () => {
    const { dir, out, m, state } = await run();
    const gone = recordedPath(state, 'x-2');
    unlinkSync(join(out, gone));
    const to = join(dir, 'dataset');
    const r = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${join(out, gone)}: recorded but missing from the output folder; not exported`);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    expect(ids(join(to, 'metadata.jsonl'))).toEqual(['x-1', 'x-3']);
    const names = Object.keys(ledgerOf(to).files).sort();
    expect(names.filter((n) => n !== 'metadata.jsonl').map((n) => n.split('/')[0])).toEqual(['x-1', 'x-3']);
  }, 60_000);

  it('a job folder of the output folder swapped for a link to elsewhere is not read through: a named problem', async () => {
    const { dir, out, m, state } = await run();
    const rel = recordedPath(state, 'x-1');
    // The same name and bytes elsewhere, the job folder now a link to it: nothing may be exported from there.
    const elsewhere = join(dir, 'elsewhere');
    renameSync(join(out, 'x-1'), elsewhere);
    symlinkSync(elsewhere, join(out, 'x-1'));
    const to = join(dir, 'dataset');
    const r = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${join(out, rel)}: recorded, but ${join(out, 'x-1')} is a symbolic link in the output folder; not exported`);
    expect(existsSync(join(to, rel))).toBe(false);
    expect(ids(join(to, 'metadata.jsonl'))).toEqual(['x-2', 'x-3']);
  }, 60_000);

  it('a recorded file whose size changed is a named problem', async () => {
    const { dir, out, m, state } = await run();
    const p = recordedPath(state, 'x-3');
    writeFileSync(join(out, p), Buffer.concat([readFileSync(join(out, p)), Buffer.from('more')]));
    const to = join(dir, 'dataset');
    const r = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/: sha256 [0-9a-f]{64} is not the recorded [0-9a-f]{64}, size \d+ is not the recorded \d+ \(changed since it was downloaded\); not exported/);
    expect(ids(join(to, 'metadata.jsonl'))).toEqual(['x-1', 'x-2']);
  }, 60_000);

  it('a recorded name too long for the export folder (ENAMETOOLONG) is a named problem, not an abort', async () => {
    const { dir, out, m, state } = await run();
    // x-1's file moved deep into its folder, short enough for the output folder, too long under the export folder.
    const old = recordedPath(state, 'x-1');
    const depth = Math.floor((4000 - out.length - 40) / 181);
    const deep = ['x-1', ...Array.from({ length: depth }, (_, i) => `${String(i).padStart(3, '0')}${'d'.repeat(177)}`), 'image.png'].join('/');
    mkdirSync(join(out, deep, '..'), { recursive: true });
    renameSync(join(out, old), join(out, deep));
    const db = new Database(state);
    db.prepare(`UPDATE files SET path = ? WHERE job_id = 'x-1'`).run(deep);
    db.close();
    const to = join(dir, 'e'.repeat(200), 'f'.repeat(200));
    const r = await runCli(['export', m, '--out', out, '--to', to], env);
    expect(r.stderr).toContain('the name is too long for the file system');
    expect(r.stderr).toContain('(ENAMETOOLONG); not exported');
    expect(r.code).toBe(1);
    expect(ids(join(to, 'metadata.jsonl'))).toEqual(['x-2', 'x-3']);
    expect(existsSync(join(to, '.genbatch-export.json'))).toBe(true);
  }, 60_000);
});
