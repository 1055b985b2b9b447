import { mkdirSync, readdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess, type ViewProcess } from './helpers/view.js';

/**
 * `genbatch view` keeps a run's prompts and results to whoever holds its token: every route, reads included,
 * is refused without it (another user of the machine can reach 127.0.0.1 too); the printed URL sets an
 * HttpOnly, SameSite=Strict cookie and leads to the clean URL; a write must come from the view's own Origin.
 * The job page lists only regular files inside the output folder: a previous-<n>/ or result.json that is a
 * symbolic link leading out is not followed. Plain HTTP (node:http), the view as a child process.
 */
const KEY = 'sk-view-auth-0123456789abcdef';
let sb: Sandbox;
let view: ViewProcess;
let out: string;
let root: string;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.001, seed: 4 });
  const t = tempDir('genbatch-view-auth-');
  cleanups.push(t.cleanup);
  root = t.dir;
  out = join(root, 'out');
  const m = imageManifest(join(root, 'm.yaml'), 2);
  const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.001', '--out', out], { GENBATCH_API_KEY: KEY });
  expect(r.code, r.stderr).toBe(0);
  view = await startViewProcess(['--out', out]);
}, 60_000);
afterAll(async () => {
  await view?.stop();
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

const host = () => `127.0.0.1:${view.port}`;
const cookieName = () => `genbatch_view_${view.port}`;

function getRaw(path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; headers: Record<string, string | string[] | undefined> }> {
  return new Promise((resolve, reject) => {
    import('node:http').then(({ request }) => {
      const req = request({ host: '127.0.0.1', port: view.port, path, headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      });
      req.on('error', reject);
      req.end();
    }, reject);
  });
}

const marks = (headers: Record<string, string>) =>
  rawRequest(view.port, '/api/marks', { method: 'POST', headers: { 'content-type': 'application/json', host: host(), ...headers }, body: JSON.stringify({ ids: ['img-0000'], mark: 'approved' }) });

describe('genbatch view: the token guards every route', () => {
  it('refuses every read without the token (403), showing no prompt', async () => {
    const file = readdirSync(join(out, 'img-0000')).find((n) => n.startsWith('image-'))!;
    for (const path of ['/', '/api/jobs?since=&gen=0', '/job/img-0000', `/files/img-0000/${file}`, '/files/img-0000/result.json', '/favicon.ico']) {
      const r = await rawRequest(view.port, path);
      expect(r.status, path).toBe(403);
      expect(r.body).not.toContain('quiet harbour');
      const wrong = await rawRequest(view.port, path, { headers: { cookie: `${cookieName()}=${view.token.slice(1)}x`, 'x-genbatch-token': 'nope' } });
      expect(wrong.status, path).toBe(403);
    }
    expect((await rawRequest(view.port, `/?token=${view.token.slice(1)}x`)).status).toBe(403);
  });

  it('the printed URL sets an HttpOnly, SameSite=Strict cookie and redirects to the clean URL; the cookie then reads', async () => {
    const first = await getRaw(`/job/img-0001?token=${view.token}`);
    expect(first.status).toBe(303);
    expect(first.headers.location).toBe('/job/img-0001');
    const cookie = String(first.headers['set-cookie']);
    expect(cookie).toContain(`${cookieName()}=${view.token}`);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    const page = await getRaw('/job/img-0001', { cookie: `other=1; ${cookieName()}=${view.token}` });
    expect(page.status).toBe(200);
    expect(page.body).toContain('quiet harbour');
    expect(page.body).not.toContain(view.token);
    expect((await getRaw('/', { cookie: `${cookieName()}=${view.token}` })).body).not.toContain(view.token);
  });

  it('a write with the cookie must come from the view\'s own Origin; without an Origin it needs the header', async () => {
    const cookie = `${cookieName()}=${view.token}`;
    expect((await marks({ cookie, origin: 'http://evil.example' })).status).toBe(403);
    expect((await marks({ cookie, origin: `http://127.0.0.1:${view.port + 1}` })).status).toBe(403);
    expect((await marks({ cookie })).status).toBe(403);
    const ok = await marks({ cookie, origin: `http://${host()}` });
    expect(ok.status, ok.body).toBe(200);
    expect((await marks({ 'x-genbatch-token': view.token })).status).toBe(200);
  });
});

describe('genbatch view: the job page follows no link', () => {
  it('a previous-1/ or result.json that is a symbolic link leading out is not listed, and nothing of it is read', async () => {
    const outside = join(root, 'outside');
    mkdirSync(outside);
    writeFileSync(join(outside, 'private-photo.png'), 'private bytes');
    writeFileSync(join(outside, 'private.json'), '{"secret": true}');
    symlinkSync(outside, join(out, 'img-0001', 'previous-1'));
    const kept = join(out, 'img-0001', 'result.json.kept');
    renameSync(join(out, 'img-0001', 'result.json'), kept);
    symlinkSync(join(outside, 'private.json'), join(out, 'img-0001', 'result.json'));
    try {
      const r = await rawRequest(view.port, '/job/img-0001', { headers: { 'x-genbatch-token': view.token } });
      expect(r.status).toBe(200);
      expect(r.body).not.toContain('private-photo.png');
      expect(r.body).not.toContain('previous-1');
      expect(r.body).not.toContain('img-0001/result.json');
      expect((await rawRequest(view.port, '/files/img-0001/previous-1/private-photo.png', { headers: { 'x-genbatch-token': view.token } })).status).toBe(404);
    } finally {
      rmSync(join(out, 'img-0001', 'previous-1'));
      rmSync(join(out, 'img-0001', 'result.json'));
      renameSync(kept, join(out, 'img-0001', 'result.json'));
    }
  });

  it('a real previous-<n>/ is listed with the sizes of its regular files and the sha256 its result.json recorded, nothing hashed', async () => {
    const prev = join(out, 'img-0000', 'previous-2');
    mkdirSync(prev);
    writeFileSync(join(prev, 'image-1.png'), 'earlier bytes');
    const recorded = 'a'.repeat(64);
    writeFileSync(join(prev, 'result.json'), JSON.stringify({ job_id: 'img-0000', files: [{ path: 'img-0000/image-1.png', sha256: recorded }] }));
    symlinkSync(join(root, 'm.yaml'), join(prev, 'linked.yaml'));
    try {
      const r = await rawRequest(view.port, '/job/img-0000', { headers: { 'x-genbatch-token': view.token } });
      expect(r.body).toContain('img-0000/previous-2/image-1.png');
      expect(r.body).toContain(recorded);
      expect(r.body).toContain('not recorded'); // result.json itself: listed, its sha256 recorded nowhere
      expect(r.body).not.toContain('linked.yaml');
    } finally {
      rmSync(prev, { recursive: true });
    }
  });
});
