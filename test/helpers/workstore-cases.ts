import { afterEach, expect, it } from 'vitest';
import { TransitionError } from '../../src/errors.js';
import { JOB_STATES, type JobRow, type JobState, type NewFile, type WorkStore } from '../../src/store/index.js';

/**
 * The behaviour every WorkStore backend guarantees (src/store/port.ts), as one list of cases:
 * test/workstore.behaviour.test.ts runs it against each backend with describe.each.
 * A backend gives `make(seed)`: a fresh run holding the seeded jobs, in manifest order, and a
 * WorkStore of one worker over it.
 */

/** A job of the seeded run. Graph parents must come earlier in the list. */
export interface SeedJob {
  id: string;
  /** 'submit' (default), 'fanout' (a for_each job) or 'chat'. */
  kind?: string;
  parents?: string[];
  /** Default 1. */
  estimatedCredits?: number | null;
  /** Default 'pending'. 'submitted' and 'downloading' jobs have the task id `task-<id>`; 'downloading' ones the files of `files`. */
  state?: Extract<JobState, 'pending' | 'submitted' | 'downloading' | 'done' | 'failed'>;
  files?: NewFile[];
}

export interface WorkStoreBackend {
  store: WorkStore;
  /** The job as another connection to the same state sees it (not through `store`). */
  readElsewhere(id: string): Promise<JobRow | undefined>;
  /** Put a job in a state with plain SQL, past the transition function (to test that function from every state). */
  force(id: string, state: JobState): Promise<void>;
  close(): Promise<void>;
}

export type MakeWorkStore = (seed: { jobs: SeedJob[] }) => Promise<WorkStoreBackend>;

const ids = (rows: readonly { id: string }[]) => rows.map((r) => r.id);
const file = (idx: number, name: string): NewFile => ({ idx, name, url: `http://files.test/${name}`, type: 'image', content_type: 'image/png', expected_size: 3, expires_at: null });
const got = (idx: number, name: string) => ({ idx, path: `job/${name}`, size: 3, sha256: 'ab'.repeat(32), content_type: 'image/png' });

/** Move a claimed pending job to done through the store, as the pipeline does (submit, task id, results, files). */
async function finish(s: WorkStore, id: string): Promise<void> {
  await s.transition(id, 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
  await s.transition(id, 'submitting', 'submitted', { task_id: `task-${id}` }, { durable: true });
  await s.transition(id, 'submitted', 'downloading', { result: '{}' });
  await s.transition(id, 'downloading', 'done');
}

/**
 * The allowed state changes, written out here on purpose instead of read from src/store/states.ts: this list is
 * the specification the store's table is checked against. Every pair not listed must be refused. A new pair
 * (say submitted -> submitting, which could send a task twice) fails the case below until added here too.
 */
const ALLOWED: Record<JobState, JobState[]> = {
  pending: ['submitting', 'skipped', 'failed', 'done'],
  submitting: ['submitted', 'failed', 'uncertain', 'pending', 'done', 'exists'],
  submitted: ['downloading', 'failed', 'expired', 'pending', 'uncertain'],
  downloading: ['done', 'expired', 'failed', 'pending'],
  done: ['pending', 'skipped'],
  failed: ['pending', 'skipped'],
  expired: ['pending', 'skipped'],
  skipped: ['pending'],
  exists: ['pending', 'skipped'],
  uncertain: ['pending', 'submitted'],
};

export function workStoreBehaviour(make: MakeWorkStore): void {
  const open: WorkStoreBackend[] = [];
  const fresh = async (jobs: SeedJob[]): Promise<WorkStoreBackend> => {
    const b = await make({ jobs });
    open.push(b);
    return b;
  };
  afterEach(async () => {
    while (open.length) await open.pop()!.close();
  });

  it('claims ready pending jobs in manifest order, at most n at a time, each once', async () => {
    const { store } = await fresh([{ id: 'a' }, { id: 'b', parents: ['a'] }, { id: 'c' }, { id: 'd' }, { id: 'e', state: 'done' }]);
    expect(ids((await store.claimPending(2)).jobs)).toEqual(['a', 'c']);
    expect(ids((await store.claimPending(10)).jobs)).toEqual(['d']);
    expect((await store.claimPending(10)).jobs).toEqual([]);
  });

  it('a job becomes claimable when its last parent is done', async () => {
    const { store } = await fresh([{ id: 'a' }, { id: 'p' }, { id: 'b', parents: ['a', 'p'] }, { id: 'c' }]);
    expect(ids((await store.claimPending(10)).jobs)).toEqual(['a', 'p', 'c']);
    await finish(store, 'a');
    expect((await store.claimPending(10)).jobs).toEqual([]);
    await finish(store, 'p');
    const next = (await store.claimPending(10)).jobs;
    expect(ids(next)).toEqual(['b']);
    expect(next[0]).toMatchObject({ id: 'b', state: 'pending', kind: 'submit', estimated_credits: 1 });
  });

  it('claims only the jobs named by `only`', async () => {
    const { store } = await fresh([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
    expect(ids((await store.claimPending(10, { only: new Set(['b', 'c']) })).jobs)).toEqual(['b', 'c']);
  });

  it('never claims the jobs named by `skip` (those this worker gave up on), with or without `only`', async () => {
    const jobs = [{ id: 'a' }, { id: 'b' }, { id: 'c' }, { id: 'd' }];
    const one = (await fresh(jobs)).store;
    expect(ids((await one.claimPending(10, { skip: new Set(['a', 'c']) })).jobs)).toEqual(['b', 'd']);
    const two = (await fresh(jobs)).store;
    expect(ids((await two.claimPending(10, { only: new Set(['a', 'b']), skip: new Set(['a']) })).jobs)).toEqual(['b']);
  });

  it('a released job can be claimed again', async () => {
    const { store } = await fresh([{ id: 'a' }, { id: 'b' }]);
    expect(ids((await store.claimPending(10)).jobs)).toEqual(['a', 'b']);
    await store.release(['a']);
    expect((await store.getJob('a'))?.state).toBe('pending');
    const again = await store.claimPending(10);
    expect(ids(again.jobs)).toEqual(['a']);
    expect(again.overBudget).toBe(false);
  });

  it('a job that went back to pending (nothing created) is claimed again, at the latest with jobs its parent made ready', async () => {
    const { store } = await fresh([{ id: 'a' }, { id: 'b', parents: ['a'] }, { id: 'c' }]);
    await store.claimPending(10);
    await store.transition('c', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await store.transition('c', 'submitting', 'pending', { last_error: '503' });
    await finish(store, 'a');
    expect(ids((await store.claimPending(10)).jobs)).toEqual(['b', 'c']);
  });

  it('the transition table: every (from, to) pair of the 10 states is allowed or refused exactly as specified (a task is never sent twice through a state change the table should refuse)', async () => {
    const pairs = JOB_STATES.flatMap((from) => JOB_STATES.map((to) => ({ from, to, id: `${from}-${to}` })));
    const b = await fresh(pairs.map((p) => ({ id: p.id })));
    expect((await b.store.claimPending(pairs.length)).jobs).toHaveLength(pairs.length);
    for (const p of pairs) await b.force(p.id, p.from);
    const wrong: string[] = [];
    for (const { from, to, id } of pairs) {
      const allowed = ALLOWED[from].includes(to);
      const patch = to === 'submitted' ? { task_id: `task-${id}` } : to === 'downloading' ? { result: '{}' } : {};
      let outcome: 'moved' | 'refused' | 'not moved';
      try {
        outcome = (await b.store.transition(id, from, to, patch)).moved ? 'moved' : 'not moved';
      } catch (err) {
        if (!(err instanceof TransitionError)) throw err;
        outcome = 'refused';
      }
      const state = (await b.readElsewhere(id))?.state;
      if (allowed && (outcome !== 'moved' || state !== to)) wrong.push(`${from} -> ${to} should move: ${outcome}, now ${state}`);
      if (!allowed && (outcome !== 'refused' || state !== from)) wrong.push(`${from} -> ${to} should be refused: ${outcome}, now ${state}`);
    }
    expect(wrong).toEqual([]);
  });

  it.each([
    ['failed', 'submitting'],
    ['expired', 'submitted'],
    ['uncertain', 'submitting'],
    ['skipped', 'pending'],
    ['exists', 'submitting'],
  ] as const)('a parent that ends %s skips its pending child, naming why; a done parent makes it ready', async (end, before) => {
    const b = await fresh([{ id: 'a' }, { id: 'b', parents: ['a'] }, { id: 'ok' }, { id: 'c', parents: ['ok'] }]);
    await b.store.claimPending(10);
    await b.force('a', before);
    const r = await b.store.transition('a', before, end, end === 'failed' ? { last_error: 'refused' } : {});
    expect(r.moved && r.side.map((m) => [m.id, m.to])).toEqual([['b', 'skipped']]);
    expect((await b.readElsewhere('b'))?.state).toBe('skipped');
    await finish(b.store, 'ok');
    expect(ids((await b.store.claimPending(10)).jobs)).toEqual(['c']);
  });

  it('jobOfTask names the other job that records a task (a callback never adopts it for another job)', async () => {
    const { store } = await fresh([{ id: 'a', state: 'submitted' }, { id: 'b' }]);
    expect(await store.jobOfTask('task-a', 'b')).toBe('a');
    expect(await store.jobOfTask('task-a', 'a')).toBeNull();
    expect(await store.jobOfTask('task-zz', 'b')).toBeNull();
  });

  it('refuses a transition from a state the job is not in, and one that is not allowed, changing nothing', async () => {
    const { store } = await fresh([{ id: 'a' }]);
    await store.claimPending(10);
    await expect(store.transition('a', 'submitting', 'submitted', { task_id: 't' })).rejects.toBeInstanceOf(TransitionError);
    await expect(store.transition('a', 'pending', 'downloading')).rejects.toBeInstanceOf(TransitionError);
    expect(await store.getJob('a')).toMatchObject({ state: 'pending', task_id: null, attempts: 0 });
    await expect(store.transition('nope', 'pending', 'submitting')).rejects.toBeInstanceOf(TransitionError);
  });

  it('a transition sets its patch and answers the jobs the graph skipped because of it', async () => {
    const { store } = await fresh([{ id: 'a' }, { id: 'b', parents: ['a'] }, { id: 'c', parents: ['b'] }, { id: 'x' }]);
    await store.claimPending(10);
    await store.transition('a', 'pending', 'submitting', { attemptsInc: 1, submitted_input: '{"p":1}' }, { durable: true });
    const r = await store.transition('a', 'submitting', 'failed', { last_error: 'refused: 400' });
    expect(r.moved).toBe(true);
    const side = r.moved ? r.side : [];
    expect(side.map((m) => [m.id, m.from, m.to])).toEqual([
      ['b', 'pending', 'skipped'],
      ['c', 'pending', 'skipped'],
    ]);
    expect(side[0]!.error).toContain('a is failed');
    expect(await store.getJob('a')).toMatchObject({ state: 'failed', attempts: 1, submitted_input: '{"p":1}', last_error: 'refused: 400' });
    expect((await store.getJob('x'))?.state).toBe('pending');
  });

  it('a move into failed records permanent (1 only when the patch says so); a move into uncertain records when', async () => {
    const b = await fresh([{ id: 'p' }, { id: 'f' }, { id: 'u' }]);
    const { store } = b;
    await store.claimPending(10);
    for (const id of ['p', 'f', 'u']) await store.transition(id, 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    await store.transition('p', 'submitting', 'failed', { last_error: 'HTTP 400 content_moderation_error: flagged', permanent: 1 });
    await store.transition('f', 'submitting', 'failed', { last_error: 'HTTP 400: no' });
    const before = new Date(Date.now() - 60_000).toISOString();
    await store.transition('u', 'submitting', 'uncertain', { last_error: 'the answer was lost' });
    expect(await b.readElsewhere('p')).toMatchObject({ state: 'failed', permanent: 1 });
    expect(await b.readElsewhere('f')).toMatchObject({ state: 'failed', permanent: 0 });
    const u = await b.readElsewhere('u');
    expect(u?.state).toBe('uncertain');
    expect(u!.uncertain_at! >= before && u!.uncertain_at! <= new Date(Date.now() + 60_000).toISOString()).toBe(true);
    expect((await b.readElsewhere('p'))?.uncertain_at).toBeNull();
  });

  it('the intent is committed when its durable transition resolves: another connection sees it', async () => {
    const b = await fresh([{ id: 'a' }]);
    await b.store.claimPending(1);
    const r = await b.store.transition('a', 'pending', 'submitting', { attemptsInc: 1, submitted_at: '2026-01-01T00:00:00.000Z' }, { durable: true });
    expect(r).toEqual({ moved: true, side: [] });
    expect(await b.readElsewhere('a')).toMatchObject({ state: 'submitting', attempts: 1, submitted_at: '2026-01-01T00:00:00.000Z' });
  });

  it('moves asked for at once: each one that is allowed is made and committed when it resolves; one refused changes none of the others', async () => {
    const b = await fresh([{ id: 'a' }, { id: 'b' }, { id: 'c' }, { id: 'd' }, { id: 'e' }]);
    await b.store.claimPending(10);
    await b.store.transition('e', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    const asked = await Promise.allSettled([
      b.store.transition('a', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true }),
      b.store.transition('b', 'pending', 'failed', { last_error: 'bad input' }),
      // Refused: c is pending, not submitting.
      b.store.transition('c', 'submitting', 'submitted', { task_id: 'task-c' }, { durable: true }),
      b.store.transition('d', 'pending', 'submitting', { attemptsInc: 1 }, { durable: true }),
      b.store.transition('e', 'submitting', 'submitted', { task_id: 'task-e' }, { durable: true }),
    ]);
    expect(asked.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    expect((asked[2] as PromiseRejectedResult).reason).toBeInstanceOf(TransitionError);
    expect(await b.readElsewhere('a')).toMatchObject({ state: 'submitting', attempts: 1 });
    expect(await b.readElsewhere('b')).toMatchObject({ state: 'failed', last_error: 'bad input' });
    expect(await b.readElsewhere('c')).toMatchObject({ state: 'pending', task_id: null, attempts: 0 });
    expect(await b.readElsewhere('d')).toMatchObject({ state: 'submitting', attempts: 1 });
    expect(await b.readElsewhere('e')).toMatchObject({ state: 'submitted', task_id: 'task-e' });
  });

  it('takeOver hands over the jobs whose task is at the service, submitted and downloading, once', async () => {
    const { store } = await fresh([
      { id: 'p' },
      { id: 's1', state: 'submitted' },
      { id: 'd1', state: 'downloading', files: [file(0, 'x.png')] },
      { id: 's2', state: 'submitted' },
      { id: 'f', state: 'done' },
    ]);
    const t = await store.takeOver();
    expect(ids(t.submitted)).toEqual(['s1', 's2']);
    expect(t.submitted[0]).toMatchObject({ state: 'submitted', task_id: 'task-s1' });
    expect(ids(t.downloading)).toEqual(['d1']);
    expect(t.moves).toEqual([]);
    const again = await store.takeOver();
    expect([...again.submitted, ...again.downloading]).toEqual([]);
    // Taken-over jobs move on under this worker.
    expect(await store.transition('s1', 'submitted', 'downloading', { result: '{}' })).toEqual({ moved: true, side: [] });
    expect(await store.transition('d1', 'downloading', 'done', {}, { filesDone: [got(0, 'x.png')] })).toEqual({ moved: true, side: [] });
  });

  it('file rows: added with a state change, recorded midway, done with the last state change', async () => {
    const { store } = await fresh([{ id: 'a', state: 'submitted' }, { id: 'b' }]);
    await store.takeOver();
    await store.transition('a', 'submitted', 'downloading', { result: '{}', expires_at: 1_900_000_000_000 }, { addFiles: [file(0, 'one.png'), file(1, 'two.png')] });
    expect((await store.filesOf('a')).map((f) => [f.idx, f.name, f.state, f.path])).toEqual([
      [0, 'one.png', 'pending', null],
      [1, 'two.png', 'pending', null],
    ]);
    expect(await store.recordFiles('a', [got(0, 'one.png')])).toBe(true);
    expect((await store.filesOf('a')).map((f) => [f.idx, f.state, f.path, f.size])).toEqual([
      [0, 'done', 'job/one.png', 3],
      [1, 'pending', null, null],
    ]);
    expect((await store.getJob('a'))?.state).toBe('downloading');
    // Read together, the job and its rows are exactly what getJob and filesOf give (numbers as numbers).
    const read = await store.jobsWithFiles(['nope', 'a', 'b', 'a']);
    expect([...read.keys()].sort()).toEqual(['a', 'b']);
    expect(read.get('a')).toEqual({ job: await store.getJob('a'), files: await store.filesOf('a') });
    expect(read.get('b')).toEqual({ job: await store.getJob('b'), files: [] });
    expect(read.get('a')!.files[1]).toMatchObject({ expected_size: 3, size: null, expires_at: null, content_type: 'image/png' });
    expect((await store.jobsWithFiles([])).size).toBe(0);
    await store.transition('a', 'downloading', 'done', {}, { filesDone: [got(1, 'two.png')] });
    const files = await store.filesOf('a');
    expect(files.map((f) => [f.idx, f.state, f.sha256])).toEqual([
      [0, 'done', 'ab'.repeat(32)],
      [1, 'done', 'ab'.repeat(32)],
    ]);
  });

  it('noteError keeps the state and sets the last error', async () => {
    const { store } = await fresh([{ id: 'a' }]);
    await store.claimPending(1);
    await store.noteError('a', 'upload failed: 503');
    expect(await store.getJob('a')).toMatchObject({ state: 'pending', last_error: 'upload failed: 503' });
  });

  it('uploads: recorded, reused for the same content and service while young enough', async () => {
    const { store } = await fresh([{ id: 'a' }]);
    expect(await store.findUpload('http://svc', 'sha-1', 60_000)).toBeNull();
    await store.recordUpload('http://svc', 'sha-1', 'http://svc/temp/1.png');
    expect(await store.findUpload('http://svc', 'sha-1', 60_000)).toBe('http://svc/temp/1.png');
    expect(await store.findUpload('http://other', 'sha-1', 60_000)).toBeNull();
    expect(await store.findUpload('http://svc', 'sha-2', 60_000)).toBeNull();
    expect(await store.findUpload('http://svc', 'sha-1', -1)).toBeNull();
    await store.recordUpload('http://svc', 'sha-1', 'http://svc/temp/2.png');
    expect(await store.findUpload('http://svc', 'sha-1', 60_000)).toBe('http://svc/temp/2.png');
  });

  it('meta: a named value set, read, replaced and removed', async () => {
    const { store } = await fresh([{ id: 'a' }]);
    expect(await store.getMeta('note:a')).toBeNull();
    await store.setMeta('note:a', '{"size":3}');
    expect(await store.getMeta('note:a')).toBe('{"size":3}');
    await store.setMeta('note:a', '{"size":4}');
    expect(await store.getMeta('note:a')).toBe('{"size":4}');
    await store.setMeta('note:a', null);
    expect(await store.getMeta('note:a')).toBeNull();
  });

  it('for_each: the children are made pending and claimable, the template done, the parents known', async () => {
    const { store } = await fresh([{ id: 'a', state: 'done' }, { id: 't', kind: 'fanout', parents: ['a'], estimatedCredits: 4 }, { id: 'z' }]);
    expect(await store.parentsOf('t')).toEqual(['a']);
    expect(await store.estimate()).toEqual({ known: 6, unknown: 0 });
    expect(ids((await store.claimPending(10)).jobs)).toEqual(['t', 'z']);
    const child = (i: number) => ({ id: `t.${i}`, model: 'm', kind: 'submit', where: `m.yaml:t, item ${i}`, specHash: `h${i}`, spec: '{}', estimatedCredits: 2, parents: ['a'] });
    expect(await store.expand('t', [child(0), child(1)], '2 job(s) from jobs.a.list')).toEqual(['t.0', 't.1']);
    expect((await store.getJob('t'))?.state).toBe('done');
    expect(await store.parentsOf('t.1')).toEqual(['a']);
    expect(ids((await store.claimPending(10)).jobs)).toEqual(['t.0', 't.1']);
    // The template's own estimate is replaced by its children's.
    expect(await store.estimate()).toEqual({ known: 6, unknown: 0 });
  });

  it('upload slots and status-read permits are given, and refused once the signal is aborted', async () => {
    const { store } = await fresh([{ id: 'a' }]);
    const release = await store.acquireUploadSlot(new AbortController().signal);
    await release({ rateLimited: false, retryAfterMs: null });
    await store.acquireStatusRead();
    const stop = new AbortController();
    stop.abort(new Error('stopped'));
    await expect(store.acquireUploadSlot(stop.signal)).rejects.toThrow('stopped');
    await expect(store.acquireStatusRead(stop.signal)).rejects.toThrow('stopped');
  });

  it('knows an unknown job as undefined, and whether the run has a job graph', async () => {
    const flat = await fresh([{ id: 'a' }]);
    expect(await flat.store.getJob('nope')).toBeUndefined();
    expect(await flat.store.hasGraph()).toBe(false);
    const linked = await fresh([{ id: 'a' }, { id: 'b', parents: ['a'] }]);
    expect(await linked.store.hasGraph()).toBe(true);
    expect(linked.store.leaseLost).toBe(false);
  });
}
