import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A large CSV manifest is read and recorded one job at a time (no list of its jobs is kept): every job is still
 * checked, a bad row far down names its file line and row, a job id used twice names where it was first used,
 * and nothing is stored or submitted (the sync's one transaction is rolled back).
 */
const KEY = 'sk-run-bad-row-0123456789abcdef';
const env = { GENBATCH_API_KEY: KEY };
const ROWS = 3000;
let sb: Sandbox;
const t = tempDir('genbatch-bad-row-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.005, seed: 5 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

/** Rows j0..j(n-1) (file line = row + 1); `bad` replaces rows by their number. */
function manifest(name: string, n: number, bad: Record<number, string> = {}): string {
  const lines = ['id,model,input.prompt'];
  for (let row = 1; row <= n; row++) lines.push(bad[row] ?? `j${row - 1},alpha-image-2,Picture ${row - 1}`);
  const path = join(t.dir, name);
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

it(`a bad row and a reused id among ${ROWS} rows: exit 2 naming each by file line and row; no state left, nothing sent`, async () => {
  const m = manifest('big.csv', ROWS, { 2400: 'j7,alpha-image-2,again', 2900: 'j2899,no-such-model,x' });
  const out = join(t.dir, 'out-big');
  const before = sb.stats().tasks_total;
  const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.005', '--out', out, '--yes'], env);
  expect(r.code).toBe(2);
  expect(r.stderr).toContain('big.csv:2401, row 2400');
  expect(r.stderr).toContain('duplicate id (first used at');
  expect(r.stderr).toContain('big.csv:9, row 8)');
  expect(r.stderr).toContain('big.csv:2901, row 2900');
  expect(existsSync(join(out, 'state.db'))).toBe(false);
  expect(sb.stats().tasks_total).toBe(before);
}, 120_000);

it('the same bad rows against a state of an earlier run: the state keeps what it had', async () => {
  const out = join(t.dir, 'out-small');
  const m = manifest('small.csv', 5);
  const args = (path: string) => ['run', path, '--base-url', sb.url, '--time-scale', '0.005', '--out', out, '--yes'];
  expect((await runCli(args(m), env)).code).toBe(0);
  const done = readJobs(join(out, 'state.db'));
  const before = sb.stats().tasks_total;
  // The same manifest file grown to ROWS rows with the bad ones: the first five unchanged, the rest new.
  manifest('small.csv', ROWS, { 2400: 'j7,alpha-image-2,again', 2900: 'j2899,no-such-model,x' });
  const r = await runCli(args(m), env);
  expect(r.code).toBe(2);
  expect(r.stderr).toContain('small.csv:2901, row 2900');
  expect(readJobs(join(out, 'state.db'))).toEqual(done);
  expect(sb.stats().tasks_total).toBe(before);
}, 120_000);
