import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * Uploaded references are immutable under their URL: two different local images with
 * the same file name (a/ref.png, b/ref.png) must not end up at one service path, where
 * the second upload replaces the first and both jobs are sent the second image.
 */
const SCALE = '0.005';
const KEY = 'sk-upload-names-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-up-names-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 5 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

function sentUrls(statePath: string): Record<string, string> {
  const db = new Database(statePath, { readonly: true });
  try {
    const rows = db.prepare('SELECT id, submitted_input FROM jobs ORDER BY seq').all() as Array<{ id: string; submitted_input: string }>;
    return Object.fromEntries(rows.map((r) => [r.id, (JSON.parse(r.submitted_input) as { image_urls: string[] }).image_urls[0]!]));
  } finally {
    db.close();
  }
}

describe('uploads of images that share a file name', () => {
  it('two different images named ref.png in two folders keep their own bytes at the service (each job is sent its own image)', async () => {
    const a = solidPng(8, 8, [200, 10, 10]);
    const b = solidPng(8, 8, [10, 10, 200]);
    mkdirSync(join(t.dir, 'a'));
    mkdirSync(join(t.dir, 'b'));
    writeFileSync(join(t.dir, 'a', 'ref.png'), a);
    writeFileSync(join(t.dir, 'b', 'ref.png'), b);
    const manifest = join(t.dir, 'm.yaml');
    writeFileSync(
      manifest,
      ['jobs:', '  - id: ja', '    model: alpha-image-2-edit', '    input:', '      prompt: "edit a"', '      image_urls: ["a/ref.png"]',
        '  - id: jb', '    model: alpha-image-2-edit', '    input:', '      prompt: "edit b"', '      image_urls: ["b/ref.png"]'].join('\n') + '\n',
    );
    const out = join(t.dir, 'out');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', '--concurrency', '1'], { GENBATCH_API_KEY: KEY });
    expect(r.code).toBe(0);
    expect(readJobs(join(out, 'state.db')).map((j) => j.state)).toEqual(['done', 'done']);
    const urls = sentUrls(join(out, 'state.db'));
    expect(urls.ja).not.toBe(urls.jb);
    // What the service holds at each URL sent is that job's own image.
    const got = async (u: string) => Buffer.from(await (await fetch(u)).arrayBuffer());
    expect((await got(urls.ja!)).equals(a)).toBe(true);
    expect((await got(urls.jb!)).equals(b)).toBe(true);
  });
});
