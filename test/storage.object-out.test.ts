import { randomBytes } from 'node:crypto';
import { S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BodyCheck } from '../src/download/check.js';
import { ObjectOut, type PendingUpload } from '../src/storage/index.js';
import { startProxy } from './helpers/proxy.js';
import { S3_KEY_ID, S3_SECRET, startS3, type TestS3 } from './helpers/s3.js';

/**
 * ObjectOut against s3rver (in this process) through a TCP proxy that cuts connections: the cases a run
 * cannot be timed to hit.
 */

let s3: TestS3;
beforeAll(async () => {
  s3 = await startS3();
}, 60_000);
afterAll(async () => {
  await s3?.stop();
});

async function* chunks(b: Buffer): AsyncGenerator<Buffer> {
  for (let i = 0; i < b.length; i += 64 * 1024) yield b.subarray(i, i + 64 * 1024);
}

const check = (): BodyCheck => new BodyCheck({ where: 'test', declared: null, expected: null, maxBytes: 1e10 });

describe('ObjectOut', () => {
  it('finds by listing and aborts a multipart upload whose CreateMultipartUpload answer never arrived (its temporary key recorded first)', async () => {
    const proxy = await startProxy(s3.port);
    const client = new S3Client({
      endpoint: proxy.url,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: S3_KEY_ID, secretAccessKey: S3_SECRET },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 1,
    });
    const out = new ObjectOut(client, { bucket: s3.bucket, prefix: 'lost' });
    try {
      const started: PendingUpload[] = [];
      const ended: string[] = [];
      const journal = { started: (u: PendingUpload) => void started.push({ ...u }), ended: (key: string) => void ended.push(key) };
      // The first answer from the bucket is CreateMultipartUpload's (the body is over one part): cut before its first byte.
      proxy.cutAfter(0, { direction: 'down' });
      await expect(out.putStream('big.bin', chunks(randomBytes(12 * 1024 * 1024)), { check: check(), journal })).rejects.toThrow();
      expect(proxy.cuts).toBe(1);
      // Only the intent was recorded (no UploadId ever reached the writer), yet nothing is left.
      expect(started).toHaveLength(1);
      expect(started[0]!.uploadId).toBe('');
      expect(started[0]!.key).toMatch(/^lost\/\.genbatch-partial\//);
      expect(ended).toEqual([started[0]!.key]);
      expect(s3.pendingUploads().filter((u) => u.key.startsWith('lost/'))).toEqual([]);
      expect(await s3.keys('lost/')).toEqual([]);
    } finally {
      out.close();
      await proxy.stop();
    }
  }, 60_000);

  it("the writable probe tries again a bucket's passing fault (a cut connection twice), and refuses a wrong key at once", async () => {
    const proxy = await startProxy(s3.port);
    const client = (keyId: string) =>
      new S3Client({
        endpoint: proxy.url,
        region: 'us-east-1',
        forcePathStyle: true,
        credentials: { accessKeyId: keyId, secretAccessKey: S3_SECRET },
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        maxAttempts: 1,
      });
    const fast = { baseMs: 10, maxMs: 50, maxAttempts: 5, jitter: 'full' as const };
    const out = new ObjectOut(client(S3_KEY_ID), { bucket: s3.bucket, prefix: 'probe' });
    const bad = new ObjectOut(client('NOT-A-KEY'), { bucket: s3.bucket, prefix: 'probe' });
    try {
      // The probe's PUT answered by a cut connection twice (before any byte comes back), then by the bucket.
      proxy.cutAfter(0, { direction: 'down', times: 2 });
      await out.checkWritable(fast);
      expect(proxy.cuts).toBe(2);
      expect(await s3.keys('probe/')).toEqual([]);
      // A 403 is a refusal: no second try (one connection's worth of requests), exit 74's error.
      const before = proxy.connections;
      await expect(bad.checkWritable(fast)).rejects.toThrow(`bucket "${s3.bucket}" is not writable (PUT of a probe object: HTTP 403`);
      expect(proxy.connections - before).toBeLessThanOrEqual(1);
    } finally {
      out.close();
      bad.close();
      await proxy.stop();
    }
  }, 60_000);

  it('clears a recorded upload of an earlier process by its UploadId, and one with no UploadId by listing (abortStale)', async () => {
    const { CreateMultipartUploadCommand } = await import('@aws-sdk/client-s3');
    const out = new ObjectOut(s3.client, { bucket: s3.bucket, prefix: 'stale' });
    const a = await s3.client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: 'stale/.genbatch-partial/a' }));
    await s3.client.send(new CreateMultipartUploadCommand({ Bucket: s3.bucket, Key: 'stale/.genbatch-partial/b' }));
    expect(s3.pendingUploads().filter((u) => u.key.startsWith('stale/'))).toHaveLength(2);
    const ended: string[] = [];
    const n = await out.abortStale(
      [
        { key: 'stale/.genbatch-partial/a', uploadId: a.UploadId! },
        { key: 'stale/.genbatch-partial/b', uploadId: '' },
      ],
      { started: () => undefined, ended: (key) => void ended.push(key) },
    );
    expect(n).toBe(2);
    expect(ended).toEqual(['stale/.genbatch-partial/a', 'stale/.genbatch-partial/b']);
    expect(s3.pendingUploads().filter((u) => u.key.startsWith('stale/'))).toEqual([]);
  }, 60_000);

  it('records the UploadId of each ObjectOut over one shared client (one journal hook per client)', async () => {
    const first = new ObjectOut(s3.client, { bucket: s3.bucket, prefix: 'shared-a' });
    const second = new ObjectOut(s3.client, { bucket: s3.bucket, prefix: 'shared-b' });
    for (const out of [first, second]) {
      const started: PendingUpload[] = [];
      const journal = { started: (u: PendingUpload) => void started.push({ ...u }), ended: () => undefined };
      const placed = await out.putStream('big.bin', chunks(randomBytes(9 * 1024 * 1024)), { check: check(), journal });
      expect(placed.rel).toBe('big.bin');
      // The intent, then the UploadId from CreateMultipartUpload's answer.
      expect(started.map((u) => u.uploadId === '')).toEqual([true, false]);
      expect(started[1]!.key).toBe(started[0]!.key);
    }
  }, 60_000);
});
