import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';

/**
 * metadata.jsonl as a data set needs it: the manifest's variables (a rows file's columns, the matrix values)
 * as columns, each local reference image by its name relative to the manifest (not the temporary URL the
 * upload gave), the review mark, and the same keys on every line. CLI as a child process, the sandbox here.
 */
const SCALE = '0.005';
const KEY = 'sk-export-columns-0123456789abcdef';
const env = { GENBATCH_API_KEY: KEY };

let sb: Sandbox;
const cleanups: Array<() => void> = [];
beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 7, policyWords: [] });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

it('metadata.jsonl carries the rows columns and matrix values, the local reference images by their names, and the marks, with one column set on every line', async () => {
  const t = tempDir('genbatch-export-columns-');
  cleanups.push(t.cleanup);
  mkdirSync(join(t.dir, 'refs'));
  writeFileSync(join(t.dir, 'refs', 'mug.png'), solidPng(64, 64, [200, 40, 40]));
  writeFileSync(join(t.dir, 'products.csv'), 'sku,style,title\nmug-01,studio,a red mug\nlamp-07,outdoor,a brass lamp\n');
  const m = join(t.dir, 'm.yaml');
  writeFileSync(
    m,
    [
      'jobs:',
      '  - id: "{{sku}}-{{size_name}}"',
      '    model: alpha-image-2',
      '    rows: {file: products.csv}',
      '    matrix: {size_name: [square, wide]}',
      '    input: {prompt: "{{title}}, {{style}} photo"}',
      '  - id: edit-mug',
      '    model: dream-4',
      '    input: {prompt: "the mug on a table", image_urls: [refs/mug.png]}',
      '',
    ].join('\n'),
  );
  const out = join(t.dir, 'out');
  const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], env);
  expect(r.code, r.stdout + r.stderr).toBe(0);
  expect((await runCli(['mark', m, '--out', out, '--approve', 'mug-01-square', '--note', 'hero shot'], env)).code).toBe(0);
  expect((await runCli(['mark', m, '--out', out, '--reject', 'lamp-07-wide'], env)).code).toBe(0);
  const to = join(t.dir, 'dataset');
  const e = await runCli(['export', m, '--out', out, '--to', to, '--only', 'done'], env);
  expect(e.code, e.stdout + e.stderr).toBe(0);
  const rows = readFileSync(join(to, 'metadata.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  const keys = Object.keys(rows[0]!);
  for (const row of rows) expect(Object.keys(row)).toEqual(keys);
  const byId = new Map(rows.map((x) => [x.job_id as string, x]));
  expect(byId.get('mug-01-square')).toMatchObject({ sku: 'mug-01', style: 'studio', title: 'a red mug', row: 1, size_name: 'square', mark: 'approved', mark_note: 'hero shot', image_urls: null });
  expect(byId.get('lamp-07-wide')).toMatchObject({ sku: 'lamp-07', style: 'outdoor', title: 'a brass lamp', row: 2, size_name: 'wide', mark: 'rejected', mark_note: null });
  // The reference image by its name beside the manifest, not the sandbox's temporary upload URL.
  expect(byId.get('edit-mug')).toMatchObject({ image_urls: ['refs/mug.png'], sku: null, size_name: null, mark: null });
  expect(JSON.stringify(rows)).not.toContain('http');
}, 60_000);
