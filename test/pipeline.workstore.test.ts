import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient, UploadLimiter } from '../src/client/index.js';
import type { EngineEvent } from '../src/engine/index.js';
import { Pipeline, type PipelineOptions } from '../src/engine/pipeline/pipeline.js';
import type { DownloadPort, ServicePort } from '../src/engine/ports.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { SqliteWorkStore, Store, type JobPatch, type JobState, type MoveOptions, type Moved, type ReleaseUploadSlot, type TakenOver } from '../src/store/index.js';
import { sha256Hex } from '../src/engine/results.js';
import { solidPng } from './helpers/png.js';
import { plainDownload, servicePortOf } from './helpers/ports.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The pipeline over a WorkStore whose answers a multi-worker store may give (src/store/port.ts): a lost
 * lease, jobs handed over mid-run, shared upload slots and status-read permits. The store is a real SQLite
 * state file under SqliteWorkStore; the service is the in-process sandbox, reached through the real client.
 */

const KEY = 'sk-pipeline-workstore';
const SCALE = 0.01;
let sb: Sandbox;
let client: ServiceClient;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: SCALE, seed: 5 });
  client = new ServiceClient({ baseUrl: sb.url, apiKey: KEY, policy: { baseMs: 5, maxMs: 50, maxAttempts: 4 }, uploadLimiter: new UploadLimiter({ windowMs: 61_200 * SCALE }) });
});
afterAll(async () => {
  await client.close();
  await sb.close();
});
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

const service = (): ServicePort => servicePortOf(client);
const download: DownloadPort = plainDownload;

/** A state file with these jobs (alpha-image-2 prompts, or an edit of a Data URL image), pending. */
function stateWith(jobs: Array<{ id: string; image?: string }>): { store: Store; out: string } {
  const t = tempDir('genbatch-pipeline-ws-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  cleanups.push(() => store.close());
  store.openRun(join(t.dir, 'm.yaml'), out, sb.url, true, false);
  store.beginSync();
  for (const j of jobs) {
    const spec = j.image
      ? { model: 'alpha-image-2-edit', input: { prompt: `edit ${j.id}`, image_urls: [j.image] }, refs: [{ path: 'input.image_urls[0]', file: '', sha256: sha256Hex(j.image), data: true }] }
      : { model: 'alpha-image-2', input: { prompt: `a lighthouse ${j.id}` }, refs: [] };
    store.syncJob({ id: j.id, model: spec.model, kind: 'submit', where: `m.yaml:${j.id}`, specHash: `h-${j.id}`, spec: JSON.stringify(spec), estimatedCredits: 1 });
  }
  store.commitSync();
  return { store, out };
}

async function run(work: SqliteWorkStore, out: string, more: Partial<PipelineOptions> = {}): Promise<EngineEvent[]> {
  const events: EngineEvent[] = [];
  const p = new Pipeline(work, service(), download, {
    ...more,
    outDir: out,
    concurrency: 4,
    maxActive: 100,
    timeScale: SCALE,
    signal: new AbortController().signal,
    emit: (e) => events.push(e),
    callbackUrlFor: null,
    baseUrl: sb.url,
    uploadMaxAgeMs: 60_000,
    statusRate: 1000,
  });
  await p.run();
  return events;
}

describe('the pipeline over a WorkStore', () => {
  it('a job whose lease was lost is dropped with a warning; the run goes on and finishes the others', async () => {
    const { store, out } = stateWith([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
    // Another worker took job b over while its task ran: this worker's write of its result is refused.
    class LostLease extends SqliteWorkStore {
      override transition(id: string, from: JobState, to: JobState, patch?: JobPatch, o?: MoveOptions): Promise<Moved> {
        if (id === 'b' && from === 'submitted') return Promise.resolve({ moved: false });
        return super.transition(id, from, to, patch, o);
      }
    }
    const events = await run(new LostLease(store), out);
    expect(store.getJob('a')?.state).toBe('done');
    expect(store.getJob('c')?.state).toBe('done');
    // Nothing written for b by this worker after its lease was lost, and nothing fetched.
    expect(store.getJob('b')).toMatchObject({ state: 'submitted', result: null });
    expect(store.filesOf('b')).toEqual([]);
    expect(events.filter((e) => e.type === 'warning').map((e) => (e as { message: string }).message)).toEqual([expect.stringMatching(/^job b: another worker holds it now/)]);
    expect(events.some((e) => e.type === 'job' && e.id === 'b' && e.from === 'submitted')).toBe(false);
  });

  it('jobs handed over mid-run (a dead worker\'s task at the service) are read and downloaded', async () => {
    const { store, out } = stateWith([{ id: 'a' }, { id: 'orphan' }]);
    // The orphan was sent by a worker that died: its task exists at the service, its job is `submitted`.
    const task = await client.submit({ model: 'alpha-image-2', input: { prompt: 'an orphan' } });
    store.transition('orphan', 'pending', 'submitting', { attemptsInc: 1, submitted_at: new Date().toISOString() });
    store.transition('orphan', 'submitting', 'submitted', { task_id: task.task_id });
    // Its lease expires only once this run is under way: the second takeOver (20 ms in) hands it over. Job a keeps
    // the run going past that: its first status read is not before its model's typical minimum (15 s x 0.01).
    class Handover extends SqliteWorkStore {
      override readonly takeOverMs = 20;
      calls = 0;
      override takeOver(): Promise<TakenOver> {
        this.calls++;
        if (this.calls === 1) return Promise.resolve({ submitted: [], downloading: [], moves: [] });
        if (this.calls === 2) return Promise.resolve({ submitted: [store.getJob('orphan')!], downloading: [], moves: [] });
        return Promise.resolve({ submitted: [], downloading: [], moves: [] });
      }
    }
    const work = new Handover(store);
    const submitsBefore = sb.stats().requests.submit ?? 0;
    await run(work, out);
    expect(work.calls).toBeGreaterThanOrEqual(2);
    expect(store.getJob('a')?.state).toBe('done');
    expect(store.getJob('orphan')).toMatchObject({ state: 'done', task_id: task.task_id, attempts: 1 });
    expect(store.filesOf('orphan').every((f) => f.state === 'done')).toBe(true);
    // Taken over, never sent again: the run sent job a only.
    expect((sb.stats().requests.submit ?? 0) - submitsBefore).toBe(1);
  });

  it('a worker told to keep waiting claims again when idle: jobs made ready meanwhile are sent; it ends when told', async () => {
    const { store, out } = stateWith([{ id: 'a' }]);
    const looks: string[][] = [];
    await run(new SqliteWorkStore(store), out, {
      idleMs: 10,
      keepWaiting: () => {
        looks.push(['a', 'late'].map((id) => `${id} ${store.getJob(id)?.state ?? 'absent'}`));
        if (looks.length > 1) return Promise.resolve(false);
        // Another worker's sync adds a job while this one is idle.
        store.beginSync();
        store.syncJob({ id: 'late', model: 'alpha-image-2', kind: 'submit', where: 'm.yaml:late', specHash: 'h-late', spec: JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'late' }, refs: [] }), estimatedCredits: 1 });
        store.commitSync();
        return Promise.resolve(true);
      },
    });
    expect(looks).toEqual([
      ['a done', 'late absent'],
      ['a done', 'late done'],
    ]);
  });

  it('every upload takes a shared slot and ends it; every status read takes a permit', async () => {
    const image = `data:image/png;base64,${solidPng(8, 8, [200, 40, 40]).toString('base64')}`;
    const { store, out } = stateWith([{ id: 'e1', image }, { id: 'e2', image: `data:image/png;base64,${solidPng(8, 8, [10, 40, 200]).toString('base64')}` }]);
    class Counting extends SqliteWorkStore {
      slots = 0;
      ended: boolean[] = [];
      permits = 0;
      override async acquireUploadSlot(signal?: AbortSignal): Promise<ReleaseUploadSlot> {
        this.slots++;
        await super.acquireUploadSlot(signal);
        return async (o) => {
          this.ended.push(o.rateLimited);
        };
      }
      override acquireStatusRead(signal?: AbortSignal): Promise<void> {
        this.permits++;
        return super.acquireStatusRead(signal);
      }
    }
    const work = new Counting(store);
    const statusBefore = sb.stats().requests.status ?? 0;
    await run(work, out);
    expect(store.getJob('e1')?.state).toBe('done');
    expect(store.getJob('e2')?.state).toBe('done');
    expect(work.slots).toBe(2);
    expect(work.ended).toEqual([false, false]);
    expect(work.permits).toBeGreaterThanOrEqual(2);
    expect(work.permits).toBe((sb.stats().requests.status ?? 0) - statusBefore);
  });
});
