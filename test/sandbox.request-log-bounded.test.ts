import { afterAll, beforeAll, expect, test } from 'vitest';
import { Agent, request } from 'undici';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';

/**
 * The request log (sb.requestLog(), up to 20,000 entries before it is trimmed) keeps at most 1,024
 * characters of each request's path. It kept the whole target: anyone, without a key, could send 20,000
 * requests with 15 KB paths (the headers' 16 KiB limit) in 6 s and the sandbox then held 310 MB more
 * (RSS 86 -> 424 MB, staying there). Found by sending such requests to a standalone sandbox. Nor does it keep an
 * API key sent in the query (`?key=`, as Gemini clients may send it): the key is nowhere in a log.
 */

let sb: Sandbox;

beforeAll(async () => {
  sb = await startSandbox({ keys: { 'sk-log': 10 }, seed: 1 });
});

afterAll(async () => {
  await sb.close();
});

test('a long request path is logged clipped; a short one whole', async () => {
  const agent = new Agent({ connections: 4 });
  try {
    const long = `/temp/${'a'.repeat(15_000)}`;
    for (const path of [long, `/no/such/${'b'.repeat(3_000)}?x=${'c'.repeat(3_000)}`, '/api/user/balance']) {
      const r = await request(sb.localUrl + path, { dispatcher: agent });
      await r.body.dump();
      expect(r.statusCode).toBeGreaterThanOrEqual(400);
    }
  } finally {
    await agent.close();
  }
  const log = sb.requestLog().slice(-3);
  expect(log.map((e) => e.path.length)).toEqual([1025, 1025, '/api/user/balance'.length]);
  expect(log[0]?.path).toBe(`/temp/${'a'.repeat(1_018)}…`);
  expect(log[2]?.path).toBe('/api/user/balance');
});

test('a key sent in the query (Gemini ?key=) is not logged', async () => {
  const r = await fetch(`${sb.localUrl}/v1beta/models/vendorc/lumen-2.5-flash:generateContent?alt=json&key=sk-log`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }),
  });
  expect(r.status).toBe(200);
  const [entry] = sb.requestLog().slice(-1);
  expect(entry?.path).toBe('/v1beta/models/vendorc/lumen-2.5-flash:generateContent?alt=json&key=***');
});
