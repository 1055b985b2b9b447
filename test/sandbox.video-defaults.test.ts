import { afterEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';

/**
 * A video task submitted without `duration` gets the video length the service gives it
 * (service-interface.md), not the sandbox's generic 5 s: the video 1.5 model defaults to
 * 6 s (8 s in reference mode) and bills that length; clip-02-pro makes 6 s only; clip-02
 * and imagine-video take 6 or 10 s only, so 5 s cannot be what they return.
 */

const open: Sandbox[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function post(sb: Sandbox, body: unknown): Promise<Json> {
  const res = await fetch(`${sb.url}/api/generate/submit`, {
    method: 'POST',
    headers: { authorization: 'Bearer k1', 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as Json;
}

async function finishedVideo(sb: Sandbox, id: string): Promise<{ metadata: Json; mvhdSeconds: number }> {
  sb.clock.advance(400);
  const res = await fetch(`${sb.url}/api/generate/status/${id}`, { headers: { authorization: 'Bearer k1' } });
  const data = ((await res.json()) as Json).data;
  expect(data.status).toBe('finished');
  const file = data.files[0];
  const bytes = Buffer.from(await (await fetch(file.file_url)).arrayBuffer());
  return { metadata: file.metadata, mvhdSeconds: mvhdSeconds(bytes) };
}

/** The movie length an MP4 declares (moov/mvhd duration / timescale). */
function mvhdSeconds(buf: Buffer): number {
  const moov = box(buf, 0, buf.length, 'moov');
  const mvhd = box(buf, moov + 8, moov + buf.readUInt32BE(moov), 'mvhd');
  return buf.readUInt32BE(mvhd + 24) / buf.readUInt32BE(mvhd + 20);
}

function box(buf: Buffer, start: number, end: number, type: string): number {
  for (let p = start; p + 8 <= end; p += buf.readUInt32BE(p)) {
    if (buf.toString('latin1', p + 4, p + 8) === type) return p;
    if (buf.readUInt32BE(p) < 8) break;
  }
  throw new Error(`no ${type} box`);
}

describe('sandbox video length when duration is omitted', () => {
  it.each([
    ['imagine-video-1.5', { prompt: 'waves' }, 6],
    ['imagine-video-1.5', { prompt: 'waves', image_urls: ['https://example.com/a.png'] }, 6],
    ['imagine-video-1.5', { prompt: 'waves like [1]', reference_image_urls: ['https://example.com/a.png'] }, 8],
    ['clip-02-pro', { prompt: 'waves' }, 6],
    ['clip-02', { prompt: 'waves' }, 6],
    ['imagine-video', { prompt: 'waves' }, 6],
  ] as const)('%s %j makes a %i s video', async (model, input, seconds) => {
    const sb = await startSandbox({ keys: { k1: 100000 }, timeScale: 0.001, seed: 3 });
    open.push(sb);
    const id = (await post(sb, { model, input })).data.task_id as string;
    const video = await finishedVideo(sb, id);
    expect(video.metadata.duration).toBe(seconds);
    expect(video.mvhdSeconds).toBeCloseTo(seconds, 6);
  });

  it('a given duration still sets the length', async () => {
    const sb = await startSandbox({ keys: { k1: 100000 }, timeScale: 0.001, seed: 3 });
    open.push(sb);
    const id = (await post(sb, { model: 'imagine-video-1.5', input: { prompt: 'waves', duration: 3, resolution: '480p' } })).data.task_id as string;
    expect((await finishedVideo(sb, id)).metadata.duration).toBe(3);
  });
});

describe('sandbox video size of clip-02-pro', () => {
  it('is 1080P, its only resolution, when resolution is omitted', async () => {
    const sb = await startSandbox({ keys: { k1: 100000 }, timeScale: 0.001, seed: 3 });
    open.push(sb);
    const id = (await post(sb, { model: 'clip-02-pro', input: { prompt: 'waves' } })).data.task_id as string;
    expect((await finishedVideo(sb, id)).metadata).toMatchObject({ width: 1920, height: 1080 });
    const given = (await post(sb, { model: 'clip-02', input: { prompt: 'waves', resolution: '512P' } })).data.task_id as string;
    expect((await finishedVideo(sb, given)).metadata).toMatchObject({ width: 912, height: 512 });
  });
});
