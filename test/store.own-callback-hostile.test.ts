import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import { Store } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

/**
 * `run --listen` counts the pending jobs that name their own callback_url (to warn that it is not sent). A state's
 * spec column may hold anything (a row edited by hand, a copy from a database another client wrote): json_extract
 * threw 'malformed JSON' on such a spec and the run ended as an internal error. A spec that is not JSON names none.
 */
const t = tempDir('genbatch-own-callback-');
afterAll(() => t.cleanup());

it('counts the pending jobs naming their own callback_url, and passes over a spec that is not JSON', () => {
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  try {
    store.openRun(join(t.dir, 'm.yaml'), t.dir, 'http://x', true, false);
    const spec = (extra: object) => JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'a harbour' }, refs: [], ...extra });
    store.beginSync();
    store.syncJob({ id: 'own', model: 'alpha-image-2', kind: 'submit', where: 'm.yaml:2', specHash: 'h1', spec: spec({ callback_url: 'https://hooks.example/x' }), estimatedCredits: 2 });
    store.syncJob({ id: 'plain', model: 'alpha-image-2', kind: 'submit', where: 'm.yaml:3', specHash: 'h2', spec: spec({}), estimatedCredits: 2 });
    store.syncJob({ id: 'edited', model: 'alpha-image-2', kind: 'submit', where: 'm.yaml:4', specHash: 'h3', spec: spec({}), estimatedCredits: 2 });
    store.commitSync();
    store.db.prepare("UPDATE jobs SET spec = 'not json {' WHERE id = 'edited'").run();
    expect(store.pendingWithOwnCallback()).toBe(1);
  } finally {
    store.close();
  }
});
