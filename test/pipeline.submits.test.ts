import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ChatClient, ServiceClient, UploadLimiter } from '../src/client/index.js';
import type { EngineEvent } from '../src/engine/index.js';
import { CreditCap, LocalLedger, classOf } from '../src/engine/pipeline/cap.js';
import { Pipeline, type PipelineOptions } from '../src/engine/pipeline/pipeline.js';
import type { DownloadPort, ServicePort } from '../src/engine/ports.js';
import { sha256Hex } from '../src/engine/results.js';
import type { StoredSpec } from '../src/engine/spec.js';
import { ApiError } from '../src/errors.js';
import { startSandbox, type Sandbox, type ScriptStep } from '../src/sandbox/index.js';
import { SqliteWorkStore, Store, type Claim, type JobPatch, type JobRow, type JobState, type MoveOptions, type Moved } from '../src/store/index.js';
import { solidPng } from './helpers/png.js';
import { plainDownload, servicePortOf } from './helpers/ports.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Submits (src/engine/pipeline/submits.ts): the intent committed (durably) before the POST, the task id written
 * (durably) the moment it arrives, and each outcome of a POST or an upload put where a later run decides
 * right. The pipeline runs in process over a real SQLite state, against the in-process sandbox through the
 * real client; the sandbox's scripted faults give the service's answers (a script queues steps for the next
 * requests, so each test scripts exactly the steps its requests use).
 */

const KEY = 'sk-pipeline-submits';
const POOR = 'sk-pipeline-submits-poor';
const SCALE = 0.001;
const TRIES = 3;
let sb: Sandbox;
let client: ServiceClient;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000, [POOR]: 0 }, timeScale: SCALE, seed: 7 });
  client = clientFor(KEY);
});
afterAll(async () => {
  await client.close();
  await sb.close();
});
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function clientFor(key: string): ServiceClient {
  return new ServiceClient({ baseUrl: sb.url, apiKey: key, policy: { baseMs: 1, maxMs: 5, maxAttempts: TRIES }, uploadLimiter: new UploadLimiter({ limit: 50, windowMs: 10 }) });
}

/** The service as the pipeline sees it; `onSubmit` looks at each POST as it leaves. */
function service(c: ServiceClient, onSubmit: (body: { model: string; input: Record<string, unknown>; callback_url?: string }) => void = () => undefined): ServicePort {
  const port = servicePortOf(c);
  return {
    ...port,
    submit: (body, signal) => {
      onSubmit(body);
      return port.submit(body, signal);
    },
  };
}
const download: DownloadPort = plainDownload;

type Job = { id: string; image?: string; spec?: Partial<StoredSpec>; estimate?: number | null; kind?: string; needs?: string[] };
const png = (rgb: [number, number, number]): string => `data:image/png;base64,${solidPng(8, 8, rgb).toString('base64')}`;

/** A state file with these jobs (alpha-image-2 prompts, or an edit of a Data URL image), pending. */
function stateWith(jobs: Job[]): { store: Store; out: string } {
  const t = tempDir('genbatch-pipeline-submits-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  const store = Store.openForWrite(join(t.dir, 'state.db'));
  cleanups.push(() => store.close());
  store.openRun(join(t.dir, 'm.yaml'), out, sb.url, true, false);
  store.beginSync();
  for (const j of jobs) {
    const base: StoredSpec = j.image
      ? { model: 'alpha-image-2-edit', input: { prompt: `edit ${j.id}`, image_urls: [j.image] }, refs: [{ path: 'input.image_urls[0]', file: '', sha256: sha256Hex(j.image), data: true }] }
      : { model: 'alpha-image-2', input: { prompt: `a lighthouse ${j.id}` }, refs: [] };
    const spec = { ...base, ...j.spec };
    store.syncJob({ id: j.id, model: spec.model, kind: j.kind ?? 'submit', where: `m.yaml:${j.id}`, specHash: `h-${j.id}`, spec: JSON.stringify(spec), estimatedCredits: j.estimate === undefined ? 2 : j.estimate });
  }
  const links = jobs.flatMap((j) => (j.needs ? [[j.id, { parents: j.needs }] as const] : []));
  if (links.length > 0) store.graph.setManifestLinks(new Map(links));
  store.commitSync();
  return { store, out };
}

/** Every move the pipeline asks of the store, with the patch keys and whether it was durable; and the claims. */
class Recording extends SqliteWorkStore {
  moves: string[] = [];
  patches = new Map<string, JobPatch>();
  claims: number[] = [];
  override transition(id: string, from: JobState, to: JobState, patch?: JobPatch, o?: MoveOptions): Promise<Moved> {
    this.moves.push(`${id} ${from}->${to}${o?.durable ? ' durable' : ''}`);
    if (patch) this.patches.set(`${id} ${to}`, patch);
    return super.transition(id, from, to, patch, o);
  }
  override claimPending(n: number, opts?: { only?: ReadonlySet<string> | null }): Promise<Claim> {
    this.claims.push(n);
    return super.claimPending(n, opts);
  }
}

/** The pipeline of the last run(). */
let last: Pipeline;
async function run(work: SqliteWorkStore, out: string, svc: ServicePort, more: Partial<PipelineOptions> = {}): Promise<EngineEvent[]> {
  const events: EngineEvent[] = [];
  const p = (last = new Pipeline(work, svc, download, {
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
    ...more,
  }));
  await p.run();
  return events;
}
const warnings = (events: EngineEvent[]): string[] => events.flatMap((e) => (e.type === 'warning' ? [e.message] : []));
const submitsAtService = (): number => sb.stats().requests.submit ?? 0;

describe('the intent before the POST, the task id the moment it arrives', () => {
  it('a job is submitting, its attempt counted and its input written, when its POST leaves; submitted with the task id after', async () => {
    const { store, out } = stateWith([{ id: 'a', estimate: 3 }]);
    const work = new Recording(store);
    const atPost: Array<JobRow | undefined> = [];
    const bodies: unknown[] = [];
    const events = await run(work, out, service(client, (body) => (atPost.push(store.getJob('a')), bodies.push(body))));
    expect(atPost).toHaveLength(1);
    expect(atPost[0]).toMatchObject({ state: 'submitting', attempts: 1, task_id: null, last_error: null, expected_credits: 3 });
    expect(JSON.parse(atPost[0]!.submitted_input!)).toEqual({ prompt: 'a lighthouse a' });
    expect(atPost[0]!.submitted_at).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(bodies).toEqual([{ model: 'alpha-image-2', input: { prompt: 'a lighthouse a' } }]);
    expect(work.moves.slice(0, 2)).toEqual(['a pending->submitting durable', 'a submitting->submitted durable']);
    const job = store.getJob('a')!;
    expect(job).toMatchObject({ state: 'done', attempts: 1 });
    expect(work.patches.get('a submitted')).toEqual({ task_id: job.task_id });
    expect(job.task_id).toMatch(/\S/);
    expect(events.filter((e) => e.type === 'sending')).toEqual([{ type: 'sending', id: 'a', estimated_credits: 3 }]);
    expect(last.submitsSent).toBe(1);
  });

  it('a job whose intent the store refused (its lease lost) is never sent', async () => {
    const { store, out } = stateWith([{ id: 'a' }, { id: 'b' }]);
    class Lost extends SqliteWorkStore {
      override transition(id: string, from: JobState, to: JobState, patch?: JobPatch, o?: MoveOptions): Promise<Moved> {
        if (id === 'a' && to === 'submitting') return Promise.resolve({ moved: false });
        return super.transition(id, from, to, patch, o);
      }
    }
    const posted: unknown[] = [];
    await run(new Lost(store), out, service(client, (b) => posted.push(b.input.prompt)));
    expect(posted).toEqual(['a lighthouse b']);
    expect(store.getJob('a')).toMatchObject({ state: 'pending', attempts: 0 });
    expect(last.submitsSent).toBe(1);
  });

  it('a task id the store refused to record (the lease lost) is not waited on by this worker', async () => {
    const { store, out } = stateWith([{ id: 'a' }, { id: 'b' }]);
    class Lost extends SqliteWorkStore {
      override transition(id: string, from: JobState, to: JobState, patch?: JobPatch, o?: MoveOptions): Promise<Moved> {
        if (id === 'a' && to === 'submitted') return Promise.resolve({ moved: false });
        return super.transition(id, from, to, patch, o);
      }
    }
    const tasks: string[] = [];
    const svc = service(client);
    svc.submit = async (body, signal) => {
      const r = await client.submit(body, signal ? { signal } : {});
      tasks.push(r.task_id);
      return r;
    };
    const reads = sb.requestLog().length;
    await run(new Lost(store), out, svc);
    expect(store.getJob('a')).toMatchObject({ state: 'submitting', task_id: null });
    expect(store.getJob('b')?.state).toBe('done');
    const read = sb.requestLog().slice(reads).map((r) => r.path);
    expect(read.filter((p) => p.includes(tasks[1]!)).length).toBeGreaterThan(0);
    expect(read.filter((p) => p.includes(tasks[0]!))).toEqual([]);
  });

  it('sends the seed a redo chose, the manifest callback_url, or the run callback URL of this attempt', async () => {
    const { store, out } = stateWith([
      { id: 's', spec: { seed: 42, model: 'alpha-image-2' } },
      { id: 'cb', spec: { callback_url: 'http://127.0.0.1:9/manifest-hook' } },
    ]);
    const bodies = new Map<string, unknown>();
    await run(new SqliteWorkStore(store), out, service(client, (b) => bodies.set(String(b.input.prompt), b)));
    expect(bodies.get('a lighthouse s')).toEqual({ model: 'alpha-image-2', input: { prompt: 'a lighthouse s', seed: 42 } });
    expect(bodies.get('a lighthouse cb')).toEqual({ model: 'alpha-image-2', input: { prompt: 'a lighthouse cb' }, callback_url: 'http://127.0.0.1:9/manifest-hook' });
    expect(JSON.parse(store.getJob('s')!.submitted_input!)).toEqual({ prompt: 'a lighthouse s', seed: 42 });
    // The stored spec is left as it was: the seed goes to the input sent only.
    expect(JSON.parse(store.getJob('s')!.spec).input).toEqual({ prompt: 'a lighthouse s' });

    const again = stateWith([{ id: 'r', spec: { callback_url: 'http://127.0.0.1:9/manifest-hook' } }]);
    again.store.transition('r', 'pending', 'submitting', { attemptsInc: 1 });
    again.store.transition('r', 'submitting', 'pending', {});
    const sent: unknown[] = [];
    const urls: string[] = [];
    const p = run(new SqliteWorkStore(again.store), again.out, service(client, (b) => sent.push(b)), {
      callbackUrlFor: (id, attempt) => (urls.push(`${id} ${attempt}`), `http://127.0.0.1:9/cb?job=${id}&attempt=${attempt}`),
    });
    await p;
    expect(urls[0]).toBe('r 2');
    expect(sent[0]).toMatchObject({ callback_url: 'http://127.0.0.1:9/cb?job=r&attempt=2' });
  });
});

describe('the outcome of a POST', () => {
  it('a submit whose task may exist (an error after the service created it) is uncertain, never sent again in the run', async () => {
    const { store, out } = stateWith([{ id: 'a' }]);
    sb.script('submit', ['500-after']);
    const before = submitsAtService();
    await run(new SqliteWorkStore(store), out, service(client));
    expect(store.getJob('a')).toMatchObject({ state: 'uncertain', attempts: 1, task_id: null });
    expect(store.getJob('a')!.last_error).toMatch(/500/);
    expect(submitsAtService() - before).toBe(1);
  });

  it('retries used up on answers that prove nothing was created leave the job pending for a later run', async () => {
    for (const fault of ['503', '429'] as const) {
      const { store, out } = stateWith([{ id: 'a' }]);
      sb.script('submit', Array<ScriptStep>(TRIES).fill(fault));
      await run(new SqliteWorkStore(store), out, service(client));
      expect(store.getJob('a')).toMatchObject({ state: 'pending', attempts: 1, task_id: null });
      expect(store.getJob('a')!.last_error).toMatch(new RegExp(fault));
    }
  });

  it('a refused input (400) fails permanently; the other jobs go on', async () => {
    const { store, out } = stateWith([{ id: 'bad', spec: { input: { prompt: 'x', aspect_ratio: 'not-a-ratio' } } }, { id: 'good' }]);
    await run(new SqliteWorkStore(store), out, service(client));
    expect(store.getJob('bad')).toMatchObject({ state: 'failed', permanent: 1 });
    expect(store.getJob('bad')!.last_error).toMatch(/\S/);
    expect(store.getJob('good')?.state).toBe('done');
  });

  it('a 402 (no credits left) puts the job back to pending and stops the sending', async () => {
    const { store, out } = stateWith([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
    const poor = clientFor(POOR);
    cleanups.push(() => void poor.close());
    const events = await run(new SqliteWorkStore(store), out, service(poor), { concurrency: 1 });
    expect(['a', 'b', 'c'].map((id) => store.getJob(id)?.state)).toEqual(['pending', 'pending', 'pending']);
    expect(store.getJob('a')!.last_error).toMatch(/\S/);
    expect(store.getJob('b')!.attempts).toBe(0);
    expect(events).toContainEqual(expect.objectContaining({ type: 'stopping', reason: 'insufficient-credits' }));
  });

  it('a stop before the POST was sent (during a retry wait) leaves the job pending: nothing was created', async () => {
    const { store, out } = stateWith([{ id: 'a' }]);
    const stop = new AbortController();
    // The stop comes when the wait after the 503 begins (the answer is in: nothing is at the service), not after a
    // fixed delay, which a loaded machine can outrun while the first POST is still in flight.
    const slow = new ServiceClient({ baseUrl: sb.url, apiKey: KEY, policy: { baseMs: 60_000, maxMs: 60_000, maxAttempts: 5 }, onRetry: () => stop.abort('SIGINT') });
    cleanups.push(() => void slow.close());
    sb.script('submit', ['503']); // one step: the stop comes during the wait after it
    await run(new SqliteWorkStore(store), out, service(slow), { signal: stop.signal });
    expect(store.getJob('a')).toMatchObject({ state: 'pending', last_error: 'the run was stopped before this submit was sent' });
  });

  it('a stop while the POST is at the service makes the job uncertain, never pending: its task may exist', async () => {
    const { store, out } = stateWith([{ id: 'a' }]);
    sb.script('submit', ['slow']);
    const stop = new AbortController();
    // The stop once the POST is at the sandbox (its slow step taken), not after a fixed delay a loaded machine can outrun.
    const arrived = sb.stats().requests.submit ?? 0;
    const atService = () => {
      const watch = setInterval(() => {
        if ((sb.stats().requests.submit ?? 0) === arrived) return;
        clearInterval(watch);
        stop.abort('SIGINT');
      }, 5);
    };
    await run(new SqliteWorkStore(store), out, service(client, atService), { signal: stop.signal });
    expect(store.getJob('a')).toMatchObject({ state: 'uncertain', attempts: 1 });
    expect((sb.stats().requests.submit ?? 0) - arrived).toBe(1);
  });

  it('an unexpected error once the request may have left makes the job uncertain (never a guess)', async () => {
    const { store, out } = stateWith([{ id: 'a' }]);
    const svc = service(client);
    svc.submit = async (body, signal) => {
      await client.submit(body, signal ? { signal } : {});
      throw new TypeError('the answer could not be handled');
    };
    await run(new SqliteWorkStore(store), out, svc);
    expect(store.getJob('a')).toMatchObject({ state: 'uncertain', last_error: 'the answer could not be handled' });
  });

  it('a refused connection on every try (nothing was sent) leaves the job pending', async () => {
    const { store, out } = stateWith([{ id: 'a' }]);
    const closed = await startSandbox({ port: 0, keys: { [KEY]: 10 }, timeScale: SCALE });
    await closed.close();
    const nowhere = new ServiceClient({ baseUrl: closed.url, apiKey: KEY, policy: { baseMs: 1, maxMs: 5, maxAttempts: TRIES } });
    cleanups.push(() => void nowhere.close());
    await run(new SqliteWorkStore(store), out, service(nowhere));
    expect(store.getJob('a')).toMatchObject({ state: 'pending', attempts: 1, task_id: null });
  });

  it('a 409 (what the job asks for already exists) is an outcome: exists, not failed, not retried', async () => {
    const { store, out } = stateWith([{ id: 'a' }]);
    const svc = service(client);
    let posts = 0;
    svc.submit = () => {
      posts++;
      return Promise.reject(new ApiError(409, 'conflict_error', 'a music video for this track exists'));
    };
    await run(new SqliteWorkStore(store), out, svc);
    expect(store.getJob('a')).toMatchObject({ state: 'exists', last_error: 'HTTP 409 conflict_error: a music video for this track exists' });
    expect(posts).toBe(1);
  });
});

describe('capacity', () => {
  /** The service with each POST held 40 ms, counting the POSTs at the service at once and the tasks waited on (submitted) at each POST. */
  function held(c: ServiceClient, store: Store): { svc: ServicePort; most: () => number; outAtPost: number[] } {
    let now = 0;
    let most = 0;
    const outAtPost: number[] = [];
    const svc = service(c);
    svc.submit = async (body, signal) => {
      outAtPost.push(store.counts().submitted);
      most = Math.max(most, ++now);
      await new Promise((r) => setTimeout(r, 40));
      try {
        return await c.submit(body, signal ? { signal } : {});
      } finally {
        now--;
      }
    };
    return { svc, most: () => most, outAtPost };
  }

  it('never more POSTs at once than --concurrency', async () => {
    const { store, out } = stateWith(['a', 'b', 'c', 'd', 'e', 'f'].map((id) => ({ id })));
    const h = held(client, store);
    await run(new SqliteWorkStore(store), out, h.svc, { concurrency: 2 });
    expect(h.most()).toBe(2);
    expect(last.submitsSent).toBe(6);
  });

  it('never more tasks waited on than --max-active: the next job is sent only once the task out has finished', async () => {
    const { store, out } = stateWith(['a', 'b', 'c'].map((id) => ({ id })));
    const h = held(client, store);
    await run(new SqliteWorkStore(store), out, h.svc, { concurrency: 4, maxActive: 1 });
    expect(h.most()).toBe(1);
    expect(h.outAtPost).toEqual([0, 0, 0]);
    expect(['a', 'b', 'c'].map((id) => store.getJob(id)?.state)).toEqual(['done', 'done', 'done']);
  });

  it('jobs claimed and not sent are given back at the end: the same worker sends them in its next run', async () => {
    const { store, out } = stateWith([{ id: 'a', estimate: 5 }, { id: 'b', estimate: 5 }]);
    const work = new SqliteWorkStore(store);
    const cap = new CreditCap({ credits: 1, name: '--max-credits 1', ledger: new LocalLedger(1, 0, null), balance: () => client.balance(), timeScale: SCALE, emit: () => undefined });
    await run(work, out, service(client), { cap });
    expect(['a', 'b'].map((id) => store.getJob(id)?.state)).toEqual(['pending', 'pending']);
    await run(work, out, service(client));
    expect(['a', 'b'].map((id) => store.getJob(id)?.state)).toEqual(['done', 'done']);
  });
});

describe('under a credit cap', () => {
  function capOf(credits: number, told: EngineEvent[]): CreditCap {
    return new CreditCap({ credits, name: `--max-credits ${credits}`, ledger: new LocalLedger(credits, 0, null), balance: () => client.balance(), timeScale: SCALE, emit: (e) => told.push(e) });
  }

  it('each wait for the cap is said once as it begins and once as it ends; the next job of the class records the observed price as expected', async () => {
    const { store, out } = stateWith([{ id: 'a', estimate: 0.5 }, { id: 'b', estimate: 0.5 }]);
    const told: EngineEvent[] = [];
    const cap = capOf(1000, told);
    const events = await run(new SqliteWorkStore(store), out, service(client), { cap });
    expect(['a', 'b'].map((id) => store.getJob(id)?.state)).toEqual(['done', 'done']);
    const price = cap.prices.get(classOf(store.getJob('a')!));
    expect(told.filter((e) => e.type === 'cap-price')).toHaveLength(1);
    expect(store.getJob('a')!.expected_credits).toBe(0.5);
    expect(store.getJob('b')!.expected_credits).toBe(price);
    const waits = events.flatMap((e) => (e.type === 'wait' && e.what === 'credit-cap' ? [e] : []));
    const wait = (rule: string, queued: number) => ({ type: 'wait', what: 'credit-cap', rule, queued, next_in_ms: null });
    expect(waits).toEqual([
      wait('a balance reading before a goes alone', 1),
      wait('a balance reading before a goes alone', 0),
      wait("job a sent alone to learn its class's price", 1),
      wait("job a sent alone to learn its class's price", 0),
    ]);
  });

  it('a job that does not fit with nothing in flight stops the sending: it stays pending, never sent', async () => {
    const { store, out } = stateWith([{ id: 'a', estimate: 5 }, { id: 'b', estimate: 5 }]);
    const before = submitsAtService();
    const events = await run(new SqliteWorkStore(store), out, service(client), { cap: capOf(1, []) });
    expect(['a', 'b'].map((id) => store.getJob(id)?.state)).toEqual(['pending', 'pending']);
    expect(store.getJob('a')!.attempts).toBe(0);
    expect(submitsAtService()).toBe(before);
    expect(events).toContainEqual({ type: 'stopping', reason: 'credit-cap' });
  });
});

describe('uploads before the POST', () => {
  it('an upload the service refuses (4xx) fails the job, never sent', async () => {
    const { store, out } = stateWith([{ id: 'e', image: 'data:text/plain;base64,aGVsbG8gd29ybGQ=' }]);
    const before = submitsAtService();
    await run(new SqliteWorkStore(store), out, service(client));
    expect(store.getJob('e')).toMatchObject({ state: 'failed', attempts: 0 });
    expect(store.getJob('e')!.last_error).toMatch(/^upload refused: HTTP 4\d\d/);
    expect(submitsAtService()).toBe(before);
  });

  it('an upload that fails transiently is tried again in the run, three times at most, then the job is left pending with a warning', async () => {
    const { store, out } = stateWith([{ id: 'e', image: png([200, 40, 40]) }]);
    sb.script('upload', Array<ScriptStep>(TRIES * 4).fill('500'));
    const uploads = sb.stats().requests.upload ?? 0;
    const events = await run(new SqliteWorkStore(store), out, service(client));
    expect((sb.stats().requests.upload ?? 0) - uploads).toBe(TRIES * 4);
    expect(store.getJob('e')).toMatchObject({ state: 'pending', attempts: 0 });
    expect(store.getJob('e')!.last_error).toMatch(/^upload failed: .*500/);
    expect(warnings(events)).toEqual([expect.stringMatching(/^job e: upload failed, left pending: .*500/)]);
  });

  it('a job queued again after a failed upload is sent, in a job graph too: a pass of the loop while its submit is still ending does not drop it', async () => {
    // z needs e: the run has a job graph, whose check passes over a job still in a submit.
    const { store, out } = stateWith([{ id: 'e', image: png([20, 160, 90]) }, { id: 'z', needs: ['e'] }]);
    sb.script('upload', Array<ScriptStep>(TRIES).fill('500'));
    // The end of e's first submit gives its reservation back slowly, and wakes the loop meanwhile.
    class SlowBack extends LocalLedger {
      wake: () => void = () => undefined;
      override async unreserve(id: string): Promise<void> {
        this.wake();
        await new Promise((r) => setTimeout(r, 200));
        return super.unreserve(id);
      }
    }
    const ledger = new SlowBack(1000, 0, null);
    const cap = new CreditCap({ credits: 1000, name: '--max-credits 1000', ledger, balance: () => client.balance(), timeScale: SCALE, emit: () => undefined });
    ledger.wake = () => cap.wake();
    const events = await run(new SqliteWorkStore(store), out, service(client), { cap });
    expect(store.getJob('e')).toMatchObject({ state: 'done', attempts: 1 });
    expect(store.getJob('z')).toMatchObject({ state: 'done', attempts: 1 });
    expect(warnings(events)).toEqual([]);
  });

  it('an upload 429 on every try is not a refusal: the job is queued again in the run and sent', async () => {
    const { store, out } = stateWith([{ id: 'e', image: png([90, 40, 140]) }]);
    sb.script('upload', Array<ScriptStep>(TRIES).fill('429'));
    await run(new SqliteWorkStore(store), out, service(client));
    expect(store.getJob('e')).toMatchObject({ state: 'done', attempts: 1 });
  });

  it('a stop during an upload leaves the job pending with nothing noted', async () => {
    const { store, out } = stateWith([{ id: 'e', image: png([40, 40, 240]) }]);
    const stop = new AbortController();
    // The stop comes when the wait after the 503 begins (the answer is in), not after a fixed delay: a loaded
    // machine could outrun that before the upload reached the sandbox, leaving the 503 to the next test's upload.
    const slow = new ServiceClient({ baseUrl: sb.url, apiKey: KEY, policy: { baseMs: 60_000, maxMs: 60_000, maxAttempts: 5 }, onRetry: () => stop.abort('SIGINT') });
    cleanups.push(() => void slow.close());
    const refused = sb.stats().uploads.refused;
    sb.script('upload', ['503']); // one step: the stop comes during the wait after it
    const events = await run(new SqliteWorkStore(store), out, service(slow), { signal: stop.signal });
    expect(store.getJob('e')).toMatchObject({ state: 'pending', attempts: 0, last_error: null });
    expect(warnings(events)).toEqual([]);
    expect(sb.stats().uploads.refused).toBe(refused + 1);
  });

  it('a reference to an image the input no longer holds leaves the job pending with a warning, never sent', async () => {
    const image = png([1, 2, 3]);
    const { store, out } = stateWith([{ id: 'e', image, spec: { refs: [{ path: 'input.image_urls[1]', file: '', sha256: sha256Hex(image), data: true }] } }]);
    const before = submitsAtService();
    const events = await run(new SqliteWorkStore(store), out, service(client));
    expect(store.getJob('e')).toMatchObject({ state: 'pending', attempts: 0, last_error: 'upload failed: no image at input.image_urls[1]' });
    expect(warnings(events)).toEqual(['job e: upload failed, left pending: no image at input.image_urls[1]']);
    expect(submitsAtService()).toBe(before);
  });

  it('a local image file is uploaded as a stream and its URL sent in its place', async () => {
    const t = tempDir('genbatch-pipeline-submits-file-');
    cleanups.push(t.cleanup);
    const file = join(t.dir, 'ref.png');
    const bytes = solidPng(8, 8, [5, 6, 7]);
    writeFileSync(file, bytes);
    const { store, out } = stateWith([{ id: 'f', spec: { model: 'alpha-image-2-edit', input: { prompt: 'edit f', image_urls: ['ref.png'] }, refs: [{ path: 'input.image_urls[0]', file, sha256: createHash('sha256').update(bytes).digest('hex') }] } }]);
    const streams = sb.stats().requests.upload ?? 0;
    await run(new SqliteWorkStore(store), out, service(client));
    expect(store.getJob('f')).toMatchObject({ state: 'done', attempts: 1 });
    expect(JSON.parse(store.getJob('f')!.submitted_input!).image_urls[0]).toMatch(/^http/);
    expect((sb.stats().requests.upload ?? 0) - streams).toBe(1);
  });

  it('an upload that fails once is tried again in the run and the job is sent', async () => {
    const { store, out } = stateWith([{ id: 'e', image: png([20, 140, 40]) }]);
    sb.script('upload', Array<ScriptStep>(TRIES).fill('502'));
    await run(new SqliteWorkStore(store), out, service(client));
    expect(store.getJob('e')).toMatchObject({ state: 'done', attempts: 1 });
    expect(JSON.parse(store.getJob('e')!.submitted_input!).image_urls[0]).toMatch(/^http/);
  });
});

describe('claims', () => {
  it('claims as many pending jobs as may be sent at once, at most 64, at least 1', async () => {
    for (const [concurrency, claimed] of [
      [3, 3],
      [100, 64],
    ] as const) {
      const { store, out } = stateWith([{ id: 'a' }]);
      const work = new Recording(store);
      await run(work, out, service(client), { concurrency });
      // Once more when the buffer ran dry (nothing left); no job graph: a job done asks for no new claim.
      expect(work.claims).toEqual([claimed, claimed]);
    }
  });

  it('a shared run\'s claim that left jobs over the budget warns once; the worker is held by the budget only when it got none', async () => {
    const { store, out } = stateWith([{ id: 'a' }, { id: 'b' }]);
    /** As a PostgreSQL claim answers under a run cap: b is never handed out, over the budget. */
    class OverBudget extends SqliteWorkStore {
      override async claimPending(n: number, opts?: { only?: ReadonlySet<string> | null }): Promise<Claim> {
        const c = await super.claimPending(n, opts);
        const jobs = c.jobs.filter((j) => j.id !== 'b');
        if (jobs.length < c.jobs.length) await super.release(['b']);
        return { jobs, overBudget: true };
      }
    }
    const events = await run(new OverBudget(store), out, service(client), { concurrency: 1 });
    expect(warnings(events)).toEqual(['pending jobs were left unclaimed: their estimated credits would go over the credit limit']);
    expect(['a', 'b'].map((id) => store.getJob(id)?.state)).toEqual(['done', 'pending']);
    expect(last.heldByBudget).toBe(true);
    const plain = stateWith([{ id: 'a' }]);
    await run(new SqliteWorkStore(plain.store), plain.out, service(client));
    expect(last.heldByBudget).toBe(false);
  });

  it('without a job graph, the next jobs are claimed while the last claimed ones are still being sent; each job sent once', async () => {
    const ids = ['a', 'b', 'c', 'd', 'e'];
    const { store, out } = stateWith(ids.map((id) => ({ id })));
    /** Claims and intents in the order the pipeline asked for them. */
    class Ordered extends SqliteWorkStore {
      log: string[] = [];
      override transition(id: string, from: JobState, to: JobState, patch?: JobPatch, o?: MoveOptions): Promise<Moved> {
        if (to === 'submitting') this.log.push(`intent ${id}`);
        return super.transition(id, from, to, patch, o);
      }
      override claimPending(n: number, opts?: { only?: ReadonlySet<string> | null }): Promise<Claim> {
        this.log.push(`claim ${n}`);
        return super.claimPending(n, opts);
      }
    }
    const work = new Ordered(store);
    const before = submitsAtService();
    await run(work, out, service(client), { concurrency: 2 });
    // The second claim is asked for once job a is handed out, before job b (the last of the first claim) is.
    expect(work.log.slice(0, 4)).toEqual(['claim 2', 'claim 2', 'intent a', 'intent b']);
    expect(ids.map((id) => store.getJob(id)?.state)).toEqual(ids.map(() => 'done'));
    expect(work.log.filter((l) => l.startsWith('intent')).sort()).toEqual(ids.map((id) => `intent ${id}`));
    expect(submitsAtService() - before).toBe(ids.length);
  });

  it('with --only, the store is not asked again once every chosen job was handed out', async () => {
    const { store, out } = stateWith([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
    const work = new Recording(store);
    await run(work, out, service(client), { selected: new Set(['b']), concurrency: 1 });
    expect(['a', 'b', 'c'].map((id) => store.getJob(id)?.state)).toEqual(['pending', 'done', 'pending']);
    expect(work.claims).toEqual([1]);
  });
});

describe('a run that ends or fails in odd places', () => {
  it('a run stopped before it claims anything is not reported held by the budget', async () => {
    const { store, out } = stateWith([{ id: 'a' }]);
    const stop = new AbortController();
    stop.abort();
    await run(new SqliteWorkStore(store), out, service(client), { signal: stop.signal });
    expect(last.heldByBudget).toBe(false);
    expect(store.getJob('a')?.state).toBe('pending');
  });

  it('an error the submit did not expect (the store failing) is a warning naming the job; the other jobs go on', async () => {
    const { store, out } = stateWith([{ id: 'x' }, { id: 'y' }]);
    class Failing extends SqliteWorkStore {
      override transition(id: string, from: JobState, to: JobState, patch?: JobPatch, o?: MoveOptions): Promise<Moved> {
        if (id === 'x' && to === 'submitting') return Promise.reject(new Error('the disk is full'));
        return super.transition(id, from, to, patch, o);
      }
    }
    const events = await run(new Failing(store), out, service(client));
    expect(warnings(events)).toEqual(['job x: the disk is full']);
    expect(store.getJob('x')).toMatchObject({ state: 'pending', attempts: 0 });
    expect(store.getJob('y')?.state).toBe('done');
  });

  it('a claimed job another process moved on before it was handed out is skipped: never sent, no error', async () => {
    // g waits for a, so the run works on a graph (where each job is read again before it is sent).
    const { store, out } = stateWith([{ id: 'a' }, { id: 'b' }, { id: 'g', needs: ['a'] }]);
    class Behind extends SqliteWorkStore {
      private once = false;
      override async claimPending(n: number, opts?: { only?: ReadonlySet<string> | null }): Promise<Claim> {
        const claim = await super.claimPending(n, opts);
        if (!this.once && claim.jobs.some((j) => j.id === 'b')) {
          this.once = true;
          await super.transition('b', 'pending', 'failed', { last_error: 'moved on elsewhere' });
        }
        return claim;
      }
    }
    const posted: unknown[] = [];
    const events = await run(new Behind(store), out, service(client, (b) => posted.push(b.input.prompt)), { concurrency: 2 });
    expect(posted).not.toContain('a lighthouse b');
    expect(store.getJob('b')).toMatchObject({ state: 'failed', attempts: 0, last_error: 'moved on elsewhere' });
    expect(warnings(events)).toEqual([]);
    expect(['a', 'g'].map((id) => store.getJob(id)?.state)).toEqual(['done', 'done']);
  });

  it('when a job becomes done, the jobs it made ready are sent before the later ones already claimed (manifest order)', async () => {
    // p is a chat job: its end (not a download's) frees the one place --max-active 1 leaves, so y1, claimed
    // with p, is still in hand when c becomes ready.
    const chatSpec = { model: 'vendora/chat-5', protocol: 'chat-completions', input: { stream: false, messages: [{ role: 'user', content: 'name a colour' }] } };
    const { store, out } = stateWith([{ id: 'p', kind: 'chat', estimate: null, spec: chatSpec }, { id: 'c', needs: ['p'] }, { id: 'y1' }, { id: 'y2' }]);
    const chat = new ChatClient({ baseUrl: sb.url, apiKey: KEY });
    cleanups.push(() => void chat.close());
    const posted: unknown[] = [];
    const svc = { ...service(client, (b) => posted.push(b.input.prompt)), chat: (req: Parameters<ChatClient['call']>[0], o: Parameters<ChatClient['call']>[1]) => chat.call(req, o) };
    await run(new SqliteWorkStore(store), out, svc, { concurrency: 2, maxActive: 1 });
    expect(posted).toEqual(['c', 'y1', 'y2'].map((id) => `a lighthouse ${id}`));
  });

  it('with --only, a chosen job queued again after a transient upload failure counts once: the other chosen jobs are still sent', async () => {
    const { store, out } = stateWith([{ id: 'a', image: png([10, 200, 30]) }, { id: 'b' }, { id: 'c' }]);
    sb.script('upload', Array<ScriptStep>(TRIES).fill('500'));
    await run(new SqliteWorkStore(store), out, service(client), { selected: new Set(['a', 'b']), concurrency: 1 });
    expect(['a', 'b', 'c'].map((id) => store.getJob(id)?.state)).toEqual(['done', 'done', 'pending']);
  });

  it('under a cap, a job that was never sent (its upload refused) gives its reservation back: the next job is sent', async () => {
    const { store, out } = stateWith([{ id: 'e', estimate: 3, image: 'data:text/plain;base64,aGVsbG8gd29ybGQ=' }, { id: 'b', estimate: 3 }]);
    const cap = new CreditCap({ credits: 5, name: '--max-credits 5', ledger: new LocalLedger(5, 0, null), balance: () => client.balance(), timeScale: SCALE, emit: () => undefined });
    // Bounded: without the reservation given back, b would wait for e's price, which never comes.
    await run(new SqliteWorkStore(store), out, service(client), { cap, signal: AbortSignal.timeout(15_000) });
    expect(store.getJob('e')).toMatchObject({ state: 'failed', attempts: 0 });
    expect(store.getJob('b')?.state).toBe('done');
  });
});

describe('a job graph', () => {
  /** a; b and bad take a's task id; t makes one job per file of a. */
  const graph = (childCredits = 1): Job[] => [
    { id: 'a' },
    { id: 'b', needs: ['a'], spec: { input: { prompt: '${{ jobs.a.task_id }}' } } },
    { id: 'bad', needs: ['a'], spec: { input: { prompt: '${{ jobs.a.nothing }}' } } },
    { id: 't', kind: 'fanout', needs: ['a'], estimate: 1, spec: { input: { prompt: 'file ${{ index }}' }, forEach: { expr: '${{ jobs.a.files }}', childKind: 'submit', childCredits } } },
  ];

  it('fills references from the parent\'s result just before the submit; a reference with no value fails its job, never sent', async () => {
    const { store, out } = stateWith(graph());
    const events = await run(new SqliteWorkStore(store), out, service(client));
    expect(warnings(events)).toEqual([]);
    const a = store.getJob('a')!;
    expect(a.state).toBe('done');
    expect(store.getJob('b')).toMatchObject({ state: 'done', attempts: 1 });
    // The filled input was checked again in full by the model's checks (which add its defaults).
    expect(JSON.parse(store.getJob('b')!.submitted_input!)).toEqual({ prompt: a.task_id, quality: 'low' });
    expect(store.getJob('bad')).toMatchObject({ state: 'failed', attempts: 0 });
    expect(store.getJob('bad')!.last_error).toMatch(/^reference: .*jobs\.a\.nothing/);
    // The for_each job made one job per file of a, said so, and became done without a task.
    const files = (JSON.parse(a.result!) as { files: unknown[] }).files.length;
    const kids = Array.from({ length: files }, (_, i) => `t.${i}`);
    expect(store.getJob('t')).toMatchObject({ state: 'done', task_id: null, attempts: 0 });
    expect(events).toContainEqual({ type: 'children', id: 't', ids: kids });
    expect(events).toContainEqual({ type: 'job', id: 't', from: 'pending', to: 'done', task_id: null, error: null });
    expect(kids.map((id) => store.getJob(id)?.state)).toEqual(kids.map(() => 'done'));
    expect(JSON.parse(store.getJob('t.0')!.submitted_input!)).toEqual({ prompt: 'file 0' });
  });

  it('a for_each job over something that is not a list fails, naming it', async () => {
    const { store, out } = stateWith([
      { id: 'a' },
      { id: 't', kind: 'fanout', needs: ['a'], estimate: 1, spec: { input: { prompt: 'x' }, forEach: { expr: '${{ jobs.a.task_id }}', childKind: 'submit', childCredits: 1 } } },
    ]);
    await run(new SqliteWorkStore(store), out, service(client));
    expect(store.getJob('t')).toMatchObject({ state: 'failed', last_error: 'for_each ${{ jobs.a.task_id }}: the result holds no list there' });
  });

  it('a chosen for_each job (--only) has its children sent in the same run; the jobs not chosen stay pending', async () => {
    const { store, out } = stateWith(graph());
    await run(new SqliteWorkStore(store), out, service(client), { selected: new Set(['a', 't']) });
    expect(['a', 'b', 'bad', 't', 't.0'].map((id) => store.getJob(id)?.state)).toEqual(['done', 'pending', 'pending', 'done', 'done']);
  });

  it('a for_each job whose children would go over the credit limit makes none and stays pending, said once', async () => {
    const { store, out } = stateWith(graph(100));
    const events = await run(new SqliteWorkStore(store), out, service(client), { creditLimit: { credits: 50, name: '--max-credits 50' } });
    expect(store.getJob('t')?.state).toBe('pending');
    expect(store.getJob('t.0')).toBeUndefined();
    expect(warnings(events)).toEqual([expect.stringMatching(/^t: its \d+ job\(s\) from \$\{\{ jobs\.a\.files \}\} .* over --max-credits 50/)]);
    expect(store.getJob('b')?.state).toBe('done');
  });
});

describe('chat jobs', () => {
  // At --concurrency 2 the store has no ready job left while the call is out (the waiting job is sent only
  // because the chat job's end makes the run look again); at 1 the next claim comes after the call anyway.
  it.each([1, 2])('a chat job is called, its answer written and done; a job waiting for its answer is sent in the same run (--concurrency %i)', async (concurrency) => {
    const chatSpec = { model: 'vendora/chat-5', protocol: 'chat-completions', input: { stream: false, messages: [{ role: 'user', content: 'name a colour' }] } };
    const { store, out } = stateWith([
      { id: 'c', kind: 'chat', estimate: null, spec: chatSpec },
      { id: 'd', needs: ['c'], spec: { input: { prompt: '${{ jobs.c.text }}' } } },
    ]);
    const chat = new ChatClient({ baseUrl: sb.url, apiKey: KEY });
    cleanups.push(() => void chat.close());
    const svc = { ...service(client), chat: (req: Parameters<ChatClient['call']>[0], o: Parameters<ChatClient['call']>[1]) => chat.call(req, o) };
    const events = await run(new SqliteWorkStore(store), out, svc, { concurrency });
    expect(last.submitsSent).toBe(2);
    const c = store.getJob('c')!;
    expect(c).toMatchObject({ state: 'done', attempts: 1 });
    expect(store.getJob('d')).toMatchObject({ state: 'done', attempts: 1 });
    expect(JSON.parse(store.getJob('d')!.submitted_input!).prompt).toBe((JSON.parse(c.result!) as { text: string }).text);
    expect(events.filter((e) => e.type === 'job' && e.id === 'c').map((e) => (e as { to: string }).to)).toContain('done');
  });
});
