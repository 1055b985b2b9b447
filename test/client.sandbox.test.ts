import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient, UploadLimiter } from '../src/client/index.js';
import { AmbiguousSubmitError, ApiError } from '../src/errors.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';

/** The client against the in-process sandbox, over real HTTP. */

const KEY = 'sk-client-it-5be1';
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5b1f0a50000000049454e44ae426082', 'hex');

let sb: Sandbox;
let client: ServiceClient;
let dir: string;

beforeAll(async () => {
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1000 }, seed: 7 });
  client = new ServiceClient({ baseUrl: sb.url, apiKey: KEY, policy: { baseMs: 5, maxMs: 50, maxAttempts: 4 }, uploadLimiter: new UploadLimiter({ windowMs: 200 }) });
  dir = await mkdtemp(join(tmpdir(), 'genbatch-client-'));
});
afterAll(async () => {
  await client?.close();
  await sb?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('ServiceClient against the sandbox', () => {
  it('reads the balance, submits, follows the task to finished, and is charged', async () => {
    const before = await client.balance();
    expect(before).toBe(1000);
    const r = await client.submit({ model: 'vendora/dream-v5.0-flash/text-to-image', input: { prompt: 'a lighthouse at dusk' } });
    expect(r.task_id).toBeTruthy();
    const first = await client.status(r.task_id);
    expect(['not_started', 'running']).toContain(first.status);
    sb.clock.advance(3600);
    const done = await client.status(r.task_id);
    expect(done.status).toBe('finished');
    expect(done.files.length).toBeGreaterThan(0);
    expect(done.files[0]?.file_type).toBe('image');
    expect(await client.balance()).toBeLessThanOrEqual(before);
  });

  it('uploads a local file through the stream endpoint', async () => {
    const path = join(dir, 'ref.png');
    await writeFile(path, PNG);
    const rec = await client.uploadStream(path, { uploadPath: 'client-test' });
    expect(rec.file_url).toMatch(/^https?:\/\//);
    expect(rec.file_url).toContain('temp/');
  });

  it('an unknown task is a 404 ApiError, not retried', async () => {
    await expect(client.status('no-such-task')).rejects.toMatchObject({ status: 404 });
  });

  it('a 500 after the task was created is AmbiguousSubmitError, and the task exists exactly once', async () => {
    const before = sb.stats().tasks_total;
    sb.script('submit', ['500-after']);
    const err = await client.submit({ model: 'vendora/dream-v5.0-flash/text-to-image', input: { prompt: 'ambiguous' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AmbiguousSubmitError);
    expect(sb.stats().tasks_total).toBe(before + 1);
  });

  it('a scripted 429 then 503 on submit are retried, creating one task', async () => {
    const before = sb.stats().tasks_total;
    sb.script('submit', ['429', '503', 'ok']);
    const r = await client.submit({ model: 'vendora/dream-v5.0-flash/text-to-image', input: { prompt: 'retried' } });
    expect(r.task_id).toBeTruthy();
    expect(sb.stats().tasks_total).toBe(before + 1);
  });

  it('a wrong key is a 401', async () => {
    const other = new ServiceClient({ baseUrl: sb.url, apiKey: 'sk-wrong-key-000' });
    try {
      const err = await other.balance().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ApiError);
      expect(err).toMatchObject({ status: 401 });
      expect((err as Error).message).not.toContain('sk-wrong-key-000');
    } finally {
      await other.close();
    }
  });
});

describe('upload rate limit against the sandbox', () => {
  it('7 uploads through the limiter: zero 429s from the service', async () => {
    // timeScale scales the sandbox's 60 s upload window; the client's window is scaled the same way.
    const timeScale = 0.005;
    const local = await startSandbox({ port: 0, keys: { [KEY]: 1000 }, seed: 3, timeScale });
    const c = new ServiceClient({ baseUrl: local.url, apiKey: KEY, policy: { baseMs: 5, maxMs: 50, maxAttempts: 1 }, uploadLimiter: new UploadLimiter({ windowMs: 60_000 * timeScale }) });
    try {
      const path = join(dir, 'rate.png');
      await writeFile(path, PNG);
      const dataUrl = `data:image/png;base64,${PNG.toString('base64')}`;
      const recs = await Promise.all(Array.from({ length: 7 }, (_, i) => (i % 2 ? c.uploadBase64(dataUrl, { fileName: `b${i}.png` }) : c.uploadStream(path))));
      expect(recs.every((r) => r.file_url.includes('temp/'))).toBe(true);
      expect(local.stats().uploads).toMatchObject({ accepted: 7, refused: 0 });
    } finally {
      await c.close();
      await local.close();
    }
  });
});
