import { describe, expect, it } from 'vitest';
import { EXIT } from '../src/errors.js';
import { canonicalJson, exitCodeFor, extractResults, setAtPath } from '../src/engine/index.js';
import { MinHeap } from '../src/lib/heap.js';
import { UnsafeResultError } from '../src/errors.js';
import type { JobState } from '../src/store/index.js';

const counts = (c: Partial<Record<JobState, number>>): Record<JobState, number> => ({
  pending: 0,
  submitting: 0,
  submitted: 0,
  downloading: 0,
  done: 0,
  failed: 0,
  uncertain: 0,
  expired: 0,
  skipped: 0,
  ...c,
});

describe('engine pieces', () => {
  it('keeps every entry of files, of every type, named by kind and index (not by the server name)', () => {
    const task = {
      task_id: 't',
      status: 'finished' as const,
      error_message: null,
      files: [
        { file_url: 'https://x/a.png', file_type: 'image', file_name: 'out.png', file_size: 10 },
        { file_url: 'https://x/b.png', file_type: 'image', file_name: 'out.png' },
        { file_url: 'https://x/model.glb', file_type: '3d' },
        { file_url: 'https://x/t.json', file_type: 'other', content_type: 'application/json' },
      ],
    };
    const r = extractResults(task, 'status', 'any');
    expect(r.downloads.map((d) => d.name)).toEqual(['image-1.png', 'image-2.png', '3d-1.glb', 'other-1.json']);
    expect(r.downloads[0]!.expected_size).toBe(10);
    expect(r.downloads[1]!.expected_size).toBeNull();
    expect(() => extractResults({ ...task, files: [{ file_type: 'image' }] }, 'status', 'any')).toThrow(UnsafeResultError);
  });

  it('reads music results by workflow: JSON-string stems parsed, texts kept', () => {
    const stems = JSON.stringify({ vocal_url: 'https://x/v.mp3', instrumental_url: 'https://x/i.mp3' });
    const r = extractResults({ task_id: 't', status: 'finished', error_message: null, files: [{ separate_vocals: stems }] }, 'music', 'separate-vocals');
    expect(r.downloads.map((d) => [d.name, d.url])).toEqual([
      ['vocal.mp3', 'https://x/v.mp3'],
      ['instrumental.mp3', 'https://x/i.mp3'],
    ]);
    const lyrics = extractResults(
      { task_id: 't', status: 'finished', error_message: null, files: [{ title: 'A', text: 'la la' }, { title: 'B', text: 'lo lo' }] },
      'music',
      'generate-lyrics',
    );
    expect(lyrics.texts.filter((x) => x.name.startsWith('lyrics')).map((x) => [x.name, x.text])).toEqual([
      ['lyrics-1.txt', 'la la'],
      ['lyrics-2.txt', 'lo lo'],
    ]);
  });

  it('sets uploaded URLs at input paths and hashes specs independently of key order', () => {
    const input: Record<string, unknown> = { image_urls: ['a.png', 'b.png'], start_image_url: 'c.png' };
    setAtPath(input, 'input.image_urls[1]', 'https://u/b');
    setAtPath(input, 'input.start_image_url', 'https://u/c');
    expect(input).toEqual({ image_urls: ['a.png', 'https://u/b'], start_image_url: 'https://u/c' });
    expect(canonicalJson({ b: 1, a: { d: 2, c: 3 } })).toBe(canonicalJson({ a: { c: 3, d: 2 }, b: 1 }));
  });

  it('maps final counts to the exit-code table of src/errors.ts, the first that applies in its precedence order', () => {
    const live = new AbortController().signal;
    expect(exitCodeFor(counts({ done: 3 }), live, null)).toBe(EXIT.ok);
    expect(exitCodeFor(counts({ done: 3, failed: 1 }), live, null)).toBe(EXIT.jobsFailed);
    expect(exitCodeFor(counts({ done: 3, uncertain: 1 }), live, null)).toBe(EXIT.incomplete);
    expect(exitCodeFor(counts({ done: 3, expired: 1 }), live, null)).toBe(EXIT.incomplete);
    // A 402 mid-run, or jobs held for the balance before sending: 3.
    expect(exitCodeFor(counts({ done: 3, pending: 2 }), live, 'insufficient-credits')).toBe(EXIT.budget);
    expect(exitCodeFor(counts({ done: 3, pending: 2 }), live, null, { held: { balance: 2, cap: 0 } })).toBe(EXIT.budget);
    // A cap: held before sending, or the measured cap stopped the sending: 5.
    expect(exitCodeFor(counts({ done: 3, pending: 2 }), live, null, { held: { balance: 0, cap: 2 } })).toBe(EXIT.capReached);
    expect(exitCodeFor(counts({ done: 3, pending: 2 }), live, 'credit-cap')).toBe(EXIT.capReached);
    // Other work left: --only/--limit, a lost lease: 7.
    expect(exitCodeFor(counts({ done: 3, pending: 2 }), live, null)).toBe(EXIT.leftPending);
    expect(exitCodeFor(counts({ done: 3, submitted: 1 }), live, 'lease-lost')).toBe(EXIT.leftPending);
    expect(exitCodeFor(counts({ done: 3, skipped: 2 }), live, null)).toBe(EXIT.ok);
    // Only permanent failures: 6; a failure a retry may fix beside them: 1.
    expect(exitCodeFor(counts({ done: 3, failed: 2 }), live, null, { permanentFailed: 2 })).toBe(EXIT.failedPermanent);
    expect(exitCodeFor(counts({ done: 3, failed: 3 }), live, null, { permanentFailed: 2 })).toBe(EXIT.jobsFailed);
    expect(exitCodeFor(counts({ done: 3, failed: 2, pending: 1 }), live, null, { permanentFailed: 2, held: { balance: 0, cap: 1 } })).toBe(EXIT.capReached);
    // Precedence: decision (4) > failed (1) > balance (3) > cap (5) > left pending (7).
    expect(exitCodeFor(counts({ uncertain: 1, failed: 1, pending: 1 }), live, 'insufficient-credits')).toBe(EXIT.incomplete);
    expect(exitCodeFor(counts({ failed: 1, pending: 1 }), live, 'insufficient-credits')).toBe(EXIT.jobsFailed);
    expect(exitCodeFor(counts({ pending: 2 }), live, 'credit-cap', { held: { balance: 1, cap: 1 } })).toBe(EXIT.budget);
    const c = new AbortController();
    c.abort('SIGINT');
    expect(exitCodeFor(counts({ done: 3, uncertain: 1 }), c.signal, 'signal')).toBe(EXIT.sigint);
    const t = new AbortController();
    t.abort('SIGTERM');
    expect(exitCodeFor(counts({ done: 3 }), t.signal, 'signal')).toBe(EXIT.sigterm);
  });

  it('pops the heap in time order', () => {
    const h = new MinHeap<{ at: number; id: string }>();
    for (const at of [5, 1, 9, 3, 7, 2]) h.push({ at, id: String(at) });
    const out: number[] = [];
    while (h.size) out.push(h.pop()!.at);
    expect(out).toEqual([1, 2, 3, 5, 7, 9]);
  });
});
