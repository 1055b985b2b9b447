import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/** `genbatch status` with no argument finds the run of the current folder (the CLI as a child process, run with --sandbox). */

const t = tempDir('genbatch-status-');
beforeAll(() => ensureBuilt(), 180_000);
afterAll(() => t.cleanup());

const run = (dir: string, manifest: string) => runCli(['run', manifest, '--sandbox', '--time-scale', '0.002'], {}, dir);

describe('genbatch status with no argument', () => {
  it('reads the run of the manifest in the current folder, and --jobs starts with a header row', async () => {
    const dir = join(t.dir, 'one');
    mkdirSync(dir);
    imageManifest(join(dir, 'cats.yaml'), 2, 'cat');
    expect((await run(dir, 'cats.yaml')).code).toBe(0);
    const st = await runCli(['status'], {}, dir);
    expect(st.stderr).toBe('');
    expect(st.code).toBe(0);
    expect(st.stdout).toContain(join(dir, 'cats.yaml'));
    expect(st.stdout).toContain('2 jobs: 2 done');
    const jobs = (await runCli(['status', '--jobs'], {}, dir)).stdout.split('\n');
    const header = jobs.findIndex((l) => l.startsWith('  id\t'));
    expect(jobs[header]).toBe('  id\tstate\tmodel\ttask_id\tattempts\terror');
    expect(jobs.slice(header + 1, header + 3).map((l) => l.split('\t').slice(0, 3))).toEqual([
      ['  cat-0000', 'done', 'alpha-image-2'],
      ['  cat-0001', 'done', 'alpha-image-2'],
    ]);
    // From inside the output folder: its state.db.
    const inside = await runCli(['status', '--json'], {}, join(dir, 'genbatch-out', 'cats.sandbox'));
    expect(JSON.parse(inside.stdout)).toMatchObject({ manifest: join(dir, 'cats.yaml'), counts: { done: 2 } });
  });

  it('says how to name a run when the folder has none, or several', async () => {
    const empty = join(t.dir, 'empty');
    mkdirSync(empty);
    const none = await runCli(['status'], {}, empty);
    expect(none.code).toBe(2);
    expect(none.stderr).toBe(
      'genbatch: no run found in this folder (no state.db here, and no genbatch-out/<manifest name>/state.db, where genbatch run puts it by default); name one: genbatch status <manifest>, --out DIR or --state PATH\n',
    );
    const two = join(t.dir, 'two');
    mkdirSync(two);
    imageManifest(join(two, 'a.yaml'), 1, 'a');
    imageManifest(join(two, 'b.yaml'), 1, 'b');
    expect((await run(two, 'a.yaml')).code).toBe(0);
    expect((await run(two, 'b.yaml')).code).toBe(0);
    const several = await runCli(['status'], {}, two);
    expect(several.code).toBe(2);
    expect(several.stderr).toBe(
      `genbatch: 2 runs found in this folder (${join('genbatch-out', 'a.sandbox', 'state.db')}, ${join('genbatch-out', 'b.sandbox', 'state.db')}); name one: genbatch status <manifest>, --out DIR or --state PATH\n`,
    );
    expect((await runCli(['status', 'b.yaml'], {}, two)).stdout).toContain('1 jobs: 1 done');
    const report = await runCli(['report'], {}, two);
    expect(report.code).toBe(2);
    expect(report.stderr).toContain('name one: genbatch report <manifest>');
  });

  it('a run against the service beside --sandbox runs (the demo, then the real one): status takes the real run and names the others', async () => {
    const both = join(t.dir, 'both');
    mkdirSync(both);
    imageManifest(join(both, 'a.yaml'), 1, 'a');
    expect((await run(both, 'a.yaml')).code).toBe(0);
    // The real run's state, as `genbatch run a.yaml` against a service leaves it (its rows as the sandbox run's).
    mkdirSync(join(both, 'genbatch-out', 'a'));
    copyFileSync(join(both, 'genbatch-out', 'a.sandbox', 'state.db'), join(both, 'genbatch-out', 'a', 'state.db'));
    const st = await runCli(['status'], {}, both);
    expect(st.code, st.stderr).toBe(0);
    expect(st.stderr).toBe(`genbatch: status: the run in ${join('genbatch-out', 'a')} (not the --sandbox run beside it: ${join('genbatch-out', 'a.sandbox')}; name one with --out DIR)\n`);
    expect(st.stdout).toContain('1 jobs: 1 done');
  });
});
