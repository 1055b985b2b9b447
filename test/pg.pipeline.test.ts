import { existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient, UploadLimiter, withRetry } from '../src/client/index.js';
import { cleanupPartials, downloadFile, fsyncDir, isGone, sanitizeName } from '../src/download/index.js';
import type { DownloadPort, EngineEvent, ServicePort } from '../src/engine/index.js';
import { Pipeline } from '../src/engine/pipeline/pipeline.js';
import { prepare } from '../src/engine/prepare/prepare.js';
import { openManifest } from '../src/manifest/index.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate } from '../src/store/pg/schema.js';
import { syncOnce } from '../src/store/pg/sync-lock.js';
import { PgWorkStore } from '../src/store/pg/work-store.js';
import { ensureRun, WorkingCopy } from '../src/store/pg/working-copy.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { imageManifest } from './helpers/cli.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';
import { solidPng } from './helpers/png.js';
import { tempDir } from './helpers/tmp.js';

const KEY = 'sk-pg-pipeline-key';
const SCALE = 0.005;

/** The service and download ports as `genbatch run` builds them (src/api/run.ts), for one worker. */
function ports(baseUrl: string): { service: ServicePort; download: DownloadPort } {
  const client = new ServiceClient({
    baseUrl,
    apiKey: KEY,
    policy: { baseMs: 1000 * SCALE, maxMs: 60_000 * SCALE, maxAttempts: 10, jitter: 'full' },
    uploadLimiter: new UploadLimiter({ limit: 5, windowMs: 61_200 * SCALE + 20 }),
    statusRatePerSec: 10 / SCALE,
  });
  const service: ServicePort = {
    chat: () => Promise.reject(new Error('no chat in this test')),
    submit: (body, signal) => client.submit(body, signal ? { signal, keepIfSent: true } : {}),
    status: (taskId, signal) => client.status(taskId, signal ? { signal } : {}),
    musicDetail: (taskId, signal) => client.musicDetail(taskId, signal ? { signal } : {}),
    balance: () => client.balance(),
    uploadStream: (file, opts) => client.uploadStream(file, { fileName: opts.fileName, ...(opts.signal ? { signal: opts.signal } : {}) }),
    uploadBase64: (data, opts) => client.uploadBase64(data, opts.signal ? { signal: opts.signal } : {}),
    uploadUrl: (url, opts) => client.uploadUrl(url, opts.signal ? { signal: opts.signal } : {}),
  };
  const download: DownloadPort = {
    downloadFile: (d) => withRetry(() => downloadFile(d), { policy: client.policy, method: 'GET', ...(d.signal ? { signal: d.signal } : {}) }),
    isGone,
    cleanupPartials: (dir) => cleanupPartials(dir),
    syncDir: (dir) => fsyncDir(dir),
    sanitizeName: (name) => sanitizeName(name, 'job'),
  };
  return { service, download };
}

describe('the pipeline on a PostgreSQL state', () => {
  let sb: Sandbox;
  let db: TestDatabase;
  let admin: Pool;
  const pools: Pool[] = [];
  const tmp = tempDir('genbatch-pg-pipeline-');
  beforeAll(async () => {
    sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: SCALE, seed: 11 });
    db = await testDatabase();
    admin = openPool(db.url);
    await migrate(admin);
  });
  afterAll(async () => {
    for (const p of [admin, ...pools]) await p.end();
    await db?.drop();
    await sb?.close();
    tmp.cleanup();
  });

  /** The manifest synced into the database as `genbatch run` would (prepare on a working copy), once. */
  async function synced(name: string, n: number): Promise<{ runId: number; outDir: string }> {
    return syncedFile(name, imageManifest(join(tmp.dir, `${name}.yaml`), n, name));
  }

  async function syncedFile(name: string, manifest: string): Promise<{ runId: number; outDir: string }> {
    const outDir = join(tmp.dir, `out-${name}`);
    const runId = await ensureRun(admin, manifest, outDir);
    await syncOnce(admin, runId, 'k1', async (c) => {
      const copy = await WorkingCopy.load(c, runId);
      try {
        copy.store.openRun(manifest, outDir, sb.url, true, false);
        await prepare(copy.store, await openManifest(manifest), null, () => undefined);
        await copy.writeBack(c);
      } finally {
        copy.close();
      }
    });
    return { runId, outDir };
  }

  async function worker(runId: number, outDir: string, id: string, o: { leaseMs?: number; signal?: AbortSignal; emit?: (e: EngineEvent) => void; keepWaiting?: () => Promise<boolean> } = {}) {
    const pool = openPool(db.url, { max: 4 });
    pools.push(pool);
    const store = await PgWorkStore.open({
      pool,
      runId,
      apiKey: KEY,
      worker: { id, hostname: 'host', pid: 1 },
      uploads: { limit: 5, windowMs: 61_200 * SCALE },
      statusRatePerSec: 10 / SCALE,
      leaseMs: o.leaseMs ?? 30_000,
      takeOverMs: 100,
    });
    const { service, download } = ports(sb.url);
    const pipeline = new Pipeline(store, service, download, {
      outDir,
      concurrency: 4,
      maxActive: 500,
      timeScale: SCALE,
      signal: o.signal ?? new AbortController().signal,
      emit: o.emit ?? (() => undefined),
      callbackUrlFor: null,
      baseUrl: sb.url,
      uploadMaxAgeMs: 1000,
      statusRate: 10 / SCALE,
      ...(o.keepWaiting ? { keepWaiting: o.keepWaiting, idleMs: 50 } : {}),
    });
    return { store, pipeline };
  }

  /**
   * A worker waiting for the run to empty (as `genbatch work --until-empty`), run until it ends. One that has not
   * ended after `ms` is stopped and the test fails with its last events and the run's jobs, instead of a bare timeout.
   */
  async function untilEmpty(runId: number, outDir: string, id: string, ms = 40_000) {
    const events: EngineEvent[] = [];
    const stop = new AbortController();
    const w = await worker(runId, outDir, id, {
      signal: stop.signal,
      emit: (e) => events.push(e),
      keepWaiting: async () => {
        const left = await w.store.workLeft([...w.pipeline.givenUp]);
        return left.pending + left.inFlight > 0;
      },
    });
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<boolean>((r) => (timer = setTimeout(() => r(true), ms)));
    const running = w.pipeline.run();
    const late = await Promise.race([running.then(() => false), hung]);
    clearTimeout(timer);
    if (late) {
      stop.abort();
      await running.catch(() => undefined);
      const jobs = await admin.query('SELECT id, state, attempts, lease_owner, last_error FROM jobs WHERE run_id = $1', [runId]);
      throw new Error(`worker ${id} still running after ${ms} ms; jobs ${JSON.stringify(jobs.rows)}; its last events ${JSON.stringify(events.slice(-25))}`);
    }
    return w;
  }

  it('two workers run one synced manifest together: every job done once, each task created once, every file on disk with the worker that wrote it', async () => {
    const { runId, outDir } = await synced('two', 30);
    const tasksBefore = sb.stats().tasks_total;
    const workers = await Promise.all(['w1', 'w2'].map((id) => worker(runId, outDir, id)));
    await Promise.all(workers.map((w) => w.pipeline.run()));
    const states = await admin.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM jobs WHERE run_id = $1 GROUP BY state', [runId]);
    expect(states.rows).toEqual([{ state: 'done', n: 30 }]);
    expect(sb.stats().tasks_total - tasksBefore).toBe(30);
    const files = await admin.query<{ job_id: string; path: string; size: number; worker: string }>(`SELECT job_id, path, size, worker FROM files WHERE run_id = $1 AND state = 'done'`, [runId]);
    expect(files.rows.length).toBeGreaterThanOrEqual(30);
    for (const f of files.rows) {
      expect(['w1', 'w2']).toContain(f.worker);
      const p = join(outDir, f.path);
      expect(existsSync(p)).toBe(true);
      expect(statSync(p).size).toBe(f.size);
    }
    const leased = await admin.query('SELECT count(*)::int AS n FROM jobs WHERE run_id = $1 AND lease_owner IS NOT NULL', [runId]);
    expect(leased.rows[0]).toEqual({ n: 0 });
  });

  it('a completion callback reaching another worker adopts the job from its live holder: read and downloaded there, the task created once, the holder refused', async () => {
    const { runId, outDir } = await synced('adopt', 1);
    const tasksBefore = sb.stats().tasks_total;
    // The holder sent the job and waits on its task, its lease live (no pipeline of its own runs here).
    const holder = await worker(runId, outDir, 'holder');
    const job = (await holder.store.claimPending(1)).jobs[0]!;
    await holder.store.transition(job.id, 'pending', 'submitting', { attemptsInc: 1 }, { durable: true });
    const spec = JSON.parse(job.spec) as { model: string; input: Record<string, unknown> };
    const { task_id } = await ports(sb.url).service.submit({ model: spec.model, input: spec.input });
    await holder.store.transition(job.id, 'submitting', 'submitted', { task_id }, { durable: true });
    // The task's callback reaches the other worker's receiver (one public URL in front of both).
    const other = await worker(runId, outDir, 'other');
    const running = other.pipeline.run();
    other.pipeline.onCallback({ job: job.id, attempt: 1, taskId: task_id, status: 'finished' });
    await running;
    const row = await admin.query<{ state: string; lease_owner: string | null }>('SELECT state, lease_owner FROM jobs WHERE run_id = $1 AND id = $2', [runId, job.id]);
    expect(row.rows).toEqual([{ state: 'done', lease_owner: null }]);
    expect(sb.stats().tasks_total - tasksBefore).toBe(1);
    const files = await admin.query<{ worker: string }>(`SELECT DISTINCT worker FROM files WHERE run_id = $1 AND job_id = $2`, [runId, job.id]);
    expect(files.rows).toEqual([{ worker: 'other' }]);
    expect(await holder.store.transition(job.id, 'submitted', 'downloading', { result: '{}' })).toEqual({ moved: false });
  });

  it('a worker that stops with tasks at the service leaves them to another, which polls and downloads them once its lease expires', async () => {
    const { runId, outDir } = await synced('handover', 20);
    const tasksBefore = sb.stats().tasks_total;
    // w1 stops (as on SIGTERM) once it has some tasks at the service; its leases are left to expire.
    const stop = new AbortController();
    let sent = 0;
    const w1 = await worker(runId, outDir, 'first', {
      leaseMs: 400,
      signal: stop.signal,
      emit: (e) => {
        if (e.type === 'job' && e.to === 'submitted' && ++sent === 3) stop.abort('SIGTERM');
      },
    });
    await w1.pipeline.run();
    const left = await admin.query<{ id: string }>(`SELECT id FROM jobs WHERE run_id = $1 AND state IN ('submitted', 'downloading') ORDER BY seq`, [runId]);
    expect(left.rows.length).toBeGreaterThan(0);
    const w2 = await worker(runId, outDir, 'second', {
      keepWaiting: async () => {
        const w = await w2.store.workLeft();
        return w.pending + w.inFlight > 0;
      },
    });
    await w2.pipeline.run();
    const states = await admin.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM jobs WHERE run_id = $1 GROUP BY state ORDER BY state', [runId]);
    expect(states.rows).toEqual([{ state: 'done', n: 20 }]);
    // Each task created once: the ones first had sent were taken over, not sent again.
    expect(sb.stats().tasks_total - tasksBefore).toBe(20);
    const byWorker = await admin.query<{ worker: string }>(`SELECT DISTINCT worker FROM files WHERE run_id = $1 AND job_id = ANY($2::text[])`, [runId, left.rows.map((r) => r.id)]);
    expect(byWorker.rows).toEqual([{ worker: 'second' }]);
  });
  it('a job whose downloads keep failing is given up: the worker ends instead of waiting for it, its lease ends, another worker may take it over', async () => {
    const { runId, outDir } = await synced('giveup', 1);
    // Every download of the file fails (a 5xx, more times than the client's retries and the run's rounds of them).
    sb.script('file', Array.from({ length: 200 }, () => '500' as const));
    const w1 = await untilEmpty(runId, outDir, 'gives-up');
    const row = await admin.query<{ id: string; state: string; lease_owner: string | null }>('SELECT id, state, lease_owner FROM jobs WHERE run_id = $1', [runId]);
    expect(row.rows).toEqual([{ id: expect.stringMatching(/^giveup-/), state: 'downloading', lease_owner: null }]);
    expect([...w1.pipeline.givenUp]).toEqual([row.rows[0]!.id]);
    // This worker's takeOver skips what it gave up on; another worker's takes it.
    expect((await w1.store.takeOver([...w1.pipeline.givenUp])).downloading).toEqual([]);
    const w2 = await worker(runId, outDir, 'takes-it');
    expect((await w2.store.takeOver()).downloading.map((j) => j.id)).toEqual([row.rows[0]!.id]);
  }, 60_000);
  it('a job whose uploads keep failing is given up: left pending with its lease dropped, the worker ends, it claims the job no more and another worker may', async () => {
    writeFileSync(join(tmp.dir, 'upfail-ref.png'), solidPng(8, 8, [10, 200, 30]));
    const manifest = join(tmp.dir, 'upfail.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: up\n    model: alpha-image-2-edit\n    input:\n      prompt: "make it a sunset"\n      image_urls: ["upfail-ref.png"]\n');
    const { runId, outDir } = await syncedFile('upfail', manifest);
    const uploads = sb.stats().requests.upload ?? 0;
    // Every upload fails: a 5xx for each of the client's 10 tries in each of the run's rounds (the first and 3 more).
    sb.script('upload', Array.from({ length: 40 }, () => '500' as const));
    const w1 = await untilEmpty(runId, outDir, 'uploads-fail');
    expect((sb.stats().requests.upload ?? 0) - uploads).toBe(40);
    const row = await admin.query('SELECT id, state, attempts, lease_owner, last_error FROM jobs WHERE run_id = $1', [runId]);
    expect(row.rows).toEqual([{ id: 'up', state: 'pending', attempts: 0, lease_owner: null, last_error: expect.stringMatching(/^upload failed: HTTP 500/) }]);
    expect([...w1.pipeline.givenUp]).toEqual(['up']);
    expect((await w1.store.claimPending(1, { skip: w1.pipeline.givenUp })).jobs).toEqual([]);
    const w2 = await worker(runId, outDir, 'claims-it');
    expect((await w2.store.claimPending(1)).jobs.map((j) => j.id)).toEqual(['up']);
  }, 60_000);
});
