import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { downloadFile } from '../src/download/index.js';
import { tempDir } from './helpers/tmp.js';

/**
 * undici's global dispatcher is one per process, kept under Symbol.for keys that every copy of undici
 * shares, Node's own included: the first to load installs its Agent there. On Node 22, the undici bundled
 * in Node (loaded by a fetch() call, or by the sandbox's server) installed an Agent that refuses the
 * downloader's handlers ("invalid onError method"): a library user who started the sandbox before run()
 * had every download fail. Here another dispatcher is installed there, as another copy of undici would.
 */

const BIG = Buffer.alloc(100_000, 7);
const SMALL = Buffer.alloc(1_000, 9);
let server: Server;
let base: string;
const work = tempDir('genbatch-dispatcher-');
const KEYS = [Symbol.for('undici.globalDispatcher.1'), Symbol.for('undici.globalDispatcher.2')];
const global = globalThis as unknown as Record<symbol, unknown>;

beforeAll(async () => {
  server = createServer((req, res) => {
    const body = req.url === '/small.bin' ? SMALL : BIG;
    res.writeHead(200, { 'content-length': body.length });
    res.end(body);
  }).listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.close();
  work.cleanup();
});

describe('downloads and the process-wide dispatcher', () => {
  it("go through genbatch's own dispatcher, not one another copy of undici installed for the whole process", async () => {
    const foreign: string[] = [];
    const saved = KEYS.map((k) => global[k]);
    for (const k of KEYS) {
      global[k] = {
        dispatch(opts: { path: string }) {
          foreign.push(opts.path);
          throw new Error('invalid onError method');
        },
      };
    }
    try {
      // The whole-body path (file_size known and small) and the streaming path (file_size unknown).
      const whole = await downloadFile({ url: `${base}/small.bin`, dir: join(work.dir, 'a'), name: 'small.bin', expectedSize: SMALL.length });
      const streamed = await downloadFile({ url: `${base}/big.bin`, dir: join(work.dir, 'b'), name: 'big.bin' });
      expect([whole.size, streamed.size]).toEqual([SMALL.length, BIG.length]);
      expect(foreign).toEqual([]);
    } finally {
      KEYS.forEach((k, i) => (global[k] = saved[i]));
    }
  });
});
