import { createHash } from 'node:crypto';
import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An HTTP proxy on 127.0.0.1 before an S3 endpoint (s3rver) that lies about writes. Requests are passed on
 * untouched (headers, signature and body as sent) except the writes `lies` picks (PutObject, UploadPart,
 * CopyObject, CompleteMultipartUpload), which the mode changes:
 * - 'drop': answered as S3 answers a success (200, an ETag that is the MD5 of the body received, the XML of
 *   a copy or a completion) and never passed on: nothing is stored.
 * - 'alter': passed on with one byte of the body changed (same length, same headers): other bytes are stored.
 * Every other request (HEAD, GET, DELETE, ...) reaches the server as it is.
 */
export type LieMode = 'drop' | 'alter';

export interface LyingS3 {
  /** http://127.0.0.1:PORT */
  url: string;
  mode: LieMode;
  /** Which writes are lied about (by default: all); `key` is the path after the bucket, decoded. */
  lies: (w: { kind: 'put' | 'part' | 'copy' | 'complete'; key: string }) => boolean;
  /** The writes lied about so far. */
  readonly told: Array<{ kind: string; key: string }>;
  stop(): Promise<void>;
}

function kindOf(req: IncomingMessage, url: URL): 'put' | 'part' | 'copy' | 'complete' | null {
  if (req.method === 'PUT' && url.searchParams.has('partNumber')) return 'part';
  if (req.method === 'PUT' && req.headers['x-amz-copy-source']) return 'copy';
  if (req.method === 'PUT' && url.pathname.split('/').filter(Boolean).length > 1) return 'put';
  if (req.method === 'POST' && url.searchParams.has('uploadId')) return 'complete';
  return null;
}

function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((done, fail) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c)).on('end', () => done(Buffer.concat(chunks))).on('error', fail);
  });
}

export async function startLyingS3(targetPort: number, mode: LieMode): Promise<LyingS3> {
  const told: Array<{ kind: string; key: string }> = [];
  const state: LyingS3 = {
    url: '',
    mode,
    lies: () => true,
    told,
    stop: async () => undefined,
  };
  const pass = (req: IncomingMessage, res: ServerResponse, body: Buffer | null): void => {
    const up = request({ host: '127.0.0.1', port: targetPort, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    if (body === null) req.pipe(up);
    else up.end(body);
  };
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://s3.invalid');
    const kind = kindOf(req, url);
    const key = decodeURIComponent(url.pathname.split('/').slice(2).join('/'));
    if (kind === null || !state.lies({ kind, key })) return pass(req, res, null);
    told.push({ kind, key });
    void readAll(req).then((body) => {
      if (state.mode === 'alter') {
        if (body.length > 0 && (kind === 'put' || kind === 'part')) body[body.length >> 1] ^= 0xff;
        return pass(req, res, body);
      }
      const etag = `"${createHash('md5').update(body).digest('hex')}"`;
      const xml = (t: string) => {
        res.writeHead(200, { 'content-type': 'application/xml' });
        res.end(`<?xml version="1.0" encoding="UTF-8"?>\n${t}`);
      };
      if (kind === 'copy') return xml(`<CopyObjectResult><LastModified>2026-01-01T00:00:00.000Z</LastModified><ETag>${etag}</ETag></CopyObjectResult>`);
      if (kind === 'complete') return xml(`<CompleteMultipartUploadResult><Key>${key}</Key><ETag>${etag}</ETag></CompleteMultipartUploadResult>`);
      res.writeHead(200, { etag, 'content-length': 0 });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.stop = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}
