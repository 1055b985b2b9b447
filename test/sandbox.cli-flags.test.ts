import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { sandboxOptions } from '../src/cli/commands/sandbox.js';
import { UsageError } from '../src/errors.js';
import { resolveOptions } from '../src/sandbox/options.js';
import { ROOT, runCli } from './helpers/cli.js';
import { startSandboxProcess, type SandboxProcess } from './helpers/sandbox-process.js';

/**
 * The option flags of `genbatch sandbox` (--partial-rate, --banned-words, --policy-words, --slow-ms,
 * --retry-after, --image-edge, --callback-timeout-ms, --clock-start): the built CLI in a child
 * process, real HTTP against it; the admin clock moves task time, so nothing waits on durations.
 */

const FLASH = 'vendora/dream-v5.0-flash/text-to-image';
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

beforeAll(() => {
  // `npm test` builds in pretest; a lone run after editing these sources builds here.
  const built = (f: string) => statSync(join(ROOT, 'dist', f), { throwIfNoEntry: false })?.mtimeMs ?? -1;
  const src = (f: string) => statSync(join(ROOT, 'src', f)).mtimeMs;
  if (built('cli/commands/sandbox.js') < src('cli/commands/sandbox.ts') || built('cli/main.js') < src('cli/main.ts') || built('sandbox/options.js') < src('sandbox/options.ts')) {
    spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', ROOT]);
  }
}, 120_000);

const open: SandboxProcess[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.stop()));
});

async function serve(args: string[]): Promise<SandboxProcess> {
  const sb = await startSandboxProcess(['--keys', 'k=100000', '--time-scale', '0.001', '--seed', '5', ...args]);
  open.push(sb);
  return sb;
}

async function call(sb: SandboxProcess, method: string, path: string, body?: unknown) {
  const headers: Record<string, string> = { authorization: `Bearer ${sb.key}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(sb.url + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Json };
}
const submit = (sb: SandboxProcess, model: string, input: Json, extra: Json = {}) => call(sb, 'POST', '/api/generate/submit', { model, input, ...extra });
const taskOf = async (sb: SandboxProcess, id: string) => (await call(sb, 'GET', `/api/generate/status/${id}`)).body.data as Json;
const advance = (sb: SandboxProcess, s: number) => call(sb, 'POST', '/__sandbox/clock', { advance_s: s });

describe('genbatch sandbox option flags', () => {
  it('--banned-words and --policy-words replace the default words', async () => {
    const sb = await serve(['--banned-words', 'dragon, Castle', '--policy-words', 'kraken']);
    const dragon = await submit(sb, FLASH, { prompt: 'a dragon in the snow' });
    expect(dragon).toMatchObject({ status: 400, body: { code: 400, error: { type: 'content_moderation_error', message: expect.stringContaining('input.prompt') } } });
    expect((await submit(sb, FLASH, { prompt: 'a CASTLE at dusk' })).body.error.type).toBe('content_moderation_error');
    const forbidden = await submit(sb, FLASH, { prompt: 'the forbidden fruit' });
    expect(forbidden.status).toBe(200);
    const kraken = await submit(sb, FLASH, { prompt: 'a kraken rises' });
    const unsafe = await submit(sb, FLASH, { prompt: 'unsafe-output' });
    await advance(sb, 120);
    expect(await taskOf(sb, kraken.body.data.task_id as string)).toMatchObject({
      status: 'failed',
      files: [],
      error_message: 'content policy violation: the generated output was flagged and withheld',
    });
    expect((await taskOf(sb, unsafe.body.data.task_id as string)).status).toBe('finished');
    expect((await taskOf(sb, forbidden.body.data.task_id as string)).status).toBe('finished');
  });

  it('--banned-words "" and --policy-words "" mean no words at all', async () => {
    const sb = await serve(['--banned-words', '', '--policy-words', '']);
    const r = await submit(sb, FLASH, { prompt: 'forbidden unsafe-output' });
    expect(r.status).toBe(200);
    await advance(sb, 120);
    expect((await taskOf(sb, r.body.data.task_id as string)).status).toBe('finished');
  });

  it('--partial-rate 1 gives an n > 1 task fewer outputs and refunds the rest', async () => {
    const sb = await serve(['--partial-rate', '1']);
    const id = (await submit(sb, 'dream-4', { prompt: 'owls', n: 4 })).body.data.task_id as string;
    await advance(sb, 120);
    const files = (await taskOf(sb, id)).files as Json[];
    expect(files.length).toBeGreaterThanOrEqual(1);
    expect(files.length).toBeLessThan(4);
    expect((await call(sb, 'GET', '/api/user/balance')).body.data.balance).toBe(100000 - 4 * files.length);
  });

  it('--image-edge sets the served size and --clock-start the virtual clock', async () => {
    const sb = await serve(['--image-edge', '40', '--clock-start', '2030-05-06T07:08:09']);
    const r = await submit(sb, FLASH, { prompt: 'a fox', size: '16:9', output_format: 'png' });
    expect(r.body.data.created_time).toMatch(/^2030-05-06T07:08:/);
    await advance(sb, 120);
    const file = ((await taskOf(sb, r.body.data.task_id as string)).files as Json[])[0]!;
    expect(file.metadata).toMatchObject({ served_width: 40, served_height: 23 });
    const png = Buffer.from(await (await fetch(file.file_url as string)).arrayBuffer());
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([40, 23]);
    const epoch = await serve(['--clock-start', String(Date.UTC(2031, 0, 2))]);
    expect((await submit(epoch, FLASH, { prompt: 'a fox' })).body.data.created_time).toMatch(/^2031-01-02T00:00:/);
  });

  it('--retry-after sets the 429 fault header and --slow-ms the slow fault delay', async () => {
    // --slow-ms above the 2000 ms default: a lower bound proves the flag, and a loaded machine only adds time.
    const sb = await serve(['--retry-after', '7', '--slow-ms', '2600', '--faults', 'status:429=1,balance:slow=1']);
    const s = await call(sb, 'GET', '/api/generate/status/abc');
    expect(s.status).toBe(429);
    expect(s.headers.get('retry-after')).toBe('7');
    const t0 = performance.now();
    expect((await call(sb, 'GET', '/api/user/balance')).status).toBe(200);
    const took = performance.now() - t0;
    expect(took).toBeGreaterThanOrEqual(2580);
  });

  it('--callback-timeout-ms is how long a callback receiver may take before the retry', async () => {
    const arrivals: number[] = [];
    const hung: ServerResponse[] = [];
    const rx = createServer((req: IncomingMessage, res: ServerResponse) => {
      arrivals.push(performance.now());
      req.resume();
      if (arrivals.length === 1) hung.push(res); // never answered: the sandbox must give up on it
      else res.end('ok');
    });
    await new Promise<void>((r) => rx.listen(0, '127.0.0.1', () => r()));
    try {
      // Far above the 1000 ms default plus the first retry's delay (1 s at most): a lower bound proves the
      // flag, and a loaded machine only adds time. The timer starts before the request reaches the
      // receiver, so the gap between arrivals may be a little under 3000 ms.
      const sb = await serve(['--allow-loopback', '--callback-timeout-ms', '3000']);
      const url = `http://127.0.0.1:${(rx.address() as AddressInfo).port}/hook`;
      expect((await submit(sb, FLASH, { prompt: 'p' }, { callback_url: url })).status).toBe(200);
      await advance(sb, 120);
      await vi.waitFor(() => expect(arrivals).toHaveLength(2), { timeout: 15_000 });
      const gap = arrivals[1]! - arrivals[0]!;
      expect(gap).toBeGreaterThanOrEqual(2500);
    } finally {
      for (const res of hung) res.destroy();
      rx.close();
    }
  });
});

describe('genbatch sandbox option flags: bad values', () => {
  const base = { port: 0, host: '127.0.0.1', timeScale: 1 };
  const cases: Array<[Record<string, string>, string]> = [
    [{ partialRate: '1.5' }, '--partial-rate expects a number from 0 to 1, got "1.5"'],
    [{ partialRate: 'half' }, '--partial-rate expects a number from 0 to 1, got "half"'],
    [{ failureRate: '2' }, '--failure-rate expects a number from 0 to 1, got "2"'],
    [{ slowMs: '-5' }, '--slow-ms expects a number from 0 to 2147483647 ms, got "-5"'],
    [{ slowMs: '3000000000' }, '--slow-ms expects a number from 0 to 2147483647 ms, got "3000000000"'],
    [{ retryAfter: 'soon' }, '--retry-after expects a non-negative number, got "soon"'],
    [{ imageEdge: '4' }, '--image-edge expects an integer number of pixels >= 8, got "4"'],
    [{ imageEdge: '' }, '--image-edge expects an integer number of pixels >= 8, got ""'],
    [{ callbackTimeoutMs: 'x' }, '--callback-timeout-ms expects a number from 0 to 2147483647 ms, got "x"'],
    [{ clockStart: 'yesterday' }, '--clock-start expects epoch ms or an ISO date such as 2026-01-01 or 2026-01-01T12:00:00Z (no zone: UTC), got "yesterday"'],
    [{ clockStart: '2026-02-30' }, 'got "2026-02-30"'],
    [{ maxConnections: '0' }, '--max-connections expects an integer from 1 to 1000000, got "0"'],
    [{ maxConnectionsPerClient: '2.5' }, '--max-connections-per-client expects an integer from 1 to 1000000, got "2.5"'],
    [{ clockStart: '99999999999999999' }, '--clock-start expects epoch ms from 0 (1970-01-01T00:00:00Z) to 250215091200000 (9899-01-01T00:00:00Z), got "99999999999999999"'],
  ];
  it('each names the flag, the range and the value given (a UsageError: exit 2)', () => {
    for (const [flags, message] of cases) {
      const f = () => sandboxOptions({ ...base, ...flags });
      expect(f, JSON.stringify(flags)).toThrow(UsageError);
      expect(f, JSON.stringify(flags)).toThrow(message);
    }
    expect(sandboxOptions({ ...base, bannedWords: ' a, ,B ', clockStart: '2026-01-01T12:00' })).toMatchObject({ bannedWords: ['a', 'B'], clockStart: Date.UTC(2026, 0, 1, 12) });
    expect(sandboxOptions({ ...base, maxConnections: '64', maxConnectionsPerClient: '8' }).connections).toEqual({ total: 64, perClient: 8 });
    expect(sandboxOptions({ ...base, maxConnectionsPerClient: '8' }).connections).toEqual({ perClient: 8 });
  });

  it('the CLI exits 2 with that one line', async () => {
    const runs: Array<[string[], string]> = [
      [['--partial-rate', '1.5'], '--partial-rate expects a number from 0 to 1, got "1.5"'],
      [['--image-edge', '4'], '--image-edge expects an integer number of pixels >= 8, got "4"'],
      [['--clock-start', 'yesterday'], '--clock-start expects epoch ms or an ISO date'],
    ];
    const results = await Promise.all(runs.map(([args]) => runCli(['sandbox', '--port', '0', ...args])));
    results.forEach((r, i) => {
      const [args, message] = runs[i]!;
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.stderr, args.join(' ')).toContain(`genbatch: ${message}`);
      expect(r.stderr.trim().split('\n'), args.join(' ')).toHaveLength(1);
      expect(r.stdout, args.join(' ')).not.toContain('listening');
    });
  });

  it('startSandbox checks the same ranges under the option names', () => {
    expect(() => resolveOptions({ imageEdge: 4 })).toThrow('imageEdge expects an integer number of pixels >= 8, got 4');
    expect(() => resolveOptions({ slowMs: 2 ** 31 })).toThrow('slowMs expects a number from 0 to 2147483647 ms, got 2147483648');
    expect(() => resolveOptions({ callbackTimeoutMs: -1 })).toThrow('callbackTimeoutMs expects a number from 0 to 2147483647 ms');
    expect(() => resolveOptions({ clockStart: Number.NaN })).toThrow('clockStart expects epoch ms from 0');
    expect(() => resolveOptions({ partialRate: 2 })).toThrow('partialRate expects a number from 0 to 1, got 2');
    expect(resolveOptions({ timeScale: 1e6 }).callbackTimeoutMs).toBe(2 ** 31 - 1);
  });
});
