import { mkdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess, type ViewProcess } from './helpers/view.js';

/**
 * GET /ref/<job id>/<n> (no browser): a job's local reference image is served only as the bytes the run
 * recorded (sha256), as an image, from a regular file reached without a symbolic link; anything else is 404.
 */
const KEY = 'sk-view-refs-0123456789abcdef';
let sb: Sandbox;
let view: ViewProcess;
let dir: string;
const cleanups: Array<() => void> = [];
const png = solidPng(40, 30, [20, 120, 220]);

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.001, seed: 9, policyWords: [] });
  const t = tempDir('genbatch-view-refs-');
  cleanups.push(t.cleanup);
  dir = t.dir;
  mkdirSync(join(dir, 'refs'));
  writeFileSync(join(dir, 'refs', 'cup.png'), png);
  writeFileSync(join(dir, 'm.yaml'), 'jobs:\n  - id: edit-cup\n    model: dream-4\n    input: {prompt: "the cup at night", image_urls: [refs/cup.png]}\n');
  const r = await runCli(['run', join(dir, 'm.yaml'), '--base-url', sb.url, '--time-scale', '0.001', '--out', join(dir, 'out'), '--yes'], { GENBATCH_API_KEY: KEY });
  expect(r.code, r.stdout + r.stderr).toBe(0);
  view = await startViewProcess(['--out', join(dir, 'out')]);
}, 60_000);
afterAll(async () => {
  await view?.stop();
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

const get = (path: string) => rawRequest(view.port, path, { headers: { 'x-genbatch-token': view.token } });

it('serves the recorded reference image, and 404 for a changed file, a symbolic link, another index or job, 403 without the token', async () => {
  const ok = await get('/ref/edit-cup/0');
  expect(ok.status).toBe(200);
  expect(Buffer.from(ok.body, 'latin1').length).toBeGreaterThan(0);
  const page = await get('/job/edit-cup');
  expect(page.body).toContain('src="/ref/edit-cup/0"');
  expect(page.body).toContain('refs/cup.png');
  expect((await get('/ref/edit-cup/1')).status).toBe(404);
  expect((await get('/ref/nope/0')).status).toBe(404);
  expect((await get('/ref/edit-cup/..%2F0')).status).toBe(404);
  expect((await rawRequest(view.port, '/ref/edit-cup/0')).status).toBe(403);
  // Other bytes under the same name: not what the run sent.
  writeFileSync(join(dir, 'refs', 'cup.png'), solidPng(40, 30, [1, 2, 3]));
  expect((await get('/ref/edit-cup/0')).status).toBe(404);
  // The recorded bytes again, but reached through a symbolic link: refused.
  writeFileSync(join(dir, 'elsewhere.png'), png);
  renameSync(join(dir, 'refs', 'cup.png'), join(dir, 'refs', 'old.png'));
  symlinkSync(join(dir, 'elsewhere.png'), join(dir, 'refs', 'cup.png'));
  expect((await get('/ref/edit-cup/0')).status).toBe(404);
  expect(readFileSync(join(dir, 'elsewhere.png')).equals(png)).toBe(true);
});
