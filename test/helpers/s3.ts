import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
// @ts-expect-error s3rver ships no types
import S3rver from 's3rver';
import { tempDir } from './tmp.js';

/** One object of the test bucket: its key, size and user metadata (x-amz-meta-*, keys lower-case). */
export interface TestObject {
  key: string;
  size: number;
  contentType: string | undefined;
  metadata: Record<string, string>;
}

/**
 * An S3 API served by s3rver in this process, on 127.0.0.1 and a free port, its data in a temp folder,
 * with one bucket created.
 */
export interface TestS3 {
  bucket: string;
  /** http://127.0.0.1:PORT */
  endpoint: string;
  port: number;
  /** s3rver's data folder (objects are files there; in-flight multipart uploads too). */
  dir: string;
  /**
   * The environment for a genbatch child process: credentials s3rver accepts, the region, the endpoint,
   * and AWS config files that do not exist (so the machine's own AWS config plays no part).
   */
  env: Record<string, string>;
  /** A client of the server for the test itself (path-style, checksums only when required). */
  client: S3Client;
  /** `s3://<bucket>/<prefix>` */
  url(prefix: string): string;
  /** Every object under `prefix` (all of them without), by key, with size and metadata (one HEAD each). */
  objects(prefix?: string): Promise<TestObject[]>;
  /** The keys under `prefix`, sorted (no HEAD). */
  keys(prefix?: string): Promise<string[]>;
  /** An object's whole body. */
  get(key: string): Promise<Buffer>;
  /** Multipart uploads begun and neither completed nor aborted (s3rver has no ListMultipartUploads: read from its folder). */
  pendingUploads(): { uploadId: string; key: string }[];
  /** Stop the server and remove its folder. */
  stop(): Promise<void>;
}

/**
 * s3rver 3.7 answers AbortMultipartUpload (DELETE /bucket/key?uploadId=...) with 405 and keeps the upload's
 * parts: real S3 (and MinIO, R2, ...) removes them. The server here does what S3 does: the upload's folder
 * is removed, 204; an unknown upload is 404 NoSuchUpload. (Path-style requests; the signature is not checked.)
 */
function withAbortMultipartUpload(server: { callback(): (req: IncomingMessage, res: ServerResponse) => void }, dir: string): void {
  const koa = server.callback.bind(server);
  server.callback = () => {
    const handle = koa();
    return (req, res) => {
      const url = new URL(req.url ?? '/', 'http://s3.invalid');
      const uploadId = url.searchParams.get('uploadId');
      if (req.method !== 'DELETE' || uploadId === null) return handle(req, res);
      const bucket = decodeURIComponent(url.pathname.split('/')[1] ?? '');
      const folder = join(dir, bucket, '._S3rver_uploads', uploadId);
      req.resume();
      if (!/^[0-9a-f]+$/i.test(uploadId) || !existsSync(folder)) {
        res.writeHead(404, { 'content-type': 'application/xml' });
        return void res.end(`<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message><UploadId>${uploadId}</UploadId></Error>`);
      }
      rmSync(folder, { recursive: true, force: true });
      res.writeHead(204);
      res.end();
    };
  };
}

/**
 * s3rver 3.7 has no ListMultipartUploads (GET /bucket?uploads): the server here lists the uploads in its
 * folder as S3 does (Prefix honoured, one page, path-style), so a run can find an upload it created but whose
 * UploadId it never received.
 */
function withListMultipartUploads(server: { callback(): (req: IncomingMessage, res: ServerResponse) => void }, dir: string): void {
  const inner = server.callback.bind(server);
  server.callback = () => {
    const handle = inner();
    return (req, res) => {
      const url = new URL(req.url ?? '/', 'http://s3.invalid');
      const parts = url.pathname.split('/').filter(Boolean);
      if (req.method !== 'GET' || parts.length !== 1 || !url.searchParams.has('uploads')) return handle(req, res);
      const bucket = decodeURIComponent(parts[0]!);
      const prefix = url.searchParams.get('prefix') ?? '';
      const folder = join(dir, bucket, '._S3rver_uploads');
      const esc = (t: string): string => t.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
      const uploads = existsSync(folder)
        ? readdirSync(folder)
            .filter((id) => existsSync(join(folder, id, 'key')))
            .map((id) => ({ id, key: readFileSync(join(folder, id, 'key'), 'utf8') }))
            .filter((u) => u.key.startsWith(prefix))
        : [];
      req.resume();
      res.writeHead(200, { 'content-type': 'application/xml' });
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>${esc(bucket)}</Bucket><Prefix>${esc(prefix)}</Prefix><MaxUploads>1000</MaxUploads><IsTruncated>false</IsTruncated>` +
          uploads.map((u) => `<Upload><Key>${esc(u.key)}</Key><UploadId>${u.id}</UploadId><Initiated>2026-01-01T00:00:00.000Z</Initiated></Upload>`).join('') +
          '</ListMultipartUploadsResult>',
      );
    };
  };
}

/**
 * s3rver 3.7's CopyObject with new metadata (`MetadataDirective: REPLACE`) onto a key that held an object
 * copies the bytes but keeps the old object's MD5 file, so its ETag is the old object's: S3 (and MinIO, R2,
 * ...) give the copy's. The server here drops the old MD5 first, so the ETag is computed from the bytes copied.
 */
function withCopyEtag(server: { store: { getResourcePath(b: string, k: string, r: string): string; copyObject(...a: unknown[]): Promise<unknown> } }): void {
  const store = server.store;
  const copy = store.copyObject.bind(store);
  store.copyObject = async (srcBucket, srcKey, destBucket, destKey, replacement) => {
    if (replacement) rmSync(store.getResourcePath(destBucket as string, destKey as string, 'object.md5'), { force: true });
    return copy(srcBucket, srcKey, destBucket, destKey, replacement);
  };
}

export const S3_KEY_ID = 'S3RVER';
export const S3_SECRET = 'S3RVER';

export async function startS3(o: { bucket?: string } = {}): Promise<TestS3> {
  const bucket = o.bucket ?? 'bucket';
  const tmp = tempDir('genbatch-s3-');
  const dir = join(tmp.dir, 'data');
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, configureBuckets: [{ name: bucket }] });
  withAbortMultipartUpload(server, dir);
  withListMultipartUploads(server, dir);
  withCopyEtag(server);
  const address = (await server.run()) as AddressInfo;
  const endpoint = `http://127.0.0.1:${address.port}`;
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: S3_KEY_ID, secretAccessKey: S3_SECRET },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  const keys = async (prefix = ''): Promise<string[]> => {
    const out: string[] = [];
    let token: string | undefined;
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
      for (const c of page.Contents ?? []) out.push(c.Key!);
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return out.sort();
  };
  const uploadsDir = join(dir, bucket, '._S3rver_uploads');
  return {
    bucket,
    endpoint,
    port: address.port,
    dir,
    env: {
      AWS_ACCESS_KEY_ID: S3_KEY_ID,
      AWS_SECRET_ACCESS_KEY: S3_SECRET,
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_S3: endpoint,
      AWS_CONFIG_FILE: join(tmp.dir, 'no-aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(tmp.dir, 'no-aws-credentials'),
      AWS_EC2_METADATA_DISABLED: 'true',
    },
    client,
    url: (prefix) => `s3://${bucket}/${prefix}`,
    keys,
    async objects(prefix = '') {
      const out: TestObject[] = [];
      for (const key of await keys(prefix)) {
        const h = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }));
        out.push({ key, size: h.ContentLength ?? 0, contentType: h.ContentType, metadata: h.Metadata ?? {} });
      }
      return out;
    },
    async get(key) {
      const r = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
      return Buffer.from(await r.Body!.transformToByteArray());
    },
    pendingUploads() {
      if (!existsSync(uploadsDir)) return [];
      return readdirSync(uploadsDir)
        .filter((id) => existsSync(join(uploadsDir, id, 'key')))
        .map((uploadId) => ({ uploadId, key: readFileSync(join(uploadsDir, uploadId, 'key'), 'utf8') }));
    },
    async stop() {
      client.destroy();
      await server.close();
      tmp.cleanup();
    },
  };
}
