import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ObjectOut } from '../src/storage/index.js';
import { bucketOutput, folderOutput, type RunOutput } from '../src/view/output.js';
import { solidPng } from './helpers/png.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from './helpers/s3.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The view's /files/ serves a result's bytes with the type they show, never with the type of their name or
 * of the object in the bucket: HTML, SVG, text and a page named `.png` are downloads (application/octet-stream,
 * Content-Disposition attachment), a PNG is image/png. Both outputs: a folder and a bucket prefix (whose
 * objects were stored as an older run did, with the service's text/html).
 */

const PNG = solidPng(4, 4, [10, 200, 30]);
const PAGE = Buffer.from('<!doctype html><html><body><script>document.title = "pwned"</script></body></html>');
const SVG = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>');
const FILES: Record<string, Buffer> = {
  'job/page.html': PAGE,
  'job/pic.svg': SVG,
  'job/fake.png': PAGE,
  'job/note.txt': Buffer.from('plain words <b>bold</b>'),
  'job/real.png': PNG,
  'job/real.html': PNG,
};
const INERT = { type: 'application/octet-stream', disposition: 'attachment' };
const WANT: Record<string, { type: string; disposition: string | null }> = {
  'job/page.html': INERT,
  'job/pic.svg': INERT,
  'job/fake.png': INERT,
  'job/note.txt': INERT,
  'job/real.png': { type: 'image/png', disposition: null },
  'job/real.html': { type: 'image/png', disposition: null },
};

let s3: TestS3;
const t = tempDir('genbatch-view-inert-');
beforeAll(async () => {
  s3 = await startS3();
  for (const [rel, body] of Object.entries(FILES)) {
    mkdirSync(join(t.dir, 'job'), { recursive: true });
    writeFileSync(join(t.dir, rel), body);
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: `old/${rel}`, Body: body, ContentType: 'text/html' }));
  }
}, 60_000);
afterAll(async () => {
  await s3?.stop();
  t.cleanup();
});

/** An HTTP server that answers /files/<path> from `output` (as the view does), on a free port. */
async function serve(output: RunOutput): Promise<{ base: string; server: Server }> {
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname.slice('/files/'.length);
    void output.send(res, path, req.method === 'HEAD').then((sent) => {
      if (!sent) res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

async function expectInert(base: string): Promise<void> {
  for (const [rel, want] of Object.entries(WANT)) {
    for (const method of ['GET', 'HEAD']) {
      const res = await fetch(`${base}/files/${rel}`, { method });
      expect(res.status, `${method} ${rel}`).toBe(200);
      expect(res.headers.get('content-type'), `${method} ${rel}`).toBe(want.type);
      expect(res.headers.get('content-disposition'), `${method} ${rel}`).toBe(want.disposition);
      expect(res.headers.get('content-length'), `${method} ${rel}`).toBe(String(FILES[rel]!.length));
      if (method === 'GET') expect(Buffer.from(await res.arrayBuffer()).equals(FILES[rel]!), rel).toBe(true);
    }
  }
}

describe('view /files/ serves result bytes inert', () => {
  it('from the output folder: by the bytes, not by the name', async () => {
    const { base, server } = await serve(folderOutput(t.dir));
    try {
      await expectInert(base);
    } finally {
      server.close();
    }
  });

  it('from a bucket prefix: by the bytes, not by the type the object was stored with (text/html)', async () => {
    const client = new S3Client({ endpoint: s3.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: S3_KEY_ID, secretAccessKey: S3_SECRET } });
    const output = bucketOutput(new ObjectOut(client, { bucket: s3.bucket, prefix: 'old' }));
    const { base, server } = await serve(output);
    try {
      await expectInert(base);
    } finally {
      server.close();
      output.close();
    }
  });
});
