import Database from 'better-sqlite3';
import { existsSync, lstatSync, readFileSync, readdirSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * `genbatch prune` (issue #26 item 8): keeps the newest K previous-<n>/ generations of each job and, with
 * --removed, removes the results of jobs the manifest no longer names; it removes only files the state
 * records (and still as recorded), never follows a link, reports what it leaves, and the state stops listing
 * what it removed. Real runs against the sandbox, real files.
 */

const SCALE = '0.005';
const KEY = 'sk-prune-01';
let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 3 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

/** Three jobs; the first one's prompt changes each night (so its result is made again), the others stay. */
function writeManifest(path: string, night: number, ids = ['p-0', 'p-1', 'p-2']): void {
  const lines = ['jobs:'];
  for (const id of ids) {
    const prompt = id === 'p-0' ? `A lighthouse, version ${night}` : `A quiet harbour ${id}`;
    lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "${prompt}"`);
  }
  writeFileSync(path, lines.join('\n') + '\n');
}

const recorded = (state: string): string[] => {
  const db = new Database(state, { readonly: true });
  try {
    return (db.prepare('SELECT path FROM previous_files ORDER BY path').pluck().all() as string[]);
  } finally {
    db.close();
  }
};
const currentFiles = (state: string, job: string): string[] => {
  const db = new Database(state, { readonly: true });
  try {
    return db.prepare(`SELECT path FROM files WHERE job_id = ? AND state = 'done'`).pluck().all(job) as string[];
  } finally {
    db.close();
  }
};

describe('genbatch prune', () => {
  it('keeps the newest K generations, removes only recorded files, leaves foreign files and links, and the state forgets what went', async () => {
    const t = tempDir('genbatch-prune-');
    cleanups.push(t.cleanup);
    const manifest = join(t.dir, 'nightly.yaml');
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const run = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'];
    for (let night = 1; night <= 4; night++) {
      writeManifest(manifest, night);
      const r = await runCli(run, { GENBATCH_API_KEY: KEY });
      expect(r.code, r.stderr).toBe(0);
    }
    const gens = readdirSync(join(out, 'p-0')).filter((n) => n.startsWith('previous-')).sort();
    expect(gens).toEqual(['previous-1', 'previous-2', 'previous-3']);
    const all = recorded(state);
    for (const g of gens) expect(all.some((p) => p.startsWith(`p-0/${g}/`))).toBe(true);
    const inGen = (g: string): string[] => all.filter((p) => p.startsWith(`p-0/${g}/`));

    // A file of someone else in a generation; a recorded file replaced by a link to a file outside; a
    // previous-<n> folder the state never recorded.
    writeFileSync(join(out, 'p-0', 'previous-1', 'notes.txt'), 'mine');
    const outside = join(t.dir, 'outside.png');
    writeFileSync(outside, 'not genbatch');
    const linked = inGen('previous-2')[0]!;
    unlinkSync(join(out, linked));
    symlinkSync(outside, join(out, linked));
    writeFileSync(join(out, 'p-1', 'previous-9.txt'), 'x');
    const foreignDir = join(out, 'p-1', 'previous-9');
    await import('node:fs').then((fs) => fs.mkdirSync(foreignDir));
    writeFileSync(join(foreignDir, 'keep.png'), 'x');

    const dry = await runCli(['prune', manifest, '--out', out, '--keep', '1', '--dry-run', '--json']);
    expect(dry.code, dry.stderr).toBe(0);
    const planned = JSON.parse(dry.stdout) as { removed: string[]; removed_dirs: string[]; foreign: string[]; changed: string[]; dry_run: boolean; kept: number };
    expect(planned.dry_run).toBe(true);
    expect(planned.removed.sort()).toEqual([...inGen('previous-1'), ...inGen('previous-2').filter((p) => p !== linked)].sort());
    for (const p of planned.removed) expect(existsSync(join(out, p))).toBe(true);
    expect(recorded(state)).toEqual(all);

    const done = await runCli(['prune', manifest, '--out', out, '--keep', '1', '--json']);
    expect(done.code, done.stderr).toBe(0);
    const res = JSON.parse(done.stdout) as typeof planned;
    expect(res.removed.sort()).toEqual(planned.removed.sort());
    for (const p of res.removed) expect(existsSync(join(out, p))).toBe(false);
    // Left: the foreign file (and so its folder), the link (not followed: the file outside is untouched), the unrecorded folder.
    expect(readFileSync(join(out, 'p-0', 'previous-1', 'notes.txt'), 'utf8')).toBe('mine');
    expect(res.foreign.sort()).toEqual(['p-0/previous-1/notes.txt', 'p-1/previous-9']);
    expect(res.changed).toEqual([linked]);
    expect(lstatSync(join(out, linked)).isSymbolicLink()).toBe(true);
    expect(readFileSync(outside, 'utf8')).toBe('not genbatch');
    expect(readFileSync(join(foreignDir, 'keep.png'), 'utf8')).toBe('x');
    // The newest generation stays whole; the state lists only what is still there.
    for (const p of inGen('previous-3')) expect(existsSync(join(out, p))).toBe(true);
    expect(recorded(state)).toEqual([linked, ...inGen('previous-3')].sort());
    expect(res.kept).toBe(1);

    const p2 = currentFiles(state, 'p-2');
    // An invalid manifest names no jobs it can be trusted on: --removed removes nothing (exit 2).
    writeFileSync(manifest, 'jobs:\n  - id: p-0\n    model: no-such-model\n    input: {}\n');
    const invalid = await runCli(['prune', manifest, '--out', out, '--removed']);
    expect(invalid.code).toBe(2);
    for (const p of p2) expect(existsSync(join(out, p))).toBe(true);

    // --removed: p-2 left the manifest; its result files go, and its folder once empty; the others stay.
    writeManifest(manifest, 4, ['p-0', 'p-1']);
    expect(p2.length).toBeGreaterThan(0);
    const gone = await runCli(['prune', manifest, '--out', out, '--removed', '--json']);
    expect(gone.code, gone.stderr).toBe(0);
    const g = JSON.parse(gone.stdout) as typeof planned;
    expect(g.removed.sort()).toEqual([...p2, 'p-2/result.json'].sort());
    // What the first prune left: the generation folder that holds only the foreign file is now unrecorded as a whole.
    expect(g.foreign.sort()).toEqual(['p-0/previous-1', 'p-1/previous-9']);
    expect(g.changed).toEqual([]); // --keep 3 (the default) keeps previous-2 and its link
    expect(g.removed_dirs).toContain('p-2');
    expect(existsSync(join(out, 'p-2'))).toBe(false);
    expect(currentFiles(state, 'p-2')).toEqual([]);
    for (const p of currentFiles(state, 'p-1')) expect(existsSync(join(out, p))).toBe(true);
    for (const p of currentFiles(state, 'p-0')) expect(existsSync(join(out, p))).toBe(true);
  }, 240_000);
});
