import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceClient, UploadLimiter, withRetry } from '../src/client/index.js';
import { cleanupPartials, downloadFile, fsyncDir, isGone, sanitizeName } from '../src/download/index.js';
import type { DownloadPort, ServicePort } from '../src/engine/index.js';
import { Pipeline } from '../src/engine/pipeline.js';
import { prepare } from '../src/engine/prepare.js';
import { openManifest } from '../src/manifest/index.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate } from '../src/store/pg/schema.js';
import { syncOnce } from '../src/store/pg/sync-lock.js';
import { PgWorkStore } from '../src/store/pg/work-store.js';
import { ensureRun, WorkingCopy } from '../src/store/pg/working-copy.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { imageManifest } from './helpers/cli.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';
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

  it('two workers run one synced manifest together: every job done once, each task created once, every file on disk with the worker that wrote it', async () => {
    const manifest = imageManifest(join(tmp.dir, 'm.yaml'), 30);
    const outDir = join(tmp.dir, 'out');
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
    const workers = await Promise.all(
      ['w1', 'w2'].map(async (id) => {
        const pool = openPool(db.url, { max: 4 });
        pools.push(pool);
        const store = await PgWorkStore.open({ pool, runId, apiKey: KEY, worker: { id, hostname: 'host', pid: 1 }, uploads: { limit: 5, windowMs: 61_200 * SCALE }, statusRatePerSec: 10 / SCALE });
        const { service, download } = ports(sb.url);
        return new Pipeline(store, service, download, {
          outDir,
          concurrency: 4,
          maxActive: 500,
          timeScale: SCALE,
          signal: new AbortController().signal,
          emit: () => undefined,
          callbackUrlFor: null,
          baseUrl: sb.url,
          uploadMaxAgeMs: 1000,
          statusRate: 10 / SCALE,
        });
      }),
    );
    await Promise.all(workers.map((w) => w.run()));
    const states = await admin.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM jobs WHERE run_id = $1 GROUP BY state', [runId]);
    expect(states.rows).toEqual([{ state: 'done', n: 30 }]);
    expect(sb.stats().tasks_total).toBe(30);
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
});
