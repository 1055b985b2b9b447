import { describe, expect, it } from 'vitest';
import { NOT_DONE_IDS, notDone } from '../src/engine/summary.js';
import type { SummaryRow } from '../src/store/index.js';

/** The --json summary's not_done: every job not done grouped by reason, ids bounded per reason with `more`. */

function row(id: string, state: SummaryRow['state'], last_error: string | null = null): SummaryRow {
  return { id, model: 'alpha-image-2', kind: 'submit', where: 'm.yaml:1', state, task_id: null, attempts: 0, submitted_at: null, finished_at: null, last_error, estimated_credits: 2 };
}

describe('notDone', () => {
  it('groups the jobs not done by reason: held pending jobs by their bound, others by how the run stopped, --only leftovers, and the last error of the rest', () => {
    const rows = [row('a', 'done'), row('b', 'pending'), row('c', 'pending'), row('d', 'failed', 'HTTP 400 content_moderation_error: flagged\nmore'), row('e', 'uncertain', 'submit answer lost'), row('f', 'pending', 'upload failed 3 times')];
    const held = new Map([['b', 'over --max-credits-per-invocation 4']]);
    expect(notDone(rows, held, null, false, new Set(['b', 'f']))).toEqual({
      'pending: over --max-credits-per-invocation 4': { count: 1, ids: ['b'] },
      'pending: not chosen (--only, --limit)': { count: 1, ids: ['c'] },
      'failed: HTTP 400 content_moderation_error: flagged': { count: 1, ids: ['d'] },
      'uncertain: submit answer lost': { count: 1, ids: ['e'] },
      'pending: upload failed 3 times': { count: 1, ids: ['f'] },
    });
    expect(Object.keys(notDone([row('c', 'pending')], new Map(), 'credit-cap', false))).toEqual(['pending: the credit cap stopped the sending']);
    expect(Object.keys(notDone([row('c', 'pending')], new Map(), 'signal', true))).toEqual(['pending: interrupted']);
    expect(Object.keys(notDone([row('c', 'pending')], new Map(), 'insufficient-credits', false))).toEqual(['pending: the balance ran out (402)']);
  });

  it(`lists at most ${NOT_DONE_IDS} ids per reason, in order, then says how many more`, () => {
    const rows = Array.from({ length: NOT_DONE_IDS + 7 }, (_, i) => row(`j${i}`, 'failed', 'boom'));
    const g = notDone(rows, new Map(), null, false)['failed: boom']!;
    expect(g.count).toBe(NOT_DONE_IDS + 7);
    expect(g.ids).toHaveLength(NOT_DONE_IDS);
    expect(g.ids[0]).toBe('j0');
    expect(g.more).toBe(7);
  });
});
