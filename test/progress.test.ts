import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { attachProgress } from '../src/cli/progress.js';
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
  bus.emit({ type: 'synced', jobs: 3, new: 3, changed: 0, unchanged: 0, skipped: 0, counts: { ...zero(), pending: 3 } });
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
    expect(out.text).toContain('1/3 done, 1 uploaded (0 reused), 3 submitted, 1 running, 0 downloading, 1 files downloaded, 0 pending, 1 failed');
    expect(out.text).toContain('6/6 estimated credits sent');
    const json = new Sink(false);
    const bus2 = new EventBus();
    const stop2 = attachProgress(bus2, { json: true, tty: false, out: json });
    script(bus2);
    stop2();
    const events = json.text.trim().split('\n').map((l) => JSON.parse(l) as { type: string });
    expect(events.filter((e) => e.type === 'sending')).toHaveLength(3);
  });
});
