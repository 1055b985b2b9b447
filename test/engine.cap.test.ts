import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CreditCap, LocalLedger, classOf } from '../src/engine/pipeline/cap.js';
import type { EngineEvent } from '../src/engine/events.js';
import type { JobRow } from '../src/store/index.js';

/**
 * The credit cap (src/engine/pipeline/cap.ts): a run is never charged more than its cap plus one task per process. A
 * job goes only when spent + reserved + its expected price fits; a new price class goes alone and is measured
 * by the balance; a failed balance reading is retried, and after five in a row nothing more is sent. The
 * balance is the service's port, a function here; the clock is faked, so each step is decided by the test.
 */

beforeEach(() => {
  vi.useFakeTimers({ now: 1_000_000 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** A stored job of `model` (jobs of one unknown model are one price class), `estimate` credits expected. */
function job(id: string, model: string, estimate: number | null, kind = 'submit'): JobRow {
  const at = new Date(0).toISOString();
  const spec = JSON.stringify({ model, input: { prompt: id }, refs: [] });
  return { id, seq: 0, model, kind, where: `m.yaml:${id}`, spec_hash: id, spec, submitted_input: null, state: 'pending', task_id: null, attempts: 0, created_at: at, updated_at: at, submitted_at: null, finished_at: null, expires_at: null, last_error: null, result: null, estimated_credits: estimate, permanent: 0, uncertain_at: null };
}

interface Harness {
  cap: CreditCap;
  events: EngineEvent[];
  balance: { value: number | (() => number) };
  /** Start the reading tick() says is due now and wait for its end. */
  read: () => Promise<void>;
}
function harness(credits: number, o: { spent?: number; opening?: number | null; timeScale?: number } = {}): Harness {
  const events: EngineEvent[] = [];
  const balance = { value: 1000 as number | (() => number) };
  const cap = new CreditCap({
    credits,
    name: `--max-credits ${credits}`,
    ledger: new LocalLedger(credits, o.spent ?? 0, o.opening ?? null),
    balance: async () => (typeof balance.value === 'number' ? balance.value : balance.value()),
    timeScale: o.timeScale ?? 1,
    emit: (e) => events.push(e),
  });
  const read = async (): Promise<void> => {
    const woken = new Promise<void>((r) => (cap.wake = r));
    expect(cap.tick(Date.now())).toBe(Infinity);
    expect(cap.busy).toBe(1);
    await woken;
    expect(cap.busy).toBe(0);
  };
  return { cap, events, balance, read };
}
/** Job `id` sent and ended in `to`, as StageContext.move tells the cap. */
function sendAndEnd(cap: CreditCap, id: string, to: 'done' | 'failed' | 'pending' | 'uncertain' | 'downloading'): void {
  cap.moved(id, 'pending', 'submitting');
  cap.moved(id, 'submitting', 'submitted');
  cap.moved(id, 'submitted', to);
}
const warnings = (events: EngineEvent[]): string[] => events.flatMap((e) => (e.type === 'warning' ? [e.message] : []));

describe('a price class not seen yet', () => {
  it('its first job waits for a balance reading, then goes alone, reserving its estimate', async () => {
    const { cap, read } = harness(100);
    expect([cap.credits, cap.name, cap.totals]).toEqual([100, '--max-credits 100', { spent: 0, reserved: 0 }]);
    const a = job('a', 'model-a', 5);
    expect(await cap.admit(a)).toBe('wait');
    expect(cap.waitReason(a)).toBe('a balance reading before a goes alone');
    await read();
    expect(await cap.admit(a)).toBe('go');
    expect(cap.totals).toMatchObject({ spent: 0, reserved: 5 });
    const b = job('b', 'model-a', 5);
    expect(await cap.admit(b)).toBe('wait');
    expect(cap.waitReason(b)).toBe("job a sent alone to learn its class's price");
  });

  it('learns the class price from the balance drop across its job (the higher of charge and estimate), then sends at that price', async () => {
    const { cap, events, balance, read } = harness(100);
    await cap.admit(job('a', 'model-a', 5));
    await read();
    expect(await cap.admit(job('a', 'model-a', 5))).toBe('go');
    sendAndEnd(cap, 'a', 'done');
    balance.value = 993;
    await read();
    expect(events.filter((e) => e.type === 'cap-price')).toEqual([{ type: 'cap-price', id: 'a', class: 'model-a|request', charged: 7, expected: 5, price: 7 }]);
    expect(cap.prices.get('model-a|request')).toBe(7);
    expect(cap.totals).toMatchObject({ spent: 7, reserved: 0 });
    expect(await cap.admit(job('b', 'model-a', 5))).toBe('go');
    expect(cap.totals).toMatchObject({ spent: 7, reserved: 7 });
  });

  it('keeps the estimate as the price when the charge was lower, and a rise of the balance as no charge', async () => {
    const { cap, events, balance, read } = harness(100);
    await cap.admit(job('a', 'model-a', 5));
    await read();
    await cap.admit(job('a', 'model-a', 5));
    sendAndEnd(cap, 'a', 'downloading');
    balance.value = 1002;
    await read();
    expect(events.filter((e) => e.type === 'cap-price')).toEqual([{ type: 'cap-price', id: 'a', class: 'model-a|request', charged: 0, expected: 5, price: 5 }]);
  });

  it('a job without an estimate goes alone reserving nothing, only while spent is under the cap', async () => {
    const under = harness(10, { spent: 9 });
    await under.cap.admit(job('a', 'model-a', null));
    await under.read();
    expect(await under.cap.admit(job('a', 'model-a', null))).toBe('go');
    expect(under.cap.totals).toMatchObject({ spent: 9, reserved: 0 });
    // Reserving nothing, it is still charging: read every 3 s while it is out.
    under.cap.moved('a', 'pending', 'submitting');
    expect(under.cap.tick(Date.now())).toBe(Date.now() + 3000);
    const at = harness(10, { spent: 10 });
    await at.cap.admit(job('a', 'model-a', null));
    await at.read();
    expect(await at.cap.admit(job('a', 'model-a', null))).toBe('stop');
  });

  it('a task that failed or went back teaches nothing: the next job of its class goes alone again', async () => {
    for (const to of ['failed', 'pending', 'uncertain'] as const) {
      const { cap, events, balance, read } = harness(100);
      await cap.admit(job('a', 'model-a', 5));
      await read();
      await cap.admit(job('a', 'model-a', 5));
      sendAndEnd(cap, 'a', to);
      balance.value = 990;
      await read();
      expect(events.filter((e) => e.type === 'cap-price')).toEqual([]);
      expect(cap.prices.size).toBe(0);
      // The reading that ended it began with nothing else in flight: b goes alone on it.
      expect(await cap.admit(job('b', 'model-a', 5))).toBe('go');
      expect(await cap.admit(job('c', 'model-a', 5))).toBe('wait');
    }
  });

  it('waits while jobs of its own are in flight, and needs a reading begun after they ended', async () => {
    const { cap, balance, read } = harness(100);
    await cap.admit(job('a', 'model-a', 5));
    await read();
    await cap.admit(job('a', 'model-a', 5));
    sendAndEnd(cap, 'a', 'done');
    balance.value = 995;
    await read();
    expect(await cap.admit(job('b', 'model-a', 5))).toBe('go');
    const c = job('c', 'model-c', 2);
    expect(await cap.admit(c)).toBe('wait');
    expect(cap.waitReason(c)).toBe('jobs in flight to end before c (a new price class) goes alone');
    vi.advanceTimersByTime(10);
    cap.forget('b'); // given up: not waited for, but the last reading is from before it was let go
    expect(await cap.admit(c)).toBe('wait');
    expect(cap.waitReason(c)).toBe('a balance reading before c goes alone');
    await read();
    expect(await cap.admit(c)).toBe('go');
  });

  it('after a reset (lost leases) the reading before it is stale too', async () => {
    const { cap, read } = harness(100);
    await cap.admit(job('a', 'model-a', 5));
    await read();
    expect(await cap.admit(job('a', 'model-a', 5))).toBe('go');
    vi.advanceTimersByTime(10);
    cap.reset();
    expect(await cap.admit(job('b', 'model-b', 5))).toBe('wait');
    await read();
    expect(await cap.admit(job('b', 'model-b', 5))).toBe('go');
  });
});

describe('a known price', () => {
  async function learned(credits: number, price: number): Promise<Harness> {
    const h = harness(credits);
    await h.cap.admit(job('first', 'model-a', price));
    await h.read();
    await h.cap.admit(job('first', 'model-a', price));
    sendAndEnd(h.cap, 'first', 'done');
    h.balance.value = 1000 - price;
    await h.read();
    return h;
  }

  it('sends while spent + reserved + the price fits the cap, waits while its own jobs may still be charged', async () => {
    const { cap } = await learned(20, 5); // spent 5
    expect(await cap.admit(job('b', 'model-a', 1))).toBe('go');
    expect(await cap.admit(job('c', 'model-a', 1))).toBe('go');
    expect(cap.totals).toMatchObject({ spent: 5, reserved: 10 });
    expect(await cap.admit(job('d', 'model-a', 1))).toBe('go'); // 5 + 10 + 5 = 20: exactly the cap
    const e = job('e', 'model-a', 1);
    expect(await cap.admit(e)).toBe('wait');
    expect(cap.waitReason(e)).toBe('jobs in flight to be charged before e fits');
  });

  it('stops sending when the next job does not fit and nothing is reserved', async () => {
    const { cap } = await learned(9, 5);
    expect(await cap.admit(job('b', 'model-a', 1))).toBe('stop');
    expect(cap.totals).toMatchObject({ spent: 5, reserved: 0 });
  });

  it('waits, not stops, while reservations this process let go of may still be charged (their readings end them)', async () => {
    const { cap, read } = await learned(12, 5); // spent 5
    expect(await cap.admit(job('b', 'model-a', 1))).toBe('go'); // reserved 5
    vi.advanceTimersByTime(10);
    cap.forget('b'); // given up, its reservation kept until a reading finds it ended
    expect(await cap.admit(job('c', 'model-a', 1))).toBe('wait');
    const d = job('d', 'model-d', 3);
    expect(await cap.admit(d)).toBe('wait'); // a new class needs a fresh reading first
    await read();
    expect(await cap.admit(d)).toBe('wait'); // 5 + 5 + 3 > 12, with 5 still reserved
  });

  it('a job of a known price that ends teaches nothing more', async () => {
    const { cap, events, balance, read } = await learned(100, 5);
    expect(await cap.admit(job('b', 'model-a', 1))).toBe('go');
    sendAndEnd(cap, 'b', 'done');
    balance.value = 900;
    await read();
    expect(events.filter((e) => e.type === 'cap-price')).toHaveLength(1);
    expect(cap.prices.get('model-a|request')).toBe(5);
    expect(warnings(events)).toEqual([]);
    expect(cap.totals).toMatchObject({ spent: 100, reserved: 0 });
  });

  it('a job that fails before it is sent asks for no reading: handBack gives its reservation back', async () => {
    const { cap } = await learned(100, 5);
    expect(await cap.admit(job('b', 'model-a', 1))).toBe('go');
    let woken = 0;
    cap.wake = () => woken++;
    cap.moved('b', 'pending', 'failed');
    expect(woken).toBe(0);
    expect(cap.tick(Date.now())).toBe(Date.now() + 3000);
    await cap.handBack('b');
    expect(woken).toBe(1);
  });

  it('while a job goes alone, even a job of a known price waits; forgetting another job leaves it alone', async () => {
    const { cap } = await learned(100, 5);
    expect(await cap.admit(job('n', 'model-n', 2))).toBe('go');
    const b = job('b', 'model-a', 1);
    expect(await cap.admit(b)).toBe('wait');
    expect(cap.waitReason(b)).toBe("job n sent alone to learn its class's price");
    cap.forget('someone-else');
    expect(await cap.admit(b)).toBe('wait');
  });

  it('a job sent and not ended keeps its reservation through the readings while it is out', async () => {
    const { cap, read } = await learned(100, 5);
    expect(await cap.admit(job('b', 'model-a', 1))).toBe('go');
    cap.moved('b', 'pending', 'submitting');
    cap.moved('b', 'submitting', 'submitted');
    vi.advanceTimersByTime(3000);
    await read();
    expect(cap.totals).toMatchObject({ spent: 5, reserved: 5 });
  });

  it('waits, not stops, while a job of its own that reserved nothing (a class learned at 0) is out', async () => {
    const h = harness(10);
    await h.cap.admit(job('y0', 'model-y', 6));
    await h.read();
    await h.cap.admit(job('y0', 'model-y', 6));
    sendAndEnd(h.cap, 'y0', 'done');
    h.balance.value = 994;
    await h.read();
    expect(await h.cap.admit(job('z0', 'model-z', null))).toBe('go');
    sendAndEnd(h.cap, 'z0', 'done');
    await h.read();
    expect(h.cap.prices.get('model-z|request')).toBe(0);
    expect(await h.cap.admit(job('z1', 'model-z', null))).toBe('go');
    expect(await h.cap.admit(job('y1', 'model-y', 6))).toBe('wait'); // 6 + 0 + 6 > 10 while z1 is out
  });

  it('a job never sent gives its reservation back at once; a sent one keeps it until a reading', async () => {
    const { cap } = await learned(14, 5);
    expect(await cap.admit(job('b', 'model-a', 1))).toBe('go');
    expect(await cap.admit(job('c', 'model-a', 1))).toBe('wait');
    let woken = 0;
    cap.wake = () => woken++;
    await cap.handBack('b');
    expect(woken).toBe(1);
    expect(await cap.admit(job('c', 'model-a', 1))).toBe('go');
    cap.moved('c', 'pending', 'submitting');
    await cap.handBack('c');
    expect(await cap.admit(job('d', 'model-a', 1))).toBe('wait');
    await cap.handBack('nobody');
    expect(woken).toBe(1);
  });

  it('a job handed back while sent alone frees the class for the next job', async () => {
    const { cap, read } = harness(100);
    await cap.admit(job('a', 'model-a', 5));
    await read();
    expect(await cap.admit(job('a', 'model-a', 5))).toBe('go');
    await cap.handBack('a');
    expect(await cap.admit(job('b', 'model-a', 5))).toBe('go');
  });

  it('prices the rows not yet sent at the observed price of their class, else their estimate, counting those with neither', async () => {
    const fresh = harness(100);
    expect(fresh.cap.expected([job('a', 'model-a', 0.1), job('b', 'model-b', 0.2), job('c', 'model-c', null)])).toEqual({ credits: 0.3, unknown: 1 });
    const { cap } = await learned(100, 7);
    expect(cap.expected([job('a', 'model-a', 1), job('b', 'model-b', 2), job('c', 'model-a', null)])).toEqual({ credits: 16, unknown: 0 });
    expect(cap.expected([])).toEqual({ credits: 0, unknown: 0 });
  });
});

describe('readings', () => {
  it('reads while anything is reserved every 3 s of the service time (at least 50 ms), not while nothing is', async () => {
    const { cap, read } = harness(100);
    expect(cap.tick(Date.now())).toBe(Infinity);
    expect(cap.busy).toBe(0);
    await cap.admit(job('a', 'model-a', 5));
    await read();
    await cap.admit(job('a', 'model-a', 5));
    const last = Date.now();
    expect(cap.tick(last)).toBe(last + 3000);
    expect(cap.tick(last + 2999)).toBe(last + 3000);
    expect(cap.busy).toBe(0);
    vi.advanceTimersByTime(3000);
    await read();
    const fast = harness(100, { timeScale: 0.001 });
    await fast.cap.admit(job('a', 'model-a', 5));
    await fast.read();
    await fast.cap.admit(job('a', 'model-a', 5));
    expect(fast.cap.tick(Date.now())).toBe(Date.now() + 50);
    const scaled = harness(100, { timeScale: 0.1 });
    await scaled.cap.admit(job('a', 'model-a', 5));
    await scaled.read();
    await scaled.cap.admit(job('a', 'model-a', 5));
    expect(scaled.cap.tick(Date.now())).toBe(Date.now() + 300);
  });

  it('reads at once when a job of its own ended, and a job that goes on to submitted does not end it', async () => {
    const { cap, read, events } = harness(100);
    await cap.admit(job('a', 'model-a', 5));
    await read();
    await cap.admit(job('a', 'model-a', 5));
    let woken = 0;
    cap.wake = () => woken++;
    cap.moved('a', 'pending', 'submitting');
    cap.moved('other', 'submitted', 'done');
    expect(woken).toBe(0);
    // The job sent alone, once submitted, asks for one reading (what it was charged before any refund at its end) ...
    cap.moved('a', 'submitting', 'submitted');
    expect(woken).toBe(1);
    await read();
    // ... which does not end it: no price yet, and no reading due until the periodic one.
    expect(events.some((e) => e.type === 'cap-price')).toBe(false);
    expect(cap.tick(Date.now())).toBeGreaterThan(Date.now());
    woken = 0;
    cap.wake = () => woken++;
    cap.moved('a', 'submitted', 'done');
    expect(woken).toBe(1);
    await read();
    expect(events.some((e) => e.type === 'cap-price')).toBe(true);
  });

  it('a task partly refunded at its end is priced at its charge before the refund (the lowest reading while it ran)', async () => {
    const { cap, read, balance, events } = harness(1000);
    await cap.admit(job('a', 'model-a', null));
    await read();
    await cap.admit(job('a', 'model-a', null));
    cap.moved('a', 'pending', 'submitting');
    balance.value = 940; // charged 60 at submission
    cap.moved('a', 'submitting', 'submitted');
    await read();
    balance.value = 996; // 56 refunded at its end: it delivered 1 output of 15
    cap.moved('a', 'submitted', 'done');
    await read();
    expect(events.find((e) => e.type === 'cap-price')).toMatchObject({ charged: 60, price: 60 });
    expect(cap.prices.get(classOf(job('b', 'model-a', null)))).toBe(60);
  });

  it('a job refused at the POST (submitting to failed or pending) ends too, and an end brings a failed reading forward', async () => {
    const { cap, balance, read } = harness(100);
    await cap.admit(job('a', 'model-a', 5));
    await read();
    await cap.admit(job('a', 'model-a', 5));
    cap.moved('a', 'pending', 'submitting');
    balance.value = () => {
      throw new Error('down');
    };
    vi.advanceTimersByTime(3000);
    await read(); // failed: the next one is due in 2 s
    expect(cap.tick(Date.now())).toBe(Date.now() + 2000);
    cap.moved('a', 'submitting', 'failed');
    balance.value = 1000;
    await read(); // at once: a job ended
    // The refused job taught nothing; its class goes alone again, and its reservation ended with the reading.
    expect(cap.prices.size).toBe(0);
    expect(cap.totals).toMatchObject({ reserved: 0 });
  });

  it('a reading that began after its jobs ended is fresh for a new class, even if one of them was given up during it', async () => {
    let answer!: (n: number) => void;
    const cap = new CreditCap({
      credits: 100,
      name: '--max-credits 100',
      ledger: new LocalLedger(100, 0, null),
      balance: () => new Promise<number>((r) => (answer = r)),
      timeScale: 1,
      emit: () => undefined,
    });
    /** Start the reading that is due; resolves once the balance was asked, with the reading's end. */
    const reading = async (): Promise<{ end: Promise<void> }> => {
      const end = new Promise<void>((r) => (cap.wake = r));
      expect(cap.tick(Date.now())).toBe(Infinity);
      await vi.advanceTimersByTimeAsync(0);
      return { end };
    };
    await cap.admit(job('a', 'model-a', 5));
    let r = await reading();
    answer(1000);
    await r.end;
    expect(await cap.admit(job('a', 'model-a', 5))).toBe('go');
    sendAndEnd(cap, 'a', 'done');
    vi.advanceTimersByTime(5);
    r = await reading();
    vi.advanceTimersByTime(5);
    cap.forget('a'); // given up while the reading that ends it is in flight
    answer(995);
    await r.end;
    expect(await cap.admit(job('b', 'model-b', 5))).toBe('go');
  });

  it('a new class waits for a reading in flight (it may be the fresh one it needs)', async () => {
    let answer!: (n: number) => void;
    const cap = new CreditCap({
      credits: 100,
      name: '--max-credits 100',
      ledger: new LocalLedger(100, 0, null),
      balance: () => new Promise<number>((r) => (answer = r)),
      timeScale: 1,
      emit: () => undefined,
    });
    await cap.admit(job('a', 'model-a', 5));
    cap.tick(Date.now());
    await vi.advanceTimersByTimeAsync(0);
    answer(1000);
    await vi.advanceTimersByTimeAsync(0);
    expect(await cap.admit(job('a', 'model-a', 5))).toBe('go');
    await cap.handBack('a'); // never sent: nothing of this process in flight, the reservation total read before stays
    vi.advanceTimersByTime(3000);
    expect(cap.tick(Date.now())).toBe(Infinity);
    await vi.advanceTimersByTimeAsync(0);
    expect(cap.busy).toBe(1);
    expect(await cap.admit(job('b', 'model-b', 5))).toBe('wait');
    answer(1000);
    await vi.advanceTimersByTimeAsync(0);
    expect(await cap.admit(job('b', 'model-b', 5))).toBe('go');
  });

  it('a failed reading is retried after 2, 4, 8, 16 s (scaled), and five in a row stop the sending', async () => {
    const { cap, events, balance, read } = harness(100, { timeScale: 0.5 });
    balance.value = () => {
      throw new Error('service down');
    };
    await cap.admit(job('a', 'model-a', 5));
    for (const [n, wait] of [[1, 1000], [2, 2000], [3, 4000], [4, 8000]] as const) {
      await read();
      expect(warnings(events).at(-1)).toBe(`the credit cap could not read the balance (${n} in a row): service down; tried again`);
      expect(cap.tick(Date.now())).toBe(Date.now() + wait);
      expect(await cap.admit(job('a', 'model-a', 5))).toBe('wait');
      vi.advanceTimersByTime(wait);
    }
    await read();
    expect(warnings(events).at(-1)).toBe('the credit cap could not read the balance (5 in a row): service down; no more jobs are sent in this run');
    expect(await cap.admit(job('a', 'model-a', 5))).toBe('stop');
  });

  it('waits 1/100 of the time at least when the service time runs faster; a good reading starts the count again', async () => {
    const { cap, events, balance, read } = harness(100, { timeScale: 0.0001 });
    balance.value = Number.NaN;
    await cap.admit(job('a', 'model-a', 5));
    await read();
    expect(warnings(events).at(-1)).toBe('the credit cap could not read the balance (1 in a row): the balance read is not a number: NaN; tried again');
    expect(cap.tick(Date.now())).toBe(Date.now() + 20);
    for (let n = 2; n <= 4; n++) {
      vi.advanceTimersByTime(1000);
      await read();
    }
    balance.value = 1000;
    vi.advanceTimersByTime(1000);
    await read();
    expect(await cap.admit(job('a', 'model-a', 5))).toBe('go');
    balance.value = () => {
      throw 'plain text';
    };
    for (let n = 1; n <= 4; n++) {
      vi.advanceTimersByTime(1000);
      await read();
    }
    expect(warnings(events).at(-1)).toBe('the credit cap could not read the balance (4 in a row): plain text; tried again');
    await cap.handBack('a');
    expect(await cap.admit(job('b', 'model-b', 5))).toBe('go');
  });

  it('waits at most 30 s between failed readings', async () => {
    const { cap, events, balance, read } = harness(100);
    balance.value = Number.POSITIVE_INFINITY;
    await cap.admit(job('a', 'model-a', 5));
    for (let n = 1; n <= 4; n++) {
      await read();
      vi.advanceTimersByTime(30_000);
    }
    await read();
    expect(warnings(events).at(-1)).toBe('the credit cap could not read the balance (5 in a row): the balance read is not a number: Infinity; no more jobs are sent in this run');
    expect(cap.tick(Date.now())).toBe(Date.now() + 30_000);
  });

  it('a tick during a reading starts no second one, even with a reading due; a job given up during it leaves it stale', async () => {
    let answer!: (n: number) => void;
    let asked = 0;
    const cap = new CreditCap({
      credits: 100,
      name: '--max-credits 100',
      ledger: new LocalLedger(100, 0, null),
      balance: () => new Promise<number>((r) => ((answer = r), asked++)),
      timeScale: 1,
      emit: () => undefined,
    });
    const flush = () => vi.advanceTimersByTimeAsync(0);
    await cap.admit(job('a', 'model-a', 5));
    cap.tick(Date.now());
    await flush();
    answer(1000);
    await flush();
    expect(await cap.admit(job('a', 'model-a', 5))).toBe('go');
    sendAndEnd(cap, 'a', 'done');
    expect(cap.tick(Date.now())).toBe(Infinity);
    await flush();
    expect(cap.tick(Date.now())).toBe(Infinity); // a has ended and is due, but a reading is in flight
    answer(990);
    await flush();
    await flush();
    expect(asked).toBe(2);
    // c goes alone and is out; the periodic reading begins, then c is given up before it answers.
    expect(await cap.admit(job('c', 'model-c', 5))).toBe('go');
    cap.moved('c', 'pending', 'submitting');
    vi.advanceTimersByTime(3000);
    expect(cap.tick(Date.now())).toBe(Infinity);
    await flush();
    vi.advanceTimersByTime(5);
    cap.forget('c');
    answer(990);
    await flush();
    // That reading did not see c end: a new class needs one begun after.
    expect(await cap.admit(job('d', 'model-d', 5))).toBe('wait');
  });

  it('one reading at a time: a tick during a reading starts none', async () => {
    let answer!: (n: number) => void;
    let asked = 0;
    const cap = new CreditCap({
      credits: 100,
      name: '--max-credits 100',
      ledger: new LocalLedger(100, 0, null),
      balance: () => new Promise<number>((r) => ((answer = r), asked++)),
      timeScale: 1,
      emit: () => undefined,
    });
    await cap.admit(job('a', 'model-a', 5));
    const woken = new Promise<void>((r) => (cap.wake = r));
    expect(cap.tick(Date.now())).toBe(Infinity);
    await vi.advanceTimersByTimeAsync(0);
    expect(cap.tick(Date.now())).toBe(Infinity);
    expect([cap.busy, asked]).toEqual([1, 1]);
    answer(500);
    await woken;
    expect(asked).toBe(1);
    expect(await cap.admit(job('a', 'model-a', 5))).toBe('go');
  });
});

describe('LocalLedger', () => {
  it('reserves a known price while spent + reserved + price <= cap (float sums kept within 1e-9)', async () => {
    const l = new LocalLedger(0.3, 0, null);
    expect(await l.reserve('a', 0.1, false)).toEqual({ ok: true, spent: 0, reserved: 0.1 });
    expect(await l.reserve('b', 0.2, false)).toMatchObject({ ok: true });
    expect(await l.reserve('c', 0.000001, false)).toMatchObject({ ok: false });
    const m = new LocalLedger(10, 3, null);
    expect(await m.reserve('a', 7, false)).toEqual({ ok: true, spent: 3, reserved: 7 });
    expect(await m.reserve('b', 0.5, false)).toEqual({ ok: false, spent: 3, reserved: 7 });
  });

  it('reserves an unknown price (nothing) only while spent + reserved is under the cap', async () => {
    expect(await new LocalLedger(10, 9.5, null).reserve('u', 0, true)).toEqual({ ok: true, spent: 9.5, reserved: 0 });
    expect(await new LocalLedger(10, 10, null).reserve('u', 0, true)).toMatchObject({ ok: false });
    expect(await new LocalLedger(10, 10 - 1e-10, null).reserve('u', 0, true)).toMatchObject({ ok: false });
    expect(await new LocalLedger(1, 1 - 1e-9, null).reserve('u', 0, true)).toMatchObject({ ok: false });
    expect(await new LocalLedger(1, 0, null).reserve('a', 1 + 1e-9, false)).toMatchObject({ ok: true });
    const l = new LocalLedger(10, 5, null);
    await l.reserve('a', 5, false);
    expect(await l.reserve('u', 0, true)).toMatchObject({ ok: false, reserved: 5 });
  });

  it('gives a reservation back once, and ignores a job it does not hold', async () => {
    const l = new LocalLedger(10, 0, null);
    await l.reserve('a', 4, false);
    await l.reserve('b', 3, false);
    await l.unreserve('a');
    await l.unreserve('a');
    await l.unreserve('nobody');
    expect(await l.reserve('c', 7, false)).toEqual({ ok: true, spent: 0, reserved: 10 });
  });

  it('a first reading sets the base; each later one adds the drop to spent (a rise gives room back) and ends the released reservations', async () => {
    const l = new LocalLedger(100, 2, null);
    await l.reserve('a', 5, false);
    await l.reserve('b', 6, false);
    expect(await l.settle(500, [])).toEqual({ spent: 2, reserved: 11 });
    expect(await l.settle(494.9, ['a'])).toEqual({ spent: 7.1, reserved: 6 });
    expect(await l.settle(496, ['b'])).toEqual({ spent: 6, reserved: 0 });
    const opened = new LocalLedger(100, 0, 50);
    expect(await opened.settle(45, [])).toEqual({ spent: 5, reserved: 0 });
    expect(await opened.releasable(['x', 'y'])).toEqual(['x', 'y']);
  });

  it('nothing held means nothing reserved, whatever float rest the sums left', async () => {
    const l = new LocalLedger(100, 0, 10);
    await l.reserve('a', 0.1, false);
    await l.reserve('b', 0.2, false);
    await l.unreserve('a');
    expect(await l.settle(10, ['b'])).toEqual({ spent: 0, reserved: 0 });
  });
});

describe('classOf', () => {
  it('a chat job or an unknown model is one class per model; a known model is priced by its workflow, not its prompt', () => {
    expect(classOf(job('a', 'gpt-4o-mini', 1, 'chat'))).toBe('gpt-4o-mini|request');
    expect(classOf(job('a', 'model-x', 1))).toBe('model-x|request');
    const one = classOf(job('p1', 'alpha-image-2', 1));
    expect(one).toBe(classOf(job('p2', 'alpha-image-2', 1)));
    expect(one).not.toBe('alpha-image-2|request');
    expect(classOf(job('a', 'alpha-image-2', 1, 'chat'))).toBe('alpha-image-2|request');
  });
});
