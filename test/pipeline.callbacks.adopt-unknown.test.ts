import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { ServiceClient, UploadLimiter } from '../src/client/index.js';
import { Pipeline } from '../src/engine/pipeline/pipeline.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { SqliteWorkStore, Store } from '../src/store/index.js';
import { plainDownload, servicePortOf } from './helpers/ports.js';
import { tempDir } from './helpers/tmp.js';

/**
 * A callback for an uncertain job that names a task the service does not know (404) or that is another
 * account's (403) adopts nothing: the job stays uncertain, and the callback of its real task still adopts that.
 * Such a callback can only be a forgery on a leaked URL (the service calls back for tasks it made). The job
 * adopted the named task and its status read's 404 then failed the job: a stranger turned an uncertain job,
 * whose task was made and charged, into a failed one that a rerun sends again, and the real task's callback
 * was ignored from then on (it named another task than the recorded one). Found by forging callbacks.
 */
const KEY = 'sk-adopt-unknown';
const OTHER = 'sk-adopt-unknown-other';
let sb: Sandbox;
let client: ServiceClient;
let other: ServiceClient;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  sb = await startSandbox({ port: 0, keys: { [KEY]: 10_000, [OTHER]: 10_000 }, timeScale: 0.001, seed: 9, allowLoopback: true });
  const opts = { baseUrl: sb.url, policy: { baseMs: 1, maxMs: 5, maxAttempts: 3 }, uploadLimiter: new UploadLimiter({ limit: 50, windowMs: 10 }) };
  client = new ServiceClient({ ...opts, apiKey: KEY });
  other = new ServiceClient({ ...opts, apiKey: OTHER });
});
afterAll(async () => {
  await client.close();
  await other.close();
  await sb.close();
});
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

/** A state file with job `a`, made uncertain by one submit whose answer was lost. */
function uncertainJob(): { store: Store; out: string } {
  const t = tempDir('genbatch-adopt-unknown-');
  const out = join(t.dir, 'out');
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  cleanups.push(t.cleanup, () => store.close());
  store.openRun(join(t.dir, 'm.yaml'), out, sb.url, true, false);
  store.beginSync();
  store.syncJob({ id: 'a', model: 'alpha-image-2', kind: 'submit', where: 'm.yaml:a', specHash: 'h-a', spec: JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'a lighthouse' }, refs: [] }), estimatedCredits: 2 });
  store.commitSync();
  store.transition('a', 'pending', 'submitting', { attemptsInc: 1 });
  store.transition('a', 'submitting', 'uncertain', { last_error: 'the answer was lost' });
  return { store, out };
}

function pipelineFor(store: Store, out: string): Pipeline {
  return new Pipeline(new SqliteWorkStore(store), servicePortOf(client), plainDownload, {
    outDir: out,
    concurrency: 1,
    maxActive: 10,
    timeScale: 0.001,
    signal: new AbortController().signal,
    emit: () => undefined,
    callbackUrlFor: (id, attempt) => `http://127.0.0.1:9/cb?job=${id}&attempt=${attempt}`,
    baseUrl: sb.url,
    uploadMaxAgeMs: 60_000,
    statusRate: 1000,
    recoveredUncertain: ['a'],
  });
}

it('a callback naming an unknown task, or another account\'s, leaves the uncertain job uncertain; its real task is adopted after', async () => {
  const { store, out } = uncertainJob();
  const real = (await client.submit({ model: 'alpha-image-2', input: { prompt: 'the lost submit of a' } })).task_id;
  const foreign = (await other.submit({ model: 'alpha-image-2', input: { prompt: 'another account' } })).task_id;
  for (const named of ['0123456789abcdef0123456789abcdef', foreign]) {
    const pipeline = pipelineFor(store, out);
    const running = pipeline.run();
    pipeline.onCallback({ job: 'a', attempt: 1, taskId: named, status: 'finished' });
    await running;
    expect(store.getJob('a')).toMatchObject({ state: 'uncertain', task_id: null, attempts: 1 });
    expect(pipeline.callbacksIgnored).toBe(1);
  }
  const pipeline = pipelineFor(store, out);
  const running = pipeline.run();
  pipeline.onCallback({ job: 'a', attempt: 1, taskId: real, status: 'finished' });
  await running;
  expect(store.getJob('a')).toMatchObject({ state: 'done', task_id: real, attempts: 1 });
}, 60_000);
