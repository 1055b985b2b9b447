import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { localImageRefs } from '../src/manifest/index.js';
import { manifestJsonSchemaText } from '../src/manifest/index.js';
import { readAll } from './helpers/manifest.js';

/** Local image paths in image fields, URL-only fields, and the committed JSON Schema. */

const FIX = join(import.meta.dirname, 'fixtures', 'manifest');
const ROOT = join(import.meta.dirname, '..');
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'genbatch-files-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const all = readAll;

// The smallest valid headers of each accepted format, padded (file-type reads the first bytes).
const HEADS: Record<string, Buffer> = {
  'a.jpg': Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0x01]), Buffer.alloc(64)]),
  'a.gif': Buffer.concat([Buffer.from('GIF89a'), Buffer.alloc(64)]),
  'a.webp': Buffer.concat([Buffer.from('RIFF'), Buffer.from([0x24, 0, 0, 0]), Buffer.from('WEBPVP8 '), Buffer.alloc(64)]),
};

describe('local image files', () => {
  it('accepts existing JPEG, PNG, GIF and WebP files (relative to the manifest) and lists them for upload', async () => {
    mkdirSync(join(dir, 'img'));
    for (const [name, bytes] of Object.entries(HEADS)) writeFileSync(join(dir, 'img', name), bytes);
    copyFileSync(join(FIX, 'ref.png'), join(dir, 'img', 'a.png'));
    const p = join(dir, 'm.yaml');
    writeFileSync(
      p,
      'jobs:\n  - id: e\n    model: dream-4-edit\n    input:\n      prompt: x\n      image_urls: [img/a.jpg, img/a.png, img/a.gif, img/a.webp, "https://x/y.png", "data:image/png;base64,iVBORw0KGgo="]\n',
    );
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(localImageRefs(jobs[0]!)).toEqual([
      { path: 'input.image_urls[0]', file: join(dir, 'img', 'a.jpg') },
      { path: 'input.image_urls[1]', file: join(dir, 'img', 'a.png') },
      { path: 'input.image_urls[2]', file: join(dir, 'img', 'a.gif') },
      { path: 'input.image_urls[3]', file: join(dir, 'img', 'a.webp') },
    ]);
  });

  it('lists single image fields too (start_image_url) and nothing for chat jobs', async () => {
    copyFileSync(join(FIX, 'ref.png'), join(dir, 'first.png'));
    const p = join(dir, 'm.yaml');
    writeFileSync(p, 'jobs:\n  - {id: v, model: clip-2.3, input: {prompt: x, start_image_url: first.png}}\n  - {id: c, model: vendora/chat-5, input: {messages: [{role: user, content: first.png}]}}\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(localImageRefs(jobs[0]!)).toEqual([{ path: 'input.start_image_url', file: join(dir, 'first.png') }]);
    expect(localImageRefs(jobs[1]!)).toEqual([]);
  });

  it('reports a missing file, a folder, an empty file and a file that is not an image, each at its field', async () => {
    mkdirSync(join(dir, 'folder.png'));
    writeFileSync(join(dir, 'empty.png'), '');
    copyFileSync(join(FIX, 'not-image.png'), join(dir, 'text.png'));
    writeFileSync(join(dir, 'doc.pdf'), Buffer.concat([Buffer.from('%PDF-1.4\n'), Buffer.alloc(64)]));
    const p = join(dir, 'm.yaml');
    writeFileSync(p, 'jobs:\n  - id: e\n    model: dream-4-edit\n    input:\n      prompt: x\n      image_urls: [nope.png, folder.png, empty.png, text.png, doc.pdf]\n');
    const { problems } = await all(p);
    expect(problems).toEqual([
      `job e (${p}:6) input.image_urls[0]: local file "nope.png" does not exist`,
      `job e (${p}:6) input.image_urls[1]: local file "folder.png" is not a regular file`,
      `job e (${p}:6) input.image_urls[2]: local file "empty.png" is empty`,
      `job e (${p}:6) input.image_urls[3]: local file "text.png" is not a JPEG, PNG, GIF or WebP image (its bytes say an unknown type)`,
      `job e (${p}:6) input.image_urls[4]: local file "doc.pdf" is not a JPEG, PNG, GIF or WebP image (its bytes say application/pdf)`,
    ]);
  });

  it('names the file as written, also when the manifest folder has a space and the name a "$" (no absolute path left in the message)', async () => {
    const sub = join(dir, 'my images');
    mkdirSync(sub);
    copyFileSync(join(FIX, 'not-image.png'), join(sub, "text $' x.png"));
    writeFileSync(join(sub, 'empty.png'), '');
    const p = join(sub, 'm.yaml');
    writeFileSync(p, 'jobs:\n  - id: e\n    model: dream-4-edit\n    input:\n      prompt: x\n      image_urls: ["text $\' x.png", empty.png, nope.png]\n');
    const { problems } = await all(p);
    expect(problems).toEqual([
      `job e (${p}:6) input.image_urls[0]: local file "text $' x.png" is not a JPEG, PNG, GIF or WebP image (its bytes say an unknown type)`,
      `job e (${p}:6) input.image_urls[1]: local file "empty.png" is empty`,
      `job e (${p}:6) input.image_urls[2]: local file "nope.png" does not exist`,
    ]);
  });

  it('checks a shared file once per path and still reports it on every job that uses it', async () => {
    const p = join(dir, 'm.yaml');
    writeFileSync(p, 'jobs:\n' + [1, 2, 3].map((i) => `  - {id: j${i}, model: alpha-image-2-edit, input: {prompt: x, image_urls: [gone.png]}}\n`).join(''));
    const { problems } = await all(p);
    expect(problems).toHaveLength(3);
    expect(problems[2]).toBe(`job j3 (${p}:4) input.image_urls[0]: local file "gone.png" does not exist`);
  });

  it('rejects a local path in a URL-only field (audio and video sources)', async () => {
    const p = join(dir, 'm.yaml');
    writeFileSync(
      p,
      'jobs:\n  - {id: a, model: upload-and-cover-audio, input: {upload_url: song.mp3, custom_mode: false, prompt: jazz}}\n  - {id: b, model: upload-and-cover-audio, input: {upload_url: "https://example.com/song.mp3", custom_mode: false, prompt: jazz}}\n',
    );
    const { problems } = await all(p);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(new RegExp(`^job a \\(${p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:2\\) input\\.upload_url: .*URL`));
  });

  it('reads local paths in CSV manifests relative to the CSV folder', async () => {
    copyFileSync(join(FIX, 'ref.png'), join(dir, 'r.png'));
    const p = join(dir, 'jobs.csv');
    writeFileSync(p, 'id,model,input.prompt,input.image_urls\nk,kontext-pro-edit,x,"[""r.png""]"\nl,kontext-pro-edit,x,"[""missing.png""]"\n');
    const { jobs, problems } = await all(p);
    expect(localImageRefs(jobs[0]!)).toEqual([{ path: 'input.image_urls[0]', file: join(dir, 'r.png') }]);
    expect(problems).toEqual([`job l (${p}:3, row 2) input.image_urls[0]: local file "missing.png" does not exist`]);
  });
});

describe('manifest JSON Schema', () => {
  it('matches the committed manifests/genbatch.schema.json (regenerate: npx tsc -p . && node dist/manifest/write-schema.js)', () => {
    expect(readFileSync(join(ROOT, 'manifests', 'genbatch.schema.json'), 'utf8')).toBe(manifestJsonSchemaText());
  });

  it('is referenced by every example YAML manifest', () => {
    for (const name of ['images.yaml', 'video.yaml', 'music.yaml', 'chat.yaml', 'parti.yaml']) {
      expect(readFileSync(join(ROOT, 'manifests', name), 'utf8').split('\n')[0]).toBe('# yaml-language-server: $schema=./genbatch.schema.json');
    }
  });
});
