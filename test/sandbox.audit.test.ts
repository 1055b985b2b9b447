import { afterEach, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox, type SandboxOptions } from '../src/sandbox/index.js';

/** Gaps found by the sandbox audit (issue 3), one describe per gap. */

const FLASH = 'vendora/dream-v5.0-flash/text-to-image';
const open: Sandbox[] = [];

async function sandbox(o: SandboxOptions = {}): Promise<Sandbox> {
  const sb = await startSandbox({ keys: { k1: 1000, k2: 1000 }, timeScale: 0.001, seed: 7, ...o });
  open.push(sb);
  return sb;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function call(sb: Sandbox, method: string, path: string, key: string | null, body?: unknown, headers: Record<string, string> = {}) {
  const h: Record<string, string> = { ...headers };
  if (key !== null) h.authorization = `Bearer ${key}`;
  if (body !== undefined && h['content-type'] === undefined) h['content-type'] = 'application/json';
  const res = await fetch(sb.url + path, { method, headers: h, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  let json: Json = {};
  try {
    json = JSON.parse(text) as Json;
  } catch {
    json = { text };
  }
  return { status: res.status, headers: res.headers, body: json };
}

describe('clock bounds', () => {
  it('refuses an advance past 100 years, negative or non-numeric, and keeps working', async () => {
    const sb = await sandbox();
    for (const advance_s of [1e13, -5, 'soon', null]) {
      const r = await call(sb, 'POST', '/__sandbox/clock', null, { advance_s });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toMatch(/^advance_s: /);
    }
    const big = await call(sb, 'POST', '/__sandbox/clock', null, { advance_s: 1e13 });
    expect(big.body.error.message).toContain('100 years');
    expect(() => sb.clock.advance(1e13)).toThrow(/100 years/);
    expect(() => sb.clock.advance(Number.POSITIVE_INFINITY)).toThrow(RangeError);
    const ok = await call(sb, 'POST', '/__sandbox/clock', null, { advance_s: 50 * 365 * 24 * 3600 });
    expect(ok.status).toBe(200);
    const s = await call(sb, 'POST', '/api/generate/submit', 'k1', { model: FLASH, input: { prompt: 'a fox' } });
    expect(s.status).toBe(200);
    expect(s.body.data.created_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$/);
    expect((await call(sb, 'GET', '/__sandbox/clock', null)).status).toBe(200);
  });
});
