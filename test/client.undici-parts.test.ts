import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { undici } from '../src/client/undici.js';

/**
 * src/client/undici.ts requires undici's parts by path instead of its index (which also evaluates fetch,
 * WebSocket, mocks and caches). These pin that each part is the one undici's index exports, and that its
 * request() answers as the index's does, so an undici upgrade that moves a file fails here, not in a run.
 */
const index = createRequire(import.meta.url)('undici') as typeof import('undici');
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ method: req.method, url: req.url }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
});

describe("undici's parts, required by path", () => {
  it('are the Agent, errors and FormData that undici exports', () => {
    const u = undici();
    expect(u.Agent).toBe(index.Agent);
    expect(u.errors).toBe(index.errors);
    expect(u.FormData).toBe(index.FormData);
  });

  it('request() sends the path and query of a whole URL through the given dispatcher, GET by default', async () => {
    const agent = new (undici().Agent)();
    try {
      const res = await undici().request(`${base}/a/b?c=1`, { dispatcher: agent });
      expect(res.statusCode).toBe(200);
      expect(await res.body.json()).toEqual({ method: 'GET', url: '/a/b?c=1' });
      const post = await undici().request(new URL(`${base}/p`), { method: 'POST', body: 'x', dispatcher: agent });
      expect(await post.body.json()).toEqual({ method: 'POST', url: '/p' });
    } finally {
      await agent.close();
    }
  });

  it('request() refuses a URL that is not http(s) with the error undici gives', async () => {
    const agent = new (undici().Agent)();
    try {
      // Both throw at the call (before any promise), as undici's does.
      const thrown = (f: () => unknown): unknown => {
        try {
          f();
        } catch (e) {
          return e;
        }
        return null;
      };
      const ours = thrown(() => undici().request('ftp://127.0.0.1/x', { dispatcher: agent }));
      const theirs = thrown(() => index.request('ftp://127.0.0.1/x', { dispatcher: agent }));
      expect(ours).toBeInstanceOf(index.errors.InvalidArgumentError);
      expect((ours as Error).message).toBe((theirs as Error).message);
    } finally {
      await agent.close();
    }
  });
});
