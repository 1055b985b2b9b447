import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Store } from '../../src/store/index.js';
import { solidPng } from './png.js';

/** Job `i`'s id in a state made by bigViewState: job-000, job-001, ... (manifest order is id order). */
export const jobId = (i: number): string => `job-${String(i).padStart(3, '0')}`;

/**
 * A state file of `n` image jobs written directly (as bench/view.mjs makes its 100,000), for the view's tests of
 * runs larger than one page of cards: each job done with one real PNG in the output folder (its size and sha256
 * recorded), but those in `failed` (failed with a message). `prompt(i)` gives each job's prompt.
 */
export function bigViewState(dir: string, n: number, opts: { failed?: readonly number[]; prompt?: (i: number) => string } = {}): { statePath: string; out: string } {
  const out = join(dir, 'out');
  mkdirSync(out, { recursive: true });
  const statePath = join(out, 'state.db');
  const store = Store.openForWrite(statePath);
  try {
    store.openRun(join(dir, 'm.yaml'), out, 'http://service.invalid', true, false);
    const failed = new Set(opts.failed ?? []);
    store.db.transaction(() => {
      for (let i = 0; i < n; i++) {
        const id = jobId(i);
        const input = { prompt: opts.prompt ? opts.prompt(i) : `Picture ${i} of a quiet harbour` };
        store.syncJob({ id, model: 'alpha-image-2', kind: 'submit', where: `m.yaml:${i + 2}`, specHash: 'h', spec: JSON.stringify({ model: 'alpha-image-2', input }), estimatedCredits: 2 });
        store.transition(id, 'pending', 'submitting', { attemptsInc: 1, submitted_input: JSON.stringify(input) });
        store.transition(id, 'submitting', 'submitted', { task_id: `t${i}` });
        if (failed.has(i)) {
          store.transition(id, 'submitted', 'failed', { last_error: `the service failed job ${i}`, finished_at: new Date().toISOString() });
          continue;
        }
        const png = solidPng(8, 8, [i % 256, 80, 160]);
        mkdirSync(join(out, id));
        writeFileSync(join(out, id, 'image-1.png'), png);
        store.transition(id, 'submitted', 'downloading', { result: '{}', finished_at: new Date().toISOString(), expires_at: 1 }, () =>
          store.addFiles(id, [{ idx: 0, name: 'image-1.png', url: `http://x/${id}`, type: 'image', content_type: 'image/png', expected_size: png.length, expires_at: 1 }]),
        );
        store.transition(id, 'downloading', 'done', {}, () => store.fileDone(id, 0, { path: `${id}/image-1.png`, size: png.length, sha256: createHash('sha256').update(png).digest('hex'), content_type: 'image/png' }));
      }
    })();
  } finally {
    store.close();
  }
  return { statePath, out };
}
