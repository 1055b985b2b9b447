import { afterEach, describe, expect, it } from 'vitest';
import { parseFaults, startSandbox, type Sandbox, type SandboxOptions } from '../src/sandbox/index.js';

const FLASH = 'vendora/dream-v5.0-flash/text-to-image';
const open: Sandbox[] = [];

async function sandbox(o: SandboxOptions = {}): Promise<Sandbox> {
  const sb = await startSandbox({ keys: { k1: 1000 }, timeScale: 0.001, seed: 3, ...o });
  open.push(sb);
  return sb;
}

afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => s.close()));
});

const auth = { authorization: 'Bearer k1', 'content-type': 'application/json' };
const submitBody = JSON.stringify({ model: FLASH, input: { prompt: 'p' } });
const submit = (sb: Sandbox) => fetch(`${sb.url}/api/generate/submit`, { method: 'POST', headers: auth, body: submitBody });

describe('sandbox faults', () => {
  it('parses fault specs and rejects bad ones with the item named', () => {
    expect(parseFaults('submit:500=0.1, status:429=0.05,*:slow=0.1/300,file:truncate=1')).toEqual([
      { endpoint: 'submit', kind: '500', rate: 0.1 },
      { endpoint: 'status', kind: '429', rate: 0.05 },
      { endpoint: '*', kind: 'slow', rate: 0.1, delayMs: 300 },
      { endpoint: 'file', kind: 'truncate', rate: 1 },
    ]);
    expect(() => parseFaults('submit:truncate=0.1')).toThrow(/truncate/);
    expect(() => parseFaults('status:500-after=0.1')).toThrow(/submit/);
    expect(() => parseFaults('nowhere:500=0.1')).toThrow(/nowhere/);
    expect(() => parseFaults('submit:500=2')).toThrow(/0 to 1/);
    expect(() => parseFaults('submit:418=0.5')).toThrow(/418/);
  });

  it('injects 429 with Retry-After, 500, 502 and 503 in each endpoint style', async () => {
    const sb = await sandbox({ faults: 'balance:429=1,status:503=1' });
    const b = await fetch(`${sb.url}/api/user/balance`, { headers: auth });
    expect(b.status).toBe(429);
    expect(b.headers.get('retry-after')).toBe('1');
    expect(await b.json()).toEqual({ code: 429, error: { message: expect.any(String), type: 'rate_limit_error' } });
    const s = await fetch(`${sb.url}/api/generate/status/x`, { headers: auth });
    expect(s.status).toBe(503);
    expect(await s.json()).toEqual({ detail: 'service unavailable' });
    sb.script('submit', ['500', '502', '503', 'ok']);
    const codes = [];
    for (let i = 0; i < 4; i++) codes.push((await submit(sb)).status);
    expect(codes).toEqual([500, 502, 503, 200]);
    const stats = sb.stats();
    expect(stats.tasks_total).toBe(1);
    expect(stats.faults_injected).toMatchObject({ 'balance:429': 1, 'status:503': 1, 'submit:500': 1, 'submit:502': 1, 'submit:503': 1 });
  });

  it('500 before creates nothing; 500-after, 502-after and drop-after create and charge the task', async () => {
    const sb = await sandbox();
    sb.script('submit', ['500', '500-after', '502-after', 'drop-after']);
    expect((await submit(sb)).status).toBe(500);
    expect(sb.stats().tasks_total).toBe(0);
    const after = await submit(sb);
    expect(after.status).toBe(500);
    expect(((await after.json()) as { error: { type: string } }).error.type).toBe('internal_error');
    expect((await submit(sb)).status).toBe(502);
    await expect(submit(sb)).rejects.toThrow();
    const stats = sb.stats();
    expect(stats.tasks_total).toBe(3);
    const bal = (await (await fetch(`${sb.url}/api/user/balance`, { headers: auth })).json()) as { data: { balance: number } };
    expect(bal.data.balance).toBe(1000 - 3 * 4);
  });

  it('drops the connection before any response', async () => {
    const sb = await sandbox({ faults: 'balance:drop=1' });
    await expect(fetch(`${sb.url}/api/user/balance`, { headers: auth })).rejects.toThrow();
    expect(sb.stats().faults_injected['balance:drop']).toBe(1);
  });

  it('answers normally after a slow fault', async () => {
    const sb = await sandbox({ faults: '*:slow=1/20' });
    const r = await fetch(`${sb.url}/api/user/balance`, { headers: auth });
    expect(r.status).toBe(200);
    expect(sb.stats().faults_injected['balance:slow']).toBe(1);
  });

  it('truncates a file download after a correct Content-Length', async () => {
    const sb = await sandbox();
    const id = ((await (await submit(sb)).json()) as { data: { task_id: string } }).data.task_id;
    sb.clock.advance(120);
    const st = (await (await fetch(`${sb.url}/api/generate/status/${id}`, { headers: auth })).json()) as { data: { files: Array<{ file_url: string; file_size: number }> } };
    const file = st.data.files[0];
    if (!file) throw new Error('no file');
    sb.script('file', ['truncate']);
    const res = await fetch(file.file_url);
    expect(res.status).toBe(200);
    expect(Number(res.headers.get('content-length'))).toBe(file.file_size);
    await expect(res.arrayBuffer()).rejects.toThrow();
    const whole = await fetch(file.file_url);
    expect((await whole.arrayBuffer()).byteLength).toBe(file.file_size);
  });

  it('draws random faults reproducibly from the seed', async () => {
    const runs: number[][] = [];
    for (let i = 0; i < 2; i++) {
      const sb = await sandbox({ seed: 11, faults: 'balance:500=0.5' });
      const codes = [];
      for (let j = 0; j < 12; j++) codes.push((await fetch(`${sb.url}/api/user/balance`, { headers: auth })).status);
      runs.push(codes);
    }
    expect(runs[0]).toEqual(runs[1]);
    expect(runs[0]).toContain(500);
    expect(runs[0]).toContain(200);
  });

  it('takes scripted faults over HTTP at /__sandbox/faults', async () => {
    const sb = await sandbox();
    const ok = await fetch(`${sb.url}/__sandbox/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ endpoint: 'balance', steps: ['503'] }) });
    expect(ok.status).toBe(200);
    expect((await fetch(`${sb.url}/api/user/balance`, { headers: auth })).status).toBe(503);
    expect((await fetch(`${sb.url}/api/user/balance`, { headers: auth })).status).toBe(200);
    const bad = await fetch(`${sb.url}/__sandbox/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ endpoint: 'balance', steps: ['teapot'] }) });
    expect(bad.status).toBe(400);
  });
});
