import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ServiceClient } from '../src/client/index.js';
import { undici } from '../src/client/undici.js';
import { ownDispatcher } from '../src/download/options.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';

/**
 * genbatch drops an idle connection within about 4 s, whatever the server's Keep-Alive hint says (the sandbox
 * hints 30 s; undici took the hint, less a second). Its idle sockets held a server's connections per client for
 * 29 s: against a cap on those, the service client's idle ones kept every download out (answered 503) that long.
 * The server's count of open connections shows when the client lets go.
 */
let sb: Sandbox;
beforeAll(async () => {
  sb = await startSandbox({ port: 0, keys: { k1: 1000 }, timeScale: 0.01, seed: 1 });
});
afterAll(async () => {
  await sb.close();
});

describe('idle connections', () => {
  it("the service client's and the downloads' idle sockets are closed by genbatch within seconds, not after the server's 30 s", async () => {
    const client = new ServiceClient({ baseUrl: sb.url, apiKey: 'k1' });
    try {
      await client.balance();
      const res = await undici().request(`${sb.url}/api/user/balance`, { method: 'GET', headers: { authorization: 'Bearer k1' }, dispatcher: ownDispatcher() });
      await res.body.arrayBuffer();
      expect(sb.stats().connections.open).toBe(2);
      // The server keeps an idle connection 30 s; ours go after about 4 s.
      await vi.waitFor(() => expect(sb.stats().connections.open).toBe(0), { timeout: 10_000, interval: 100 });
    } finally {
      await client.close();
    }
  }, 20_000);
});
