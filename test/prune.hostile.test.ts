import { cpSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * `genbatch prune` against what someone else left in the output folder: it removes only what the state records as
 * genbatch's (and the folders genbatch made, once empty); anything else is left and listed. A run of three nights
 * against the in-process sandbox (job p-0 made again each night: previous-1/, previous-2/), copied per test.
 */
const SCALE = '0.005';
const KEY = 'sk-prune-hostile-01';
let sb: Sandbox;
let made: string;
const t = tempDir('genbatch-prune-hostile-');

function writeManifest(path: string, night: number, ids = ['p-0', 'p-1']): void {
  const lines = ['jobs:'];
  for (const id of ids) {
    const prompt = id === 'p-0' ? `A lighthouse, version ${night}` : `A quiet harbour ${id}`;
    lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "${prompt}"`);
  }
  writeFileSync(path, lines.join('\n') + '\n');
}

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 4 });
  made = join(t.dir, 'made');
  mkdirSync(made);
  const manifest = join(made, 'nightly.yaml');
  for (let night = 1; night <= 3; night++) {
    writeManifest(manifest, night);
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', join(made, 'out'), '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
  }
  expect(existsSync(join(made, 'out', 'p-0', 'previous-2'))).toBe(true);
}, 120_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

/** A copy of the three nights' output folder and state (the run is the manifest's, by its path: the one manifest). */
function copy(name: string): { manifest: string; out: string } {
  const out = join(t.dir, name);
  cpSync(join(made, 'out'), out, { recursive: true });
  return { manifest: join(made, 'nightly.yaml'), out };
}

interface PruneJson {
  removed: string[];
  removed_dirs: string[];
  foreign: string[];
  changed: string[];
}

describe('genbatch prune and folders it does not record', () => {
  it('leaves an empty folder someone made inside a generation it prunes, and lists it', async () => {
    const { manifest, out } = copy('empty-foreign');
    mkdirSync(join(out, 'p-0', 'previous-1', 'keep-me'));
    const r = await runCli(['prune', manifest, '--out', out, '--keep', '1', '--json']);
    expect(r.code, r.stderr).toBe(0);
    const res = JSON.parse(r.stdout) as PruneJson;
    expect(existsSync(join(out, 'p-0', 'previous-1', 'keep-me'))).toBe(true);
    expect(res.removed_dirs).not.toContain('p-0/previous-1/keep-me');
    expect(res.removed_dirs).not.toContain('p-0/previous-1');
    expect(res.foreign).toContain('p-0/previous-1/keep-me');
    // The recorded files of the generation went all the same.
    expect(res.removed.filter((p) => p.startsWith('p-0/previous-1/')).length).toBeGreaterThan(0);
  }, 60_000);

  it('with --removed, leaves an empty folder someone made in a removed job\'s folder, and lists it', async () => {
    const { manifest, out } = copy('empty-foreign-removed');
    mkdirSync(join(out, 'p-1', 'notes'));
    writeManifest(manifest, 3, ['p-0']);
    const r = await runCli(['prune', manifest, '--out', out, '--removed', '--json']);
    writeManifest(manifest, 3);
    expect(r.code, r.stderr).toBe(0);
    const res = JSON.parse(r.stdout) as PruneJson;
    expect(existsSync(join(out, 'p-1', 'notes'))).toBe(true);
    expect(res.foreign).toContain('p-1/notes');
    expect(res.removed_dirs).toEqual([]);
    expect(res.removed.some((p) => p.startsWith('p-1/'))).toBe(true);
  }, 60_000);
});
