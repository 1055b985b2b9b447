import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, genbatch } from './fixtures/manifest/cli.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';

/**
 * `--confine` / GENBATCH_CONFINE=1 (issue #16 item 7): every file a manifest names (rows files, glob
 * patterns and their matches, local image paths) must be inside the manifest's folder, symbolic links
 * resolved. Before, `glob: ../../../../etc/*.conf` and `rows: {file: ...}` read anywhere. Without the
 * flag, nothing changes (trusted manifests).
 */

const tmp = tempDir('genbatch-confine-');
const M = join(tmp.dir, 'm');
const OUT = join(tmp.dir, 'outside');
const WHY = `is outside the manifest's folder ${M} (--confine: a manifest may name only files inside its folder, symbolic links resolved)`;
const via = (target: string) => `resolves to ${target} through a symbolic link, outside the manifest's folder ${M} (--confine: a manifest may name only files inside its folder, symbolic links resolved)`;

beforeAll(() => {
  ensureBuilt();
  mkdirSync(join(M, 'data'), { recursive: true });
  mkdirSync(OUT);
  const png = solidPng(8, 8, [200, 30, 30]);
  writeFileSync(join(OUT, 'rows.csv'), 'prompt\nsecret\n');
  writeFileSync(join(OUT, 'secret.png'), png);
  writeFileSync(join(M, 'data', 'rows.csv'), 'prompt\nfine\n');
  writeFileSync(join(M, 'data', 'ok.png'), png);
  symlinkSync(join(OUT, 'rows.csv'), join(M, 'data', 'link.csv'));
  symlinkSync(OUT, join(M, 'linkdir'));
  writeFileSync(
    join(M, 'hostile.yaml'),
    [
      'jobs:',
      '  - {id: "r-{{row}}", model: alpha-image-2, rows: {file: ../outside/rows.csv}, input: {prompt: "{{prompt}}"}}',
      '  - {id: "l-{{row}}", model: alpha-image-2, rows: {file: data/link.csv}, input: {prompt: "{{prompt}}"}}',
      '  - {id: "g-{{name}}", model: alpha-image-2, glob: "../outside/*.png", input: {prompt: x}}',
      '  - {id: "gl-{{name}}", model: alpha-image-2, glob: "linkdir/*.png", input: {prompt: x}}',
      `  - {id: abs, model: dream-4, input: {prompt: x, image_urls: [${join(OUT, 'secret.png')}]}}`,
      '  - {id: img, model: dream-4, input: {prompt: x, image_urls: [linkdir/secret.png]}}',
      '  - {id: "ok-{{row}}", model: dream-4, rows: {file: data/rows.csv}, input: {prompt: "{{prompt}}", image_urls: [data/ok.png]}}',
      '  - {id: "okg-{{name}}", model: alpha-image-2, glob: "data/*.png", input: {prompt: x}}',
      '',
    ].join('\n'),
  );
  writeFileSync(join(M, 'jobs.csv'), `id,model,input.prompt,input.image_urls[0]\nup,dream-4,x,../outside/secret.png\nin,dream-4,x,data/ok.png\n`);
}, 180_000);
afterAll(() => tmp.cleanup());

const HOSTILE_PROBLEMS = [
  `${M}/hostile.yaml:2 rows.file: "../outside/rows.csv" ${WHY}`,
  `${M}/hostile.yaml:3 rows.file: "data/link.csv" ${via(join(OUT, 'rows.csv'))}`,
  `${M}/hostile.yaml:4 glob: "../outside/*.png" leaves the manifest's folder (--confine: patterns are relative to ${M}, without "..")`,
  `${M}/hostile.yaml:5 glob: matches "linkdir/secret.png", which ${via(join(OUT, 'secret.png'))}`,
  `job abs (${M}/hostile.yaml:6) input.image_urls[0]: local file ${JSON.stringify(join(OUT, 'secret.png'))} ${WHY}`,
  `job img (${M}/hostile.yaml:7) input.image_urls[0]: local file "linkdir/secret.png" ${via(join(OUT, 'secret.png'))}`,
];

describe('--confine', () => {
  it('without it, a manifest may name files outside its folder (trusted manifests)', async () => {
    const r = await genbatch(['validate', join(M, 'hostile.yaml')]);
    expect(r).toEqual({ code: 0, stdout: `${M}/hostile.yaml: 8 jobs, all valid\n`, stderr: '' });
  });

  it('validate --confine: exit 2, one problem per file outside (paths, symlinked files and folders, glob patterns and matches); files inside pass', async () => {
    const r = await genbatch(['validate', '--confine', join(M, 'hostile.yaml')]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.trimEnd().split('\n')).toEqual(HOSTILE_PROBLEMS);
  });

  it('GENBATCH_CONFINE=1 does the same for estimate', async () => {
    const r = await genbatch(['estimate', '--offline', join(M, 'hostile.yaml')], { GENBATCH_CONFINE: '1' });
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split('\n')).toEqual(HOSTILE_PROBLEMS);
  });

  it('a CSV job list: the image cell outside is a problem of its job and row', async () => {
    const r = await genbatch(['validate', '--confine', join(M, 'jobs.csv')]);
    expect(r).toEqual({ code: 2, stdout: '', stderr: `job up (${M}/jobs.csv:2, row 1) input.image_urls[0]: local file "../outside/secret.png" ${WHY}\n` });
  });

  it('run --confine refuses before anything is uploaded or submitted', async () => {
    const out = join(tmp.dir, 'run-out');
    const r = await genbatch(['run', '--confine', '--sandbox', '--yes', '--time-scale', '0.01', '--out', out, join(M, 'jobs.csv')]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`job up (${M}/jobs.csv:2, row 1) input.image_urls[0]: local file "../outside/secret.png" ${WHY}`);
    expect(existsSync(join(out, 'up'))).toBe(false);
    expect(existsSync(join(out, 'in'))).toBe(false);
  });
});
