import { afterEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';

/**
 * alpha-image-2, resolution rule 1 (service-interface.md): when `size` is omitted or `auto`,
 * the request is processed and billed as 1K even if `resolution` is given. The sandbox billed
 * 1K but made the image at the given resolution (a 3840x3840 image for 2 credits).
 */

const open: Sandbox[] = [];

afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(sb: Sandbox, method: string, path: string, body?: unknown): Promise<Json> {
  const res = await fetch(sb.url + path, {
    method,
    headers: { authorization: 'Bearer k1', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as Json).data;
}

describe('sandbox alpha-image-2 processing resolution', () => {
  it.each([
    [{ prompt: 'p', resolution: '4K' }, 2, 1024, 1024],
    [{ prompt: 'p', size: 'auto', resolution: '2K', quality: 'medium' }, 3, 1024, 1024],
    [{ prompt: 'p', size: 'auto' }, 2, 1024, 1024],
    [{ prompt: 'p', size: '16:9', resolution: '4K' }, 8, 3840, 2160],
    [{ prompt: 'p', size: '1:1', resolution: '2K' }, 4, 2048, 2048],
    [{ prompt: 'p', size: '2048x1152', resolution: '2K' }, 4, 2048, 1152],
  ])('%j: charged %i, made at %ix%i', async (input, credits, width, height) => {
    const sb = await startSandbox({ keys: { k1: 1000 }, timeScale: 0.001, seed: 5 });
    open.push(sb);
    const id = (await call(sb, 'POST', '/api/generate/submit', { model: 'alpha-image-2', input })).task_id as string;
    expect((await call(sb, 'GET', '/api/user/balance')).balance).toBe(1000 - credits);
    sb.clock.advance(120);
    const task = await call(sb, 'GET', `/api/generate/status/${id}`);
    expect(task.status).toBe('finished');
    expect(task.files[0].metadata).toMatchObject({ width, height });
  });
});
