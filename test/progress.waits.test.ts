import { writeFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UploadLimiter, type LimiterWait } from '../src/client/index.js';
import { attachProgress } from '../src/cli/progress.js';
import { EventBus } from '../src/engine/index.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import type { JobState } from '../src/store/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Every wait says what it waits for (issue 23 item 4): the upload limiter tells when callers queue for the
 * 5-a-minute window and when the queue empties; the engine makes that a `wait` event; the plain line and the
 * bars name it (`waiting for the upload window: 5 a minute, next in 41 s`); `estimate` says how long the
 * uploads alone take for more than 5 local images.
 */

class Sink extends Writable {
  text = '';
  isTTY: boolean;
  columns = 160;
  rows = 40;
  constructor(tty: boolean) {
    super();
    this.isTTY = tty;
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: () => void): void {
    this.text += chunk.toString();
    cb();
  }
}
const zero = (): Record<JobState, number> => ({ pending: 0, submitting: 0, submitted: 0, downloading: 0, done: 0, failed: 0, uncertain: 0, expired: 0, skipped: 0, exists: 0 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const SCALE = '0.005';
const KEY = 'sk-test-waits-0123456789';
let sb: Sandbox;
const tmp = tempDir('genbatch-waits-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 4 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  tmp.cleanup();
});

/** A manifest of `n` edits, each of its own local PNG (n distinct uploads). */
function editManifest(name: string, n: number): string {
  const lines = ['jobs:'];
  for (let i = 0; i < n; i++) {
    writeFileSync(join(tmp.dir, `${name}-${i}.png`), solidPng(8, 8, [(i * 37) % 256, 40, 90]));
    lines.push(`  - id: ${name}-${i}`, '    model: alpha-image-2-edit', '    input:', `      prompt: "edit ${i}"`, `      image_urls: ["${name}-${i}.png"]`);
  }
  const path = join(tmp.dir, `${name}.yaml`);
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

describe('the upload window as a wait', () => {
  it('the limiter tells when a caller queues (how many, when the next slot frees) and when the queue is empty again', async () => {
    const heard: LimiterWait[] = [];
    const limiter = new UploadLimiter({ limit: 2, windowMs: 200, onWait: (w) => heard.push(w) });
    const a = await limiter.acquire();
    const b = await limiter.acquire();
    expect(heard).toEqual([]);
    const c = limiter.acquire();
    // Both slots are in flight: the next slot frees when one of them ends, not at a known time.
    expect(heard).toEqual([{ queued: 1, nextInMs: null }]);
    a();
    expect(heard.at(-1)!.queued).toBe(1);
    expect(heard.at(-1)!.nextInMs).toBeGreaterThan(0);
    expect(heard.at(-1)!.nextInMs).toBeLessThanOrEqual(200);
    (await c)();
    b();
    expect(heard.at(-1)).toEqual({ queued: 0, nextInMs: null });
  });

  it('a waiter that gives up (abort) leaves the wait over when it was the last', async () => {
    const heard: LimiterWait[] = [];
    const limiter = new UploadLimiter({ limit: 1, windowMs: 60_000, onWait: (w) => heard.push(w) });
    await limiter.acquire();
    const stop = new AbortController();
    const waiting = limiter.acquire(stop.signal);
    stop.abort();
    await expect(waiting).rejects.toBeDefined();
    expect(heard).toEqual([{ queued: 1, nextInMs: null }, { queued: 0, nextInMs: null }]);
  });

  it('the plain line names the status-read rate while it holds the run, and drops it when it is over', async () => {
    const bus = new EventBus();
    const out = new Sink(false);
    const stop = attachProgress(bus, { json: false, tty: false, out, err: new Sink(false), everyS: 0.01 });
    bus.emit({ type: 'synced', jobs: 30, new: 30, changed: 0, unchanged: 0, skipped: 0, counts: { ...zero(), pending: 15, submitted: 15 }, files: 0 });
    bus.emit({ type: 'estimate', pending_credits: 30, total_credits: 60, unknown_price_jobs: [], balance: null });
    bus.emit({ type: 'wait', what: 'status-rate', rule: '0.1 a second', queued: 12, next_in_ms: null });
    await sleep(60);
    expect(out.text).toMatch(/^genbatch: 0\/30 done, .*, waiting for the status-read rate: 0\.1 a second \(--status-rate\), 12 due$/m);
    bus.emit({ type: 'wait', what: 'status-rate', rule: '0.1 a second', queued: 0, next_in_ms: null });
    const mark = out.text.length;
    await sleep(60);
    stop();
    expect(out.text.slice(mark)).not.toContain('waiting');
  });

  it('the plain line (not a TTY) and the bars (TTY) name the upload window while it holds the run, and drop it after', async () => {
    for (const tty of [false, true]) {
      const bus = new EventBus();
      const out = new Sink(false);
      const err = new Sink(tty);
      const stop = attachProgress(bus, { json: false, tty, out, err, everyS: 0.01 });
      bus.emit({ type: 'synced', jobs: 30, new: 30, changed: 0, unchanged: 0, skipped: 0, counts: { ...zero(), pending: 15, submitted: 15 }, files: 0 });
      bus.emit({ type: 'estimate', pending_credits: 30, total_credits: 60, unknown_price_jobs: [], balance: null });
      bus.emit({ type: 'wait', what: 'upload-window', rule: '5 a minute', queued: 3, next_in_ms: 41_000 });
      await sleep(tty ? 300 : 60); // the bars are redrawn every 200 ms
      const during = tty ? err.text : out.text;
      expect(during, String(tty)).toMatch(tty ? /waiting\s+waiting for the upload window: 5 a minute, next in 41 s/ : /^genbatch: 0\/30 done, .*, waiting for the upload window: 5 a minute, next in 41 s$/m);
      bus.emit({ type: 'wait', what: 'upload-window', rule: '5 a minute', queued: 0, next_in_ms: null });
      const mark = out.text.length;
      await sleep(60);
      stop();
      if (!tty) expect(out.text.slice(mark)).not.toContain('waiting');
    }
  });

  it('a run with more than 5 local images reports its waits for the upload window (--json), ending with the queue empty', async () => {
    const m = editManifest('wait', 8);
    const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', join(tmp.dir, 'out'), '--yes', '--json'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    const waits = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; what?: string; rule?: string; queued?: number }).filter((e) => e.type === 'wait');
    expect(waits.length).toBeGreaterThan(1);
    expect(waits.every((w) => w.what === 'upload-window' && w.rule === '5 a minute')).toBe(true);
    expect(Math.max(...waits.map((w) => w.queued!))).toBeGreaterThanOrEqual(1);
    expect(waits.at(-1)!.queued).toBe(0);
  }, 120_000);
});

describe('estimate and the upload window', () => {
  it('says how long the uploads alone take for more than 5 local images (each distinct file once), and nothing for 5', async () => {
    const many = editManifest('many', 12);
    // A thirteenth job naming a file already named: still 12 uploads.
    writeFileSync(many, `${(await import('node:fs')).readFileSync(many, 'utf8')}  - id: again\n    model: alpha-image-2-edit\n    input:\n      prompt: "again"\n      image_urls: ["many-0.png"]\n`);
    const r = await runCli(['estimate', '--offline', many]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('uploads: 12 local images: the uploads alone take up to 2m 02s (the service takes 5 a minute;');
    const json = JSON.parse((await runCli(['estimate', '--offline', '--json', many])).stdout) as { local_images: number; upload_seconds: number };
    expect(json.local_images).toBe(12);
    expect(json.upload_seconds).toBeCloseTo(122.4, 6);
    const five = await runCli(['estimate', '--offline', editManifest('five', 5)]);
    expect(five.code).toBe(0);
    expect(five.stdout).not.toContain('uploads:');
  }, 120_000);
});

describe('the credit cap and callbacks as waits', () => {
  it('the plain line names the credit cap while it holds the next submit, and drops it once it is over', async () => {
    const bus = new EventBus();
    const out = new Sink(false);
    const stop = attachProgress(bus, { json: false, tty: false, out, err: new Sink(false), everyS: 0.01 });
    bus.emit({ type: 'synced', jobs: 10, new: 10, changed: 0, unchanged: 0, skipped: 0, counts: { ...zero(), pending: 9, submitted: 1 }, files: 0 });
    bus.emit({ type: 'estimate', pending_credits: 30, total_credits: 30, unknown_price_jobs: [], balance: null });
    bus.emit({ type: 'wait', what: 'credit-cap', rule: "job c-1 sent alone to learn its class's price", queued: 1, next_in_ms: null });
    await sleep(60);
    expect(out.text).toMatch(/^genbatch: 0\/10 done, .*, waiting for the credit cap: job c-1 sent alone to learn its class's price$/m);
    bus.emit({ type: 'wait', what: 'credit-cap', rule: "job c-1 sent alone to learn its class's price", queued: 0, next_in_ms: null });
    const mark = out.text.length;
    await sleep(60);
    stop();
    expect(out.text.slice(mark)).not.toContain('waiting');
  });

  it('with --listen, once nothing is left to send, the line says how many callbacks are outstanding', async () => {
    const bus = new EventBus();
    const out = new Sink(false);
    const stop = attachProgress(bus, { json: false, tty: false, out, err: new Sink(false), everyS: 0.01 });
    bus.emit({ type: 'listening', address: '127.0.0.1:9999', public_url: 'http://127.0.0.1:9999/' });
    bus.emit({ type: 'synced', jobs: 12, new: 12, changed: 0, unchanged: 0, skipped: 0, counts: { ...zero(), pending: 2, submitted: 10 }, files: 0 });
    bus.emit({ type: 'estimate', pending_credits: 4, total_credits: 24, unknown_price_jobs: [], balance: null });
    await sleep(60);
    expect(out.text).not.toContain('waiting for callbacks');
    bus.emit({ type: 'job', id: 'a', from: 'pending', to: 'submitted', task_id: 't-a', error: null });
    bus.emit({ type: 'job', id: 'b', from: 'pending', to: 'submitted', task_id: 't-b', error: null });
    await sleep(60);
    stop();
    expect(out.text).toMatch(/^genbatch: 0\/12 done, .*, waiting for callbacks: 12 outstanding$/m);
  });

  it('a capped run that learns a price class says so in a wait event (--json), and the wait ends', async () => {
    const lines = ['jobs:'];
    for (let i = 0; i < 4; i++) lines.push(`  - id: c-${i}`, '    model: alpha-image-2', '    input:', `      prompt: "capped ${i}"`);
    const m = join(tmp.dir, 'capped.yaml');
    writeFileSync(m, lines.join('\n') + '\n');
    const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', join(tmp.dir, 'capped'), '--max-credits', '1000', '--yes', '--json'], { GENBATCH_API_KEY: KEY, HOME: tmp.dir, XDG_CONFIG_HOME: tmp.dir });
    expect(r.code, r.stderr).toBe(0);
    const waits = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { type: string; what?: string; rule?: string; queued?: number }).filter((e) => e.type === 'wait' && e.what === 'credit-cap');
    expect(waits.length).toBeGreaterThanOrEqual(2);
    expect(waits[0]).toMatchObject({ queued: 1 });
    expect(waits.map((w) => w.rule)).toContain("job c-0 sent alone to learn its class's price");
    expect(waits.at(-1)!.queued).toBe(0);
  }, 120_000);
});
