import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { attachProgress } from '../src/cli/progress.js';
import { Tally } from '../src/cli/progress-tally.js';
import { EventBus } from '../src/engine/index.js';
import type { JobState } from '../src/store/index.js';

/** Progress output from engine events (issue 4, item 9): bars on a TTY, plain lines otherwise, NDJSON with --json. */
class Sink extends Writable {
  text = '';
  isTTY: boolean;
  columns = 160;
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
// eslint-disable-next-line no-control-regex
const plain = (s: string) => s.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '');

function script(bus: EventBus, finish = true): void {
  bus.emit({ type: 'start', manifest: 'm.yaml', out_dir: '/o', state: '/o/state.db', base_url: 'http://s', sandbox: false });
  bus.emit({ type: 'synced', jobs: 3, new: 3, changed: 0, unchanged: 0, skipped: 0, counts: { ...zero(), pending: 3 }, files: 0 });
  bus.emit({ type: 'estimate', pending_credits: 6, total_credits: 6, unknown_price_jobs: [], balance: 100 });
  bus.emit({ type: 'upload', file: 'a.png', sha256: 'x', url: 'http://s/u', reused: false });
  for (const id of ['a', 'b', 'c']) {
    bus.emit({ type: 'job', id, from: 'pending', to: 'submitting' });
    bus.emit({ type: 'sending', id, estimated_credits: 2 });
    bus.emit({ type: 'job', id, from: 'submitting', to: 'submitted', task_id: `t-${id}` });
  }
  bus.emit({ type: 'warning', message: 'status read failed for job b' });
  bus.emit({ type: 'job', id: 'a', from: 'submitted', to: 'downloading' });
  bus.emit({ type: 'file', id: 'a', path: 'a/x.png', size: 3, sha256: 'y' });
  bus.emit({ type: 'job', id: 'a', from: 'downloading', to: 'done' });
  bus.emit({ type: 'job', id: 'c', from: 'submitted', to: 'failed', error: 'nope' });
  if (finish) bus.emit({ type: 'finish', counts: { ...zero(), done: 1, submitted: 1, failed: 1 }, exit_code: 4, wall_seconds: 1, status_requests: 3, balance_after: 94, charged: 6, run_charged: 10 });
}

describe('progress', () => {
  it('on a TTY: bars for uploaded, submitted, running, downloaded, failed and credits; a warning shown while bars are up is printed', () => {
    const bus = new EventBus();
    const out = new Sink(false);
    const err = new Sink(true);
    const stop = attachProgress(bus, { json: false, tty: true, out, err });
    script(bus);
    stop();
    const text = plain(err.text);
    for (const name of ['uploaded', 'submitted', 'running', 'downloaded', 'failed', 'credits']) expect(text).toMatch(new RegExp(`^${name}\\s`, 'm'));
    expect(text).toContain('warning: status read failed for job b');
    expect(text).toMatch(/credits\s.* 6\/6 estimated/);
    expect(text).toMatch(/downloaded\s.* 1\/3 jobs, 1 files/);
    expect(out.text).toContain('finished in');
    // The run's charge over all its invocations, and this invocation's.
    expect(out.text).toContain('; charged 10 credits over the run, 6 in this invocation; balance 94\n');
  });

  it('not on a TTY: plain lines name every measure; --json: one JSON object per event', async () => {
    const bus = new EventBus();
    const out = new Sink(false);
    const err = new Sink(false);
    const stop = attachProgress(bus, { json: false, tty: false, out, err, everyS: 0.01 });
    script(bus, false);
    await new Promise((r) => setTimeout(r, 50));
    stop();
    expect(err.text).toContain('warning: status read failed for job b');
    expect(out.text).toContain('genbatch: 1/3 done, 1 running, 0 pending, 1 failed, 1 files, - jobs/s, ETA -, 6/6 credits sent, 1 uploaded (0 reused)');
    const json = new Sink(false);
    const bus2 = new EventBus();
    const stop2 = attachProgress(bus2, { json: true, tty: false, out: json });
    script(bus2);
    stop2();
    const events = json.text.trim().split('\n').map((l) => JSON.parse(l) as { type: string });
    expect(events.filter((e) => e.type === 'sending')).toHaveLength(3);
  });
});

describe('progress lines fit', () => {
  const big = (): Tally => {
    const t = new Tally();
    t.counts = { ...zero(), pending: 123_456, submitted: 234_567, downloading: 12_345, done: 345_678, failed: 45_678, uncertain: 5_678, expired: 678 };
    t.total = Object.values(t.counts).reduce((a, n) => a + n, 0);
    t.files = 1_234_567;
    t.credits = 12_345_678.25;
    t.creditsSent = 2_345_678.5;
    t.balance = 98_765_432.1;
    t.uploads = 1234;
    t.reused = 5678;
    return t;
  };

  it('every bar row fits the width it is given, from 10 to 200 columns, and no more rows than the height', () => {
    const t = big();
    for (let width = 10; width <= 200; width++) {
      const rows = t.bars(width, 20);
      expect(rows).toHaveLength(7);
      for (const r of rows) expect(r.length, `${width}: ${r}`).toBeLessThanOrEqual(width);
    }
    // 69 columns (a 70-column terminal): labels and bars kept, details dropped first.
    expect(t.bars(69, 20).join('\n')).toMatch(/^downloaded █+░* 345678\/768080$/m);
    expect(t.bars(159, 20).join('\n')).toMatch(/^downloaded █{18}░{22} 345678\/768080 jobs, 1234567 files$/m);
    expect(t.bars(30, 3)).toEqual([expect.stringMatching(/^done /), expect.stringMatching(/^fail /), expect.stringMatching(/^rate /)]);
  });

  it('the plain line stays under 120 characters with large counts and keeps the rate and the ETA', () => {
    const line = big().line();
    expect(line.length).toBeLessThan(120);
    expect(line).toMatch(/^genbatch: 345678\/768080 done, .*- jobs\/s, ETA -/);
  });

  it('counts jobs and files over the whole run: a resumed run starts from the counts in the state', () => {
    const bus = new EventBus();
    const err = new Sink(true);
    const stop = attachProgress(bus, { json: false, tty: true, out: new Sink(false), err });
    bus.emit({ type: 'synced', jobs: 10, new: 0, changed: 0, unchanged: 10, skipped: 0, counts: { ...zero(), done: 6, submitted: 4 }, files: 9 });
    bus.emit({ type: 'estimate', pending_credits: 0, total_credits: 20, unknown_price_jobs: [], balance: null });
    bus.emit({ type: 'job', id: 'v', from: 'submitted', to: 'downloading' });
    bus.emit({ type: 'file', id: 'v', path: 'v/a.mp4', size: 3, sha256: 'y' });
    bus.emit({ type: 'job', id: 'v', from: 'downloading', to: 'done' });
    stop();
    expect(plain(err.text)).toMatch(/^downloaded .* 7\/10 jobs, 10 files$/m);
    expect(plain(err.text)).toMatch(/^credits .* 20\/20 estimated, sent$/m);
  });

  it("a worker on PostgreSQL shows the whole run: a counts event replaces the counts and files its own events added up", async () => {
    const bus = new EventBus();
    const out = new Sink(false);
    const stop = attachProgress(bus, { json: false, tty: false, out, err: new Sink(false), everyS: 0.01 });
    bus.emit({ type: 'synced', jobs: 10, new: 0, changed: 0, unchanged: 10, skipped: 0, counts: { ...zero(), pending: 10 }, files: 0, joined: true });
    bus.emit({ type: 'estimate', pending_credits: 20, total_credits: 20, unknown_price_jobs: [], balance: null });
    // Jobs another worker had sent, taken over by this one (their lease ran out): counted out of states never counted in.
    for (const id of ['x', 'y']) bus.emit({ type: 'job', id, from: 'submitted', to: 'done' });
    await new Promise((r) => setTimeout(r, 30));
    expect(out.text).toContain('genbatch: 2/10 done, -2 running, 10 pending');
    bus.emit({ type: 'counts', counts: { ...zero(), pending: 5, submitted: 3, done: 2 }, files: 4 });
    out.text = '';
    await new Promise((r) => setTimeout(r, 30));
    stop();
    expect(out.text).toContain('genbatch: 2/10 done, 3 running, 5 pending, 0 failed, 4 files');
  });
});
