import { describe, expect, it } from 'vitest';
import { chanceFinished } from '../src/engine/pipeline/poll-order.js';

const IMAGE: [number, number] = [15_000, 60_000];
const VIDEO: [number, number] = [90_000, 300_000];

describe('chanceFinished (which task a scarce status read goes to)', () => {
  it('is 0 before the typical minimum, 1 past the maximum, and grows evenly between', () => {
    expect(chanceFinished(10_000, 0, IMAGE)).toBe(0);
    expect(chanceFinished(37_500, 0, IMAGE)).toBeCloseTo(0.5);
    expect(chanceFinished(61_000, 0, IMAGE)).toBe(1);
  });

  it('ranks an image sent with a video first while the image may be done, whatever the time', () => {
    for (const t of [20_000, 45_000, 60_000, 95_000]) expect(chanceFinished(t, 0, IMAGE)).toBeGreaterThan(chanceFinished(t, 0, VIDEO));
  });

  it('counts only what is left after a read that found the task unfinished', () => {
    // Read unfinished at 37.5 s (half its spread): at 48.75 s, half of what was left has passed.
    expect(chanceFinished(48_750, 37_500, IMAGE)).toBeCloseTo(0.5);
    expect(chanceFinished(37_500, 37_500, IMAGE)).toBe(0);
  });

  it('gives a task past its maximum one more typical spread after the read that found it unfinished', () => {
    expect(chanceFinished(70_000, 70_000, IMAGE)).toBe(0);
    expect(chanceFinished(92_500, 70_000, IMAGE)).toBeCloseTo(0.5);
    expect(chanceFinished(200_000, 70_000, IMAGE)).toBe(1);
  });
});
