import { mkdirSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { downloadFile } from '../src/download/index.js';
import { NetworkError } from '../src/errors.js';
import { startFakeService, type FakeService } from './helpers/fake-service.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Download pace (src/download/pace.ts): idle timeouts restart on every byte, so a server dripping one
 * byte every few seconds kept a download open for ever. Now a download must get its headers within a
 * deadline and then at least a minimum rate over every window, or it is cut with a NetworkError (which
 * the run's retry layer retries). Small windows here; the run's are 60 s and 1 KiB/s.
 */

const t = tempDir('genbatch-download-pace-');
const closers: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});
afterAll(() => t.cleanup());
let n = 0;
const sub = (name: string): string => {
  const dir = join(t.dir, `${name}-${n++}`);
  mkdirSync(dir);
  return dir;
};

async function dripping(opts: { length?: number; headersAfterMs?: number }): Promise<FakeService> {
  const s = await startFakeService((_req, _body, res) => {
    const start = (): void => {
      res.writeHead(200, { 'content-type': 'image/png', ...(opts.length !== undefined ? { 'content-length': opts.length } : {}) });
      const timer = setInterval(() => (res.destroyed ? clearInterval(timer) : res.write('x')), 20);
      res.on('close', () => clearInterval(timer));
    };
    if (opts.headersAfterMs !== undefined) setTimeout(start, opts.headersAfterMs);
    else start();
  });
  closers.push(() => s.close());
  return s;
}

async function failure(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

const PACE = { minBytesPerSec: 1024, windowMs: 300, headersMs: 300 };

describe('download pace', () => {
  it.each([
    ['streamed (no file_size)', undefined, undefined],
    ['whole body (small file_size)', 1000, 1000],
  ])('cuts a body dripped one byte at a time, slower than the minimum rate over a window: %s', async (_name, length, expectedSize) => {
    const s = await dripping({ ...(length !== undefined ? { length } : {}) });
    const dir = sub('drip');
    const t0 = performance.now();
    const err = await failure(downloadFile({ url: `${s.base}/files/a.png?token=secret`, dir, name: 'a.png', expectedSize: expectedSize ?? null, pace: PACE }));
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as NetworkError).sent).toBe(true);
    expect((err as Error).message).toMatch(new RegExp(`^download of ${s.base}/files/a\\.png: slower than 1 KiB/s over 0\\.3 s \\(\\d+ bytes; cut\\)$`));
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(await readdir(dir)).toEqual([]); // no temporary file left
  });

  it('cuts a download whose headers do not come within the headers deadline', async () => {
    const s = await dripping({ headersAfterMs: 3_000 });
    const err = await failure(downloadFile({ url: `${s.base}/files/b.png`, dir: sub('late'), name: 'b.png', pace: PACE }));
    expect(err).toBeInstanceOf(NetworkError);
    expect((err as Error).message).toBe(`download of ${s.base}/files/b.png: no answer within 0.3 s (cut)`);
  });

  it('keeps a download that stays above the minimum rate', async () => {
    const s = await startFakeService((_req, _body, res) => {
      res.writeHead(200, { 'content-type': 'image/png', 'content-length': 40_000 });
      let sent = 0;
      const timer = setInterval(() => {
        res.write(Buffer.alloc(4_000, 1));
        sent += 4_000;
        if (sent >= 40_000) {
          clearInterval(timer);
          res.end();
        }
      }, 50);
    });
    closers.push(() => s.close());
    const r = await downloadFile({ url: `${s.base}/files/c.png`, dir: sub('steady'), name: 'c.png', pace: PACE });
    expect(r.size).toBe(40_000);
  });
});
