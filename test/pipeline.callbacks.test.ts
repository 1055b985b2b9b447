import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient, UploadLimiter } from '../src/client/index.js';
import { cleanupPartials, downloadFile, fsyncDir, isGone, sanitizeName } from '../src/download/index.js';
import { Pipeline } from '../src/engine/pipeline/pipeline.js';
import type { DownloadPort, ServicePort } from '../src/engine/ports.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { SqliteWorkStore, Store, type JobPatch, type JobState, type MoveOptions, type Moved } from '../src/store/index.js';
import { admin } from './helpers/admin.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Completion callbacks in the pipeline (src/engine/pipeline/callbacks.ts), in process over a real SQLite state and
 * the in-process sandbox. A callback is a hint: it makes the runner read the task's status at once.
 */
const KEY = 'sk-pipeline-callbacks';
let sb: Sandbox;
let client: ServiceClient;
const t = tempDir('genbatch-pipeline-callbacks-');

beforeAll(async () => {
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.001, seed: 5, allowLoopback: true });
  client = new ServiceClient({ baseUrl: sb.url, apiKey: KEY, policy: { baseMs: 1, maxMs: 5, maxAttempts: 3 }, uploadLimiter: new UploadLimiter({ limit: 50, windowMs: 10 }) });
});
afterAll(async () => {
  await client.close();
  await sb.close();
  t.cleanup();
});

const service: ServicePort = {
  submit: (body, signal) => client.submit(body, signal ? { signal } : {}),
  status: (taskId, signal) => client.status(taskId, signal ? { signal } : {}),
  musicDetail: (taskId, signal) => client.musicDetail(taskId, signal ? { signal } : {}),
  balance: () => client.balance(),
  uploadStream: (file, o) => client.uploadStream(file, o),
  uploadBase64: (data, o) => client.uploadBase64(data, o),
};
const download: DownloadPort = { downloadFile, isGone, cleanupPartials, syncDir: fsyncDir, sanitizeName: (n) => sanitizeName(n, 'job') };

async function taskState(taskId: string): Promise<string | undefined> {
  const { tasks } = (await (await fetch(`${sb.url}/__sandbox/tasks`, admin(sb))).json()) as { tasks: Array<{ task_id: string; state: string }> };
  return tasks.find((x) => x.task_id === taskId)?.state;
}

describe('a completion callback', () => {
  it('that comes once the task id is written but before the job is waited on (the WAL fsync still out) is read at once, not dropped', async () => {
    const store = Store.openForWrite(join(t.dir, 'state.db'));
    const out = join(t.dir, 'out');
    store.openRun(join(t.dir, 'm.yaml'), out, sb.url, true, false);
    store.beginSync();
    store.syncJob({ id: 'a', model: 'alpha-image-2', kind: 'submit', where: 'm.yaml:a', specHash: 'h-a', spec: JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'a lighthouse' }, refs: [] }), estimatedCredits: 2 });
    store.commitSync();
    let pipeline: Pipeline | null = null;
    let task = '';
    /** The callback is delivered when the task id is committed and the move has not yet answered the pipeline. */
    class Window extends SqliteWorkStore {
      override async transition(id: string, from: JobState, to: JobState, patch?: JobPatch, o?: MoveOptions): Promise<Moved> {
        const moved = await super.transition(id, from, to, patch, o);
        if (to === 'submitted' && moved.moved) {
          task = patch!.task_id!;
          for (let i = 0; i < 400 && (await taskState(task)) !== 'finished'; i++) await new Promise((r) => setTimeout(r, 25));
          expect(store.getJob(id)).toMatchObject({ state: 'submitted', task_id: task });
          pipeline!.onCallback({ job: id, attempt: 1, taskId: task, status: 'finished' });
          await new Promise((r) => setImmediate(r));
        }
        return moved;
      }
    }
    const reads = sb.requestLog().length;
    // Time scale 20: without the callback, the first status read of an image task would come 300 s after its submit.
    pipeline = new Pipeline(new Window(store), service, download, {
      outDir: out,
      concurrency: 1,
      maxActive: 10,
      timeScale: 20,
      signal: new AbortController().signal,
      emit: () => undefined,
      callbackUrlFor: (id, attempt) => `http://127.0.0.1:9/cb?job=${id}&attempt=${attempt}`,
      baseUrl: sb.url,
      uploadMaxAgeMs: 60_000,
      statusRate: 1000,
    });
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([pipeline.run().then(() => 'ended'), new Promise((r) => (timer = setTimeout(() => r('no read in 30 s: the callback was dropped'), 30_000)))]);
    clearTimeout(timer);
    expect(ended).toBe('ended');
    expect(store.getJob('a')).toMatchObject({ state: 'done', task_id: task });
    expect(sb.requestLog().slice(reads).filter((r) => r.path.includes(task) && r.path.includes('status'))).toHaveLength(1);
    store.close();
  }, 60_000);
});
