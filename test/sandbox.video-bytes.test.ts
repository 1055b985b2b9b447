import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { runCli } from './helpers/cli.js';

/** The sandbox's videoBytes option (--video-bytes): video results of a given size, made as they are sent. */

const open: Sandbox[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Submit a clip-2.3 video and move the clock until it is finished; its file entry. */
async function videoFile(sb: Sandbox): Promise<Json> {
  const h = { authorization: 'Bearer k1', 'content-type': 'application/json' };
  const sub = (await (await fetch(`${sb.url}/api/generate/submit`, { method: 'POST', headers: h, body: JSON.stringify({ model: 'clip-2.3', input: { prompt: 'waves' } }) })).json()) as Json;
  const id = sub.data.task_id as string;
  for (let i = 0; i < 100; i++) {
    sb.clock.advance(60);
    const d = ((await (await fetch(`${sb.url}/api/generate/status/${id}`, { headers: h })).json()) as Json).data;
    if (d.status === 'finished') return d.files[0] as Json;
  }
  throw new Error('the video did not finish');
}

describe('sandbox videoBytes', () => {
  it('serves a video of exactly the size asked: the MP4, then a free box; file_size and Content-Length say so', async () => {
    const plain = await startSandbox({ keys: { k1: 1000 }, timeScale: 0.001, seed: 3 });
    open.push(plain);
    const mp4 = Buffer.from(await (await fetch((await videoFile(plain)).file_url)).arrayBuffer());
    const size = 3 * 1024 * 1024 + 17;
    const sb = await startSandbox({ keys: { k1: 1000 }, timeScale: 0.001, seed: 3, videoBytes: size });
    open.push(sb);
    const f = await videoFile(sb);
    expect(f.file_size).toBe(size);
    const res = await fetch(f.file_url);
    expect(res.headers.get('content-length')).toBe(String(size));
    const body = Buffer.from(await res.arrayBuffer());
    expect(body.length).toBe(size);
    expect(body.subarray(0, mp4.length).equals(mp4)).toBe(true);
    expect(body.readUInt32BE(mp4.length)).toBe(size - mp4.length);
    expect(body.toString('latin1', mp4.length + 4, mp4.length + 8)).toBe('free');
    // The same bytes on every read (a resumed or repeated download checks its sha256 against the first).
    const again = Buffer.from(await (await fetch(f.file_url)).arrayBuffer());
    expect(createHash('sha256').update(again).digest('hex')).toBe(createHash('sha256').update(body).digest('hex'));
  });

  it('past 4 GiB the free box has a 64-bit size; the body streams (its first bytes arrive without the rest being made)', async () => {
    const size = 5 * 1024 ** 3;
    const sb = await startSandbox({ keys: { k1: 1000 }, timeScale: 0.001, seed: 3, videoBytes: size });
    open.push(sb);
    const f = await videoFile(sb);
    expect(f.file_size).toBe(size);
    const res = await fetch(f.file_url);
    expect(res.headers.get('content-length')).toBe(String(size));
    const reader = res.body!.getReader();
    const chunks: Buffer[] = [];
    let got = 0;
    while (got < 4 * 1024 * 1024) {
      const r = await reader.read();
      if (r.done) break;
      chunks.push(Buffer.from(r.value));
      got += r.value.length;
    }
    await reader.cancel();
    const head = Buffer.concat(chunks);
    const at = head.indexOf('free', 0, 'latin1') - 4;
    expect(head.readUInt32BE(at)).toBe(1);
    expect(Number(head.readBigUInt64BE(at + 8))).toBe(size - at);
    // 5 GiB held in memory would not fit this process's heap: the sandbox is still answering.
    expect((await fetch(`${sb.url}/api/user/balance`, { headers: { authorization: 'Bearer k1' } })).status).toBe(200);
  });

  it('genbatch sandbox --video-bytes refuses a value that is not a whole number of bytes (exit 2, naming the flag)', async () => {
    const r = await runCli(['sandbox', '--port', '0', '--video-bytes', '1.5']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--video-bytes expects a whole number of bytes');
  });
});
