import { describe, expect, it } from 'vitest';
import { probe, type BalanceAnswer, type ProbePort } from '../src/pricing/index.js';

/**
 * What one probe concludes from its balance readings (src/pricing/probe.ts), given the readings a service would
 * answer in order: before (two that agree), after the submit, one per poll while the task runs (the last one taken
 * once the task was seen ended), and after (until two agree). The integration tests (prices.probe*.test.ts) drive the
 * sandbox, which charges when a task is sent; a service that charges when a task ends is checked here.
 */
function port(readings: number[], during: number[], end: 'finished' | 'failed' = 'finished'): { p: ProbePort; during: () => BalanceAnswer[] } {
  const queue = [...readings];
  const p: ProbePort = {
    balance: async () => {
      const credits = queue.length > 1 ? queue.shift()! : queue[0]!;
      return { credits, quoted: false };
    },
    start: async () => ({ wait: async () => end }),
    sleep: async () => undefined,
    settleMs: 1,
  };
  return { p, during: () => during.map((credits) => ({ credits, quoted: false })) };
}

describe('a probe reads the charge from the balance', () => {
  it('charged when the task ends: the last poll, taken once it ended, may already show the charge', async () => {
    const { p, during } = port([1000, 1000, 1000, 960, 960], [1000, 1000, 960]);
    expect(await probe(p, during)).toMatchObject({ kind: 'measured', credits: 40 });
  });

  it('charged when sent and refunded in part at its end: the price is the charge when sent, the refund apart', async () => {
    const { p, during } = port([1000, 1000, 940, 996, 996], [940, 940, 996]);
    expect(await probe(p, during)).toEqual({ kind: 'measured', credits: 60, refunded: 56, readings: [1000, 1000, 940, 940, 940, 996, 996, 996] });
  });

  it('charged when sent, nothing refunded: no refund key', async () => {
    const { p, during } = port([1000, 1000, 940, 940, 940], [940]);
    expect(await probe(p, during)).toEqual({ kind: 'measured', credits: 60, readings: [1000, 1000, 940, 940, 940, 940] });
  });

  it('charged when sent, the refund read before a poll saw the task ended (a reading races the status read): still the charge when sent', async () => {
    const { p, during } = port([1000, 1000, 940, 996, 996], [940, 996, 996, 996]);
    expect(await probe(p, during)).toMatchObject({ kind: 'measured', credits: 60, refunded: 56 });
  });

  it('a move while the task still ran is another client: unreliable (charged at its end), a drop is (charged when sent)', async () => {
    for (const moved of [990, 1010]) {
      const { p, during } = port([1000, 1000, 1000, 960, 960], [1000, moved, 1000]);
      expect((await probe(p, during)).kind).toBe('unreliable');
    }
    const { p, during } = port([1000, 1000, 940, 940, 940], [940, 930, 940]);
    expect((await probe(p, during)).kind).toBe('unreliable');
  });

  it('charged when sent, then a drop after it ended: unreliable (a refund only raises the balance)', async () => {
    const { p, during } = port([1000, 1000, 940, 900, 900], [940]);
    expect(await probe(p, during)).toMatchObject({ kind: 'unreliable', why: expect.stringContaining('moved both when the task was sent (1000 -> 940) and after (940 -> 900)') });
  });

  it('a rise after the end as large as the charge is not a refund of part of it: unreliable', async () => {
    const { p, during } = port([1000, 1000, 940, 1000, 1000], [940]);
    expect(await probe(p, during)).toMatchObject({ kind: 'unreliable', why: expect.stringContaining('more than a refund of part of it') });
  });

  it('a failed task teaches nothing, refunded or not', async () => {
    const { p, during } = port([1000, 1000, 940, 1000, 1000], [940], 'failed');
    expect((await probe(p, during)).kind).toBe('failed');
  });
});
