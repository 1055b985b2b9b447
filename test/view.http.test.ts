import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { Store } from '../src/store/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { pageRows } from './helpers/page.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess, type ViewProcess } from './helpers/view.js';

/**
 * `genbatch view` over HTTP (no browser): its first line, the token every state-changing request needs, the
 * Host check, files served only from inside the output folder, live changes and marks written to the state
 * file. A finished run against the in-process sandbox; the view as a child process.
 */
const KEY = 'sk-view-http-0123456789abcdef';
let sb: Sandbox;
let view: ViewProcess;
let out: string;
let root: string;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.001, seed: 3 });
  const t = tempDir('genbatch-view-http-');
  cleanups.push(t.cleanup);
  root = t.dir;
  out = join(root, 'out');
  const m = imageManifest(join(root, 'm.yaml'), 3);
  const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.001', '--out', out], { GENBATCH_API_KEY: KEY });
  expect(r.code, r.stderr).toBe(0);
  writeFileSync(join(root, 'secret.txt'), 'outside the output folder');
  view = await startViewProcess(['--out', out]);
}, 60_000);
afterAll(async () => {
  await view?.stop();
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

/** A read with the view's token (every route needs it). */
const get = (path: string, headers: Record<string, string> = {}) => rawRequest(view.port, path, { headers: { 'x-genbatch-token': view.token, ...headers } });

const post = (body: unknown, headers: Record<string, string> = {}) =>
  rawRequest(view.port, '/api/marks', { method: 'POST', headers: { 'content-type': 'application/json', host: `127.0.0.1:${view.port}`, ...headers }, body: JSON.stringify(body) });

describe('genbatch view over HTTP', () => {
  it('prints its URL with a token on the first line and serves the gallery with every prompt', async () => {
    expect(view.token.length).toBeGreaterThanOrEqual(24);
    const page = await get('/');
    expect(page.status).toBe(200);
    for (let i = 0; i < 3; i++) expect(page.body).toContain(`Picture number ${i} of a quiet harbour`);
    expect(page.body).not.toContain(KEY);
  });

  it('refuses a POST without the token, or with a wrong one (403), and writes nothing', async () => {
    expect((await post({ ids: ['img-0000'], mark: 'rejected' })).status).toBe(403);
    expect((await post({ ids: ['img-0000'], mark: 'rejected' }, { 'x-genbatch-token': view.token.slice(1) + 'x' })).status).toBe(403);
    const store = Store.openForRead(join(out, 'state.db'));
    try {
      store.useRun(store.runs()[0]!);
      expect(store.markOf('img-0000')).toBeNull();
    } finally {
      store.close();
    }
  });

  it('refuses a request whose Host header is not the bound address, localhost or 127.0.0.1 (DNS rebinding)', async () => {
    for (const host of ['evil.example', `evil.example:${view.port}`, `127.0.0.1:${view.port + 1}`]) {
      expect((await get('/', { host })).status).toBe(403);
      expect((await get('/api/jobs', { host })).status).toBe(403);
    }
    expect((await get('/api/jobs', { host: `localhost:${view.port}` })).status).toBe(200);
    const withToken = await post({ ids: ['img-0000'], mark: 'approved' }, { 'x-genbatch-token': view.token, host: `evil.example:${view.port}` });
    expect(withToken.status).toBe(403);
  });

  it('serves files of the output folder only: no "..", no encoded slash, no symlink out, not the state file', async () => {
    const file = (await get('/files/img-0000/image-1.png')).status === 200 ? 'image-1.png' : 'image-1.jpeg';
    const ok = await get(`/files/img-0000/${file}`);
    expect(ok.status).toBe(200);
    symlinkSync(join(root, 'secret.txt'), join(out, 'img-0000', 'link.txt'));
    mkdirSync(join(out, 'inside'));
    symlinkSync(root, join(out, 'inside', 'up'));
    for (const path of ['/files/../secret.txt', '/files/%2e%2e/secret.txt', '/files/img-0000/..%2f..%2fsecret.txt', '/files/img-0000%2f..%2f..%2fsecret.txt', '/files/img-0000/link.txt', '/files/inside/up/secret.txt', '/files/state.db', '/files//etc/passwd', '/files/%00']) {
      const r = await get(path);
      expect(r.status, path).toBe(404);
      expect(r.body).not.toContain('outside the output folder');
    }
  });

  it('marks through POST /api/marks with the token, as genbatch mark does, and the next poll brings the marked row', async () => {
    const first = JSON.parse((await get('/api/jobs?since=&gen=0')).body) as { since: string; gen: number; rows: unknown[][] };
    expect(first.rows.map((r) => r[0])).toEqual(['img-0000', 'img-0001', 'img-0002']);
    const idle = JSON.parse((await get(`/api/jobs?since=${encodeURIComponent(first.since)}&gen=${first.gen}`)).body) as { rows: unknown[] };
    expect(idle.rows).toEqual([]);
    const r = await post({ ids: ['img-0001', 'img-0002'], mark: 'rejected', note: 'too dark' }, { 'x-genbatch-token': view.token });
    expect(r.status, r.body).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ changed: 2, ids: ['img-0001', 'img-0002'], mark: 'rejected' });
    const next = JSON.parse((await get(`/api/jobs?since=${encodeURIComponent(first.since)}&gen=${first.gen}`)).body) as { rows: unknown[][] };
    const marked = next.rows.filter((row) => row[13] !== null).map((row) => [row[0], row[13]]);
    expect(marked).toEqual([
      ['img-0001', ['rejected', 'too dark']],
      ['img-0002', ['rejected', 'too dark']],
    ]);
    const store = Store.openForRead(join(out, 'state.db'));
    try {
      store.useRun(store.runs()[0]!);
      expect(store.markOf('img-0001')).toMatchObject({ state: 'rejected', note: 'too dark' });
    } finally {
      store.close();
    }
  });

  it('answers a mark of a job that is not in the run with 400 naming it', async () => {
    const r = await post({ ids: ['nope-1'], mark: 'approved' }, { 'x-genbatch-token': view.token });
    expect(r.status).toBe(400);
    expect((JSON.parse(r.body) as { error: string }).error).toContain('"nope-1" is not a job of the run');
    const bad = await post({ ids: ['img-0000'], mark: 'maybe' }, { 'x-genbatch-token': view.token });
    expect(bad.status).toBe(400);
  });

  it('shows a job in full at /job/<id>: input as sent, files with size and sha256', async () => {
    const r = await get('/job/img-0000');
    expect(r.status).toBe(200);
    const sha = /<td class="tok">([0-9a-f]{64})<\/td>/.exec(r.body)?.[1];
    const file = readFileSync(join(out, 'report.json'), 'utf8');
    expect(file).toContain(sha);
    expect(r.body).toContain('Input as sent');
    expect((await get('/job/nope')).status).toBe(404);
  });

  it('is exit 2 with a clear message for a missing state file or a port out of range', async () => {
    const missing = await runCli(['view', '--state', join(root, 'nope.db'), '--port', '0']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain(`no state file at ${join(root, 'nope.db')}`);
    const port = await runCli(['view', '--out', out, '--port', '70000']);
    expect(port.code).toBe(2);
    expect(port.stderr).toContain('--port expects an integer');
  });

  it('stops on SIGTERM with exit code 0', async () => {
    const other = await startViewProcess(['--out', out]);
    expect(await other.stop()).toBe(0);
  });

  it('writes the reports again when it stops after marks were made in it, so report.json shows them', async () => {
    expect(readFileSync(join(out, 'report.json'), 'utf8')).not.toContain('too dark');
    expect(await view.stop()).toBe(0);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; mark: { state: string; note: string } | null }> };
    expect(report.jobs.map((j) => [j.id, j.mark?.state ?? null, j.mark?.note ?? null])).toEqual([
      ['img-0000', null, null],
      ['img-0001', 'rejected', 'too dark'],
      ['img-0002', 'rejected', 'too dark'],
    ]);
    expect(pageRows(readFileSync(join(out, 'report.html'), 'utf8')).rows.map((r) => r.mark)).toEqual([null, ['rejected', 'too dark'], ['rejected', 'too dark']]);
  });
});
