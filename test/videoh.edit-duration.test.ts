import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The service's rule for videoh: duration is 3 to 15 s for the text, image and reference
 * workflows and ignored for video-edit (which bills and renders the probed source length).
 */
const VID = 'https://example.com/source.mp4';
const open: Array<{ close(): Promise<void> } | (() => void)> = [];
afterEach(async () => {
  for (const o of open.splice(0)) await (typeof o === 'function' ? o() : o.close());
});
beforeAll(() => ensureBuilt());

describe('videoh video-edit ignores duration', () => {
  it('validate accepts a video-edit job with duration 30 and still refuses it for text-to-video', async () => {
    const t = tempDir();
    open.push(t.cleanup);
    const m = join(t.dir, 'v.yaml');
    const edit = `  - id: edit\n    model: videoh\n    input: {prompt: "@Image1 drives the car", video_url: "${VID}", duration: 30}\n`;
    writeFileSync(m, `jobs:\n${edit}`);
    const ok = await runCli(['validate', 'v.yaml'], {}, t.dir);
    expect(ok.stderr).toBe('');
    expect(ok.code).toBe(0);
    writeFileSync(m, `jobs:\n${edit}  - id: text\n    model: videoh\n    input: {prompt: a car, duration: 30}\n`);
    const bad = await runCli(['validate', 'v.yaml'], {}, t.dir);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim().split('\n')).toEqual([`job text (v.yaml:7) input.duration: must be at most 15 (the range of text-to-video; video-edit ignores duration)`]);
  });

  it('the sandbox accepts it, charges the same as without duration, and does not make a 30 s video', async () => {
    const sb: Sandbox = await startSandbox({ keys: { k: 1000 }, timeScale: 0.001, seed: 3 });
    open.push(sb);
    const post = async (input: Record<string, unknown>) => {
      const res = await fetch(`${sb.url}/api/generate/submit`, {
        method: 'POST',
        headers: { authorization: 'Bearer k', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'videoh', input }),
      });
      return { status: res.status, body: (await res.json()) as { data: { task_id: string } } };
    };
    const balance = async () => ((await (await fetch(`${sb.url}/api/user/balance`, { headers: { authorization: 'Bearer k' } })).json()) as { data: { balance: number } }).data.balance;
    const start = await balance();
    const plain = await post({ prompt: 'p', video_url: VID });
    expect(plain.status).toBe(200);
    const afterPlain = await balance();
    const long = await post({ prompt: 'p', video_url: VID, duration: 30 });
    expect(long.status).toBe(200);
    expect(start - afterPlain).toBe(afterPlain - (await balance()));
    const text = await post({ prompt: 'p', duration: 30 });
    expect(text.status).toBe(400);
    sb.clock.advance(600);
    const files = async (id: string) =>
      ((await (await fetch(`${sb.url}/api/generate/status/${id}`, { headers: { authorization: 'Bearer k' } })).json()) as { data: { state: string; files: Array<{ metadata: { duration: number } }> } }).data;
    const a = await files(plain.body.data.task_id);
    const b = await files(long.body.data.task_id);
    expect(b.files[0]!.metadata.duration).toBe(a.files[0]!.metadata.duration);
    expect(b.files[0]!.metadata.duration).not.toBe(30);
  });
});
