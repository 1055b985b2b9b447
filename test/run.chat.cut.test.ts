import { request as httpRequest, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { replyText } from '../src/sandbox/chat/reply.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * A stream cut inside an event: the connection ends cleanly (terminating chunk
 * sent) in the middle of an SSE event, as a proxy or gateway that gives up on a
 * long stream does. The partial event is not an unusable answer but a broken
 * stream: the call is made again. The real sandbox (in this process) sits behind
 * a small pass-through proxy that cuts the first chat stream halfway through an
 * event; `genbatch run` is the real CLI in a child process.
 */
const KEY = 'sk-test-chat-cut-0123456789';
const SEED = 13;
const SCALE = '0.005';

let sb: Sandbox;
let proxy: Server;
let proxyUrl = '';
/** Chat stream answers the proxy still has to cut (one per call). */
let cutsLeft = 0;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: SEED });
  const target = new URL(sb.url);
  proxy = createServer((req, res) => {
    const up = httpRequest({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers }, (upRes) => {
      const isStream = String(upRes.headers['content-type'] ?? '').startsWith('text/event-stream');
      if (!isStream || cutsLeft === 0) {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
        return;
      }
      cutsLeft--;
      const chunks: Buffer[] = [];
      upRes.on('data', (c: Buffer) => chunks.push(c));
      upRes.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        // Halfway through the body, inside an event: after the first `{` past the middle.
        const at = body.indexOf('{', Math.floor(body.length / 2)) + 1;
        const headers = { ...upRes.headers };
        delete headers['content-length'];
        res.writeHead(200, headers);
        res.end(body.slice(0, at)); // a clean end of the response: no socket error
      });
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
}, 120_000);
afterAll(async () => {
  await new Promise<void>((r) => proxy?.close(() => r()));
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

const PROTOCOLS = [
  { protocol: 'chat-completions', model: 'vendora/chat-5' },
  { protocol: 'responses', model: 'vendora/chat-5' },
  { protocol: 'messages', model: 'vendorb/verse-4.5' },
  { protocol: 'gemini', model: 'vendorc/lumen-2.5-pro' },
] as const;

describe('a chat stream cut inside an event', () => {
  it.each(PROTOCOLS)('$protocol: the partial event is a broken stream, the call is made again and the job is done', async ({ protocol, model }) => {
    const t = tempDir('genbatch-chat-cut-');
    cleanups.push(t.cleanup);
    const out = join(t.dir, 'out');
    const user = `Write a long enough caption for the cut test of ${protocol} with several words`;
    const manifest = join(t.dir, 'm.yaml');
    writeFileSync(
      manifest,
      ['jobs:', '  - id: c1', `    model: ${model}`, `    protocol: ${protocol}`, '    input:', '      stream: true', '      messages:', `        - {role: user, content: "${user}"}`].join('\n') + '\n',
    );
    cutsLeft = 1;
    const r = await runCli(['run', manifest, '--base-url', proxyUrl, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(cutsLeft).toBe(0);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const job = readJobs(join(out, 'state.db')).find((j) => j.id === 'c1')!;
    expect(job.state).toBe('done');
    expect(job.attempts).toBe(2);
    expect(readFileSync(join(out, 'c1', 'response.txt'), 'utf8')).toBe(replyText(SEED, { model, texts: [user], lastUser: user }));
  }, 60_000);
});
