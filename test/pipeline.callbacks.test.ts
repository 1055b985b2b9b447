import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient, UploadLimiter } from '../src/client/index.js';
import { callbackDeadline, sentTime } from '../src/engine/pipeline/callbacks.js';
import { Pipeline, type PipelineOptions } from '../src/engine/pipeline/pipeline.js';
import type { EngineEvent } from '../src/engine/index.js';
import type { ServicePort } from '../src/engine/ports.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { SqliteWorkStore, Store, type JobPatch, type JobState, type MoveOptions, type Moved } from '../src/store/index.js';
import { sandboxTasks } from './helpers/admin.js';
import { plainDownload, servicePortOf } from './helpers/ports.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Completion callbacks in the pipeline (src/engine/pipeline/callbacks.ts), in process over a real SQLite state and
 * the in-process sandbox. A callback is a hint, never a source: it makes the runner read the task's status at once
 * (one read, whose answer alone is acted on), or adopts a task for an uncertain job when its URL proves it came
 * from that job's latest submit. Anything else is ignored and counted. The service does not sign callbacks, so
 * every note below could be a forgery on a leaked URL.
 */
const KEY = 'sk-pipeline-callbacks';
let sb: Sandbox;
let client: ServiceClient;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.001, seed: 5, allowLoopback: true });
  client = new ServiceClient({ baseUrl: sb.url, apiKey: KEY, policy: { baseMs: 1, maxMs: 5, maxAttempts: 3 }, uploadLimiter: new UploadLimiter({ limit: 50, windowMs: 10 }) });
});
afterAll(async () => {
  await client.close();
  await sb.close();
});
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

const callbackUrlFor = (id: string, attempt: number) => `http://127.0.0.1:9/cb?job=${id}&attempt=${attempt}`;

/** A state file with these image jobs, pending. */
function stateWith(ids: string[]): { store: Store; out: string } {
  const t = tempDir('genbatch-pipeline-callbacks-');
  const out = join(t.dir, 'out');
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  cleanups.push(t.cleanup, () => store.close());
  store.openRun(join(t.dir, 'm.yaml'), out, sb.url, true, false);
  store.beginSync();
  for (const id of ids) {
    store.syncJob({ id, model: 'alpha-image-2', kind: 'submit', where: `m.yaml:${id}`, specHash: `h-${id}`, spec: JSON.stringify({ model: 'alpha-image-2', input: { prompt: `a lighthouse ${id}` }, refs: [] }), estimatedCredits: 2 });
  }
  store.commitSync();
  return { store, out };
}

/** Job `id` made uncertain after `attempts` submits whose answers were lost (no task id recorded). */
function makeUncertain(store: Store, id: string, attempts = 1): void {
  for (let i = 0; i < attempts; i++) {
    store.transition(id, 'pending', 'submitting', { attemptsInc: 1 });
    store.transition(id, 'submitting', i === attempts - 1 ? 'uncertain' : 'pending', { last_error: 'the answer was lost' });
  }
}

function pipelineFor(work: SqliteWorkStore, out: string, more: Partial<PipelineOptions> = {}, service: ServicePort = servicePortOf(client)): Pipeline {
  return new Pipeline(work, service, plainDownload, {
    outDir: out,
    concurrency: 1,
    maxActive: 10,
    timeScale: 0.001,
    signal: new AbortController().signal,
    emit: () => undefined,
    callbackUrlFor,
    baseUrl: sb.url,
    uploadMaxAgeMs: 60_000,
    statusRate: 1000,
    ...more,
  });
}

/** A real task at the sandbox (a job's lost submit made it, or anyone's). */
async function taskAtService(prompt: string): Promise<string> {
  return (await client.submit({ model: 'alpha-image-2', input: { prompt } })).task_id;
}

async function taskState(taskId: string): Promise<string | undefined> {
  return (await sandboxTasks(sb)).find((x) => x.task_id === taskId)?.state;
}
/** Status reads of `taskId` the sandbox answered since log index `from`. */
const readsOf = (taskId: string, from: number): number => sb.requestLog().slice(from).filter((r) => r.path.includes(taskId) && r.path.includes('status')).length;

describe('when a run stops waiting for callbacks', () => {
  it('a task that may still call back: sent at t, its model\'s typical maximum plus the callback retries later (x time scale)', () => {
    const t = '2026-11-28T10:00:00.000Z';
    // alpha-image-2: at most 60 s; the service's callback retries: 10 s.
    expect(callbackDeadline(t, 'alpha-image-2', 1)).toBe(Date.parse(t) + 70_000);
    expect(callbackDeadline(t, 'alpha-image-2', 0.5)).toBe(Date.parse(t) + 35_000);
    // An unknown model: 300 s.
    expect(callbackDeadline(t, 'no-such-model', 1)).toBe(Date.parse(t) + 310_000);
    expect(callbackDeadline(null, 'alpha-image-2', 1)).toBeNull();
    expect(callbackDeadline('not a time', 'alpha-image-2', 1)).toBeNull();
    expect(sentTime(t, 5)).toBe(Date.parse(t));
    expect(sentTime(null, 5)).toBe(5);
    expect(sentTime('not a time', 5)).toBe(5);
  });
});

describe('a completion callback', () => {
  it('that comes once the task id is written but before the job is waited on (the WAL fsync still out) is read at once, not dropped', async () => {
    const { store, out } = stateWith(['a']);
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
    const warned: string[] = [];
    pipeline = pipelineFor(new Window(store), out, { timeScale: 20, emit: (e) => void (e.type === 'warning' && warned.push(e.message)) });
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([pipeline.run().then(() => 'ended'), new Promise((r) => (timer = setTimeout(() => r('no read in 30 s: the callback was dropped'), 30_000)))]);
    clearTimeout(timer);
    expect(ended).toBe('ended');
    expect(store.getJob('a')).toMatchObject({ state: 'done', task_id: task });
    expect(readsOf(task, reads)).toBe(1);
    expect(pipeline.callbacksIgnored).toBe(0);
    // The job was answered, so nothing is adopted at the end of its submit (an adoption would be refused: a warning).
    expect(warned).toEqual([]);
  }, 60_000);

  it('of the job\'s own task once it is done (a duplicate, a late delivery) changes nothing and is not counted as ignored', async () => {
    const { store, out } = stateWith(['a', 'b']);
    let pipeline: Pipeline | null = null;
    const warned: string[] = [];
    pipeline = pipelineFor(new SqliteWorkStore(store), out, {
      emit: (e: EngineEvent) => {
        if (e.type === 'warning') warned.push(e.message);
        if (e.type === 'job' && e.id === 'a' && e.to === 'done') pipeline!.onCallback({ job: 'a', attempt: 1, taskId: store.getJob('a')!.task_id!, status: 'finished' });
      },
    });
    const reads = sb.requestLog().length;
    await pipeline.run();
    const task = store.getJob('a')!.task_id!;
    expect(store.getJob('a')).toMatchObject({ state: 'done', attempts: 1 });
    expect(pipeline.callbacksIgnored).toBe(0);
    expect(warned).toEqual([]);
    expect(readsOf(task, reads)).toBe(1);
  });

  it('naming the latest attempt of a job that is pending again (its submit proved nothing was made) adopts nothing: the job is sent as it would be', async () => {
    const { store, out } = stateWith(['a']);
    store.transition('a', 'pending', 'submitting', { attemptsInc: 1 });
    store.transition('a', 'submitting', 'pending', { last_error: '503 three times' });
    const forged = await taskAtService('forged for a');
    const warned: string[] = [];
    const pipeline = pipelineFor(new SqliteWorkStore(store), out, { emit: (e) => void (e.type === 'warning' && warned.push(e.message)) });
    const running = pipeline.run();
    pipeline.onCallback({ job: 'a', attempt: 1, taskId: forged, status: 'finished' });
    await running;
    expect(store.getJob('a')).toMatchObject({ state: 'done', attempts: 2 });
    expect(store.getJob('a')!.task_id).not.toBe(forged);
    expect(warned).toEqual([]);
  });

  it('naming another task than the job\'s (during its submit, or while it is waited on) is ignored and counted; the job ends with its own task', async () => {
    const { store, out } = stateWith(['a', 'b']);
    const other = await taskAtService('someone else');
    const reads = sb.requestLog().length;
    let pipeline: Pipeline | null = null;
    let waited = false;
    pipeline = pipelineFor(new SqliteWorkStore(store), out, {
      emit: (e) => {
        // Job a: as its task id is written (its submit not yet ended). Job b: once it is waited on.
        if (e.type === 'job' && e.id === 'a' && e.to === 'submitted') pipeline!.onCallback({ job: 'a', attempt: 1, taskId: other, status: 'finished' });
        if (e.type === 'job' && e.id === 'b' && e.to === 'submitted') setImmediate(() => ((waited = true), pipeline!.onCallback({ job: 'b', attempt: 1, taskId: other, status: 'finished' })));
      },
    });
    await pipeline.run();
    expect(waited).toBe(true);
    expect(pipeline.callbacksIgnored).toBe(2);
    for (const id of ['a', 'b']) expect(store.getJob(id)).toMatchObject({ state: 'done' });
    expect(new Set([store.getJob('a')!.task_id, store.getJob('b')!.task_id, other]).size).toBe(3);
    expect(readsOf(other, reads)).toBe(0);
  });

  it('for a job this run does not have is ignored and counted; nothing is read', async () => {
    const { store, out } = stateWith(['a']);
    const other = await taskAtService('no job of ours');
    const reads = sb.requestLog().length;
    const pipeline = pipelineFor(new SqliteWorkStore(store), out);
    const running = pipeline.run();
    pipeline.onCallback({ job: 'not-a-job', attempt: 1, taskId: other, status: 'finished' });
    await running;
    expect(pipeline.callbacksIgnored).toBe(1);
    expect(readsOf(other, reads)).toBe(0);
    expect(store.getJob('a')?.state).toBe('done');
  });
});

describe('a callback for an uncertain job (its submit\'s answer lost)', () => {
  it('from its latest submit (or from a URL without an attempt, older genbatch) adopts the task it names: read at once, downloaded, done with that task id', async () => {
    const { store, out } = stateWith(['a', 'b']);
    makeUncertain(store, 'a');
    makeUncertain(store, 'b');
    const task = await taskAtService('the lost submit of a');
    const taskB = await taskAtService('the lost submit of b');
    for (let i = 0; i < 400 && ((await taskState(task)) !== 'finished' || (await taskState(taskB)) !== 'finished'); i++) await new Promise((r) => setTimeout(r, 25));
    const reads = sb.requestLog().length;
    // Time scale 20: an adopted task not read at once would be read 300 s later.
    const pipeline = pipelineFor(new SqliteWorkStore(store), out, { recoveredUncertain: ['a', 'b'], timeScale: 20 });
    const running = pipeline.run();
    pipeline.onCallback({ job: 'a', attempt: 1, taskId: task, status: 'finished' });
    pipeline.onCallback({ job: 'b', attempt: null, taskId: taskB, status: 'finished' });
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([running.then(() => 'ended'), new Promise((r) => (timer = setTimeout(() => r('not read at once'), 20_000)))]);
    clearTimeout(timer);
    expect(ended).toBe('ended');
    expect(store.getJob('a')).toMatchObject({ state: 'done', task_id: task, attempts: 1 });
    expect(store.getJob('b')).toMatchObject({ state: 'done', task_id: taskB, attempts: 1 });
    expect(store.getJob('a')!.last_error).toMatch(/adopted from a late completion callback/);
    expect(readsOf(task, reads)).toBe(1);
    expect(pipeline.callbacksIgnored).toBe(0);
    expect(pipeline.submitsSent).toBe(0);
  }, 60_000);

  it('that comes late: the run waits for it at its end (its grace), then adopts the task', async () => {
    const { store, out } = stateWith(['a']);
    makeUncertain(store, 'a');
    const task = await taskAtService('the lost submit of a, late');
    // Time scale 0.05: a grace of 6 s at the end of the run; the callback comes 1.5 s after the run began.
    const pipeline = pipelineFor(new SqliteWorkStore(store), out, { recoveredUncertain: ['a'], timeScale: 0.05 });
    const running = pipeline.run();
    const late = setTimeout(() => pipeline.onCallback({ job: 'a', attempt: 1, taskId: task, status: 'finished' }), 1_500);
    await running;
    clearTimeout(late);
    expect(store.getJob('a')).toMatchObject({ state: 'done', task_id: task });
  }, 60_000);

  it('from an earlier submit (its URL names another attempt) never adopts: ignored, the job stays uncertain', async () => {
    const { store, out } = stateWith(['a']);
    makeUncertain(store, 'a', 2);
    const task = await taskAtService('the first submit of a');
    const reads = sb.requestLog().length;
    const pipeline = pipelineFor(new SqliteWorkStore(store), out, { recoveredUncertain: ['a'] });
    const running = pipeline.run();
    pipeline.onCallback({ job: 'a', attempt: 1, taskId: task, status: 'finished' });
    await running;
    expect(store.getJob('a')).toMatchObject({ state: 'uncertain', task_id: null, attempts: 2 });
    expect(pipeline.callbacksIgnored).toBe(1);
    expect(readsOf(task, reads)).toBe(0);
  });

  it('naming a task another job records never adopts it (one task is the result of one job at most)', async () => {
    const { store, out } = stateWith(['a', 'b']);
    makeUncertain(store, 'b');
    // Job a runs first and records its task; b's leaked URL then names it.
    const first = pipelineFor(new SqliteWorkStore(store), out, { selected: new Set(['a']) });
    await first.run();
    const taskOfA = store.getJob('a')!.task_id!;
    expect(taskOfA).toMatch(/\S/);
    const pipeline = pipelineFor(new SqliteWorkStore(store), out, { recoveredUncertain: ['b'] });
    const running = pipeline.run();
    pipeline.onCallback({ job: 'b', attempt: 1, taskId: taskOfA, status: 'finished' });
    await running;
    expect(store.getJob('b')).toMatchObject({ state: 'uncertain', task_id: null });
    expect(store.getJob('a')).toMatchObject({ state: 'done', task_id: taskOfA });
    expect(pipeline.callbacksIgnored).toBe(1);
  });

  it('that came while its submit was out adopts the task when it named one alone; two task ids (a forgery\'s sign) adopt neither', async () => {
    for (const forged of [false, true]) {
      const { store, out } = stateWith(['a']);
      let pipeline: Pipeline | null = null;
      let made = '';
      const svc = servicePortOf(client);
      // The service makes the task and its answer is lost (500 after creating it); its callback, and with `forged`
      // a second naming another task, arrive before the submit ends.
      svc.submit = async (body, signal) => {
        sb.script('submit', ['500-after']);
        try {
          return await client.submit(body, signal ? { signal } : {});
        } catch (err) {
          made = (await sandboxTasks(sb)).find((x) => x.callback_url === callbackUrlFor('a', 1))!.task_id;
          pipeline!.onCallback({ job: 'a', attempt: 1, taskId: made, status: 'finished' });
          if (forged) pipeline!.onCallback({ job: 'a', attempt: 1, taskId: await taskAtService('forged'), status: 'finished' });
          await new Promise((r) => setImmediate(r));
          throw err;
        }
      };
      pipeline = pipelineFor(new SqliteWorkStore(store), out, {}, svc);
      await pipeline.run();
      expect(made).toMatch(/\S/);
      if (forged) expect(store.getJob('a')).toMatchObject({ state: 'uncertain', task_id: null, attempts: 1 });
      else expect(store.getJob('a')).toMatchObject({ state: 'done', task_id: made, attempts: 1 });
    }
  });
});
