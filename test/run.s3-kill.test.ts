import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { startProxy } from './helpers/proxy.js';
import { startS3, type TestS3 } from './helpers/s3.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * Large results (the sandbox serves every video as VIDEO_BYTES bytes: three multipart parts of 8 MiB) into
 * s3rver: a run killed (SIGKILL) while multipart uploads are in flight, then run again, leaves each result
 * once under its own key, whole, with its sha256, no temporary object and no multipart upload left; a
 * connection to the bucket cut in the middle of an upload is retried and the object is correct.
 */

const VIDEO_BYTES = 20 * 1024 * 1024 + 12_345;
const KEY = 'sk-s3-kill-0001';
let s3: TestS3;
let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  s3 = await startS3();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.005, seed: 5, videoBytes: VIDEO_BYTES });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  await s3?.stop();
  while (cleanups.length) cleanups.pop()!();
});

function videoManifest(path: string, n: number): string {
  const lines = ['jobs:'];
  for (let i = 0; i < n; i++) lines.push(`  - id: clip-${i}`, '    model: motion-1.6/standard', '    input:', `      prompt: "Waves number ${i}"`, '      duration: 5');
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

function doneFiles(statePath: string): Array<{ job_id: string; path: string; size: number; sha256: string }> {
  const db = new Database(statePath, { readonly: true });
  try {
    return db.prepare(`SELECT job_id, path, size, sha256 FROM files WHERE state = 'done' ORDER BY job_id, idx`).all() as Array<{ job_id: string; path: string; size: number; sha256: string }>;
  } finally {
    db.close();
  }
}

/** The UploadIds the state file holds for multipart uploads in flight (none while the file is not there yet). */
function recordedUploads(statePath: string): string[] {
  let db: Database.Database;
  try {
    db = new Database(statePath, { readonly: true, fileMustExist: true });
  } catch {
    return [];
  }
  try {
    const row = db.prepare(`SELECT value FROM meta WHERE key = 's3_uploads'`).get() as { value: string } | undefined;
    return row ? Object.values(JSON.parse(row.value) as Record<string, string>) : [];
  } catch {
    return []; // the schema is not written yet
  } finally {
    db.close();
  }
}

/** Every job's video and result.json once under the prefix, whole, with the recorded sha256; nothing else but the reports. */
async function expectClean(prefix: string, state: string, n: number): Promise<void> {
  expect(readJobs(state).map((j) => j.state)).toEqual(Array(n).fill('done'));
  const keys = await s3.keys(`${prefix}/`);
  const jobKeys = keys.filter((k) => !/\/report\.(json|csv|md|html)$/.test(k));
  const expected = Array.from({ length: n }, (_, i) => [`${prefix}/clip-${i}/result.json`, `${prefix}/clip-${i}/video-1.mp4`]).flat().sort();
  expect(jobKeys).toEqual(expected);
  expect(s3.pendingUploads().filter((u) => u.key.startsWith(`${prefix}/`))).toEqual([]);
  const files = doneFiles(state);
  expect(files.length).toBe(n);
  const objects = new Map((await s3.objects(`${prefix}/`)).map((o) => [o.key, o]));
  for (const f of files) {
    const o = objects.get(`${prefix}/${f.path}`)!;
    expect(o.size).toBe(VIDEO_BYTES);
    expect(f.size).toBe(VIDEO_BYTES);
    expect(o.metadata.sha256).toBe(f.sha256);
    expect(sha256(await s3.get(`${prefix}/${f.path}`))).toBe(f.sha256);
  }
}

describe('run --out s3:// with large results', () => {
  it('killed (SIGKILL) during multipart uploads, then run again: no duplicate, no partial object, no multipart upload left', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const manifest = videoManifest(join(t.dir, 'm.yaml'), 4);
    const env = { ...s3.env, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY };
    const args = ['run', manifest, '--out', s3.url('kill'), '--time-scale', '0.005', '--yes'];
    const child = spawnCli(args, env, t.dir);
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
    // Killed as soon as a multipart upload is in flight and recorded in the state file (its UploadId is kept
    // before any part is sent; s3rver keeps each upload in a folder until it is completed or aborted).
    const state = join(t.dir, 'genbatch-state', 'm.db');
    const deadline = Date.now() + 40_000;
    let seen = 0;
    while (Date.now() < deadline && child.exitCode === null) {
      const recorded = recordedUploads(state);
      if (recorded.length > 0 && s3.pendingUploads().some((u) => recorded.includes(u.uploadId))) {
        seen = recorded.length;
        break;
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    child.kill('SIGKILL');
    await exited;
    expect(seen, stderr).toBeGreaterThan(0);

    const again = await runCli(args, env, t.dir);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    await expectClean('kill', state, 4);
  }, 90_000);

  it('stopped by SIGINT during multipart uploads: exit 130, the uploads aborted and their temporary objects gone; the rerun finishes clean', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const manifest = videoManifest(join(t.dir, 'm.yaml'), 3);
    const env = { ...s3.env, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY };
    const args = ['run', manifest, '--out', s3.url('stop'), '--time-scale', '0.005', '--yes'];
    const child = spawnCli(args, env, t.dir);
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    const state = join(t.dir, 'genbatch-state', 'm.db');
    const deadline = Date.now() + 40_000;
    let seen = false;
    while (Date.now() < deadline && child.exitCode === null && !seen) {
      const recorded = recordedUploads(state);
      seen = recorded.length > 0 && s3.pendingUploads().some((u) => recorded.includes(u.uploadId));
      if (!seen) await new Promise((r) => setTimeout(r, 5));
    }
    expect(seen, stderr).toBe(true);
    child.kill('SIGINT');
    expect(await exited, stderr).toBe(130);
    // Stopped cleanly: nothing in flight is left in the bucket or in the state file.
    expect(s3.pendingUploads().filter((u) => u.key.startsWith('stop/'))).toEqual([]);
    expect((await s3.keys('stop/')).filter((k) => k.includes('.genbatch-partial'))).toEqual([]);
    expect(recordedUploads(state)).toEqual([]);

    const again = await runCli(args, env, t.dir);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    await expectClean('stop', state, 3);
  }, 90_000);

  it('does not download again a file already in the bucket with its noted sha256 when the run was killed before recording it', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const key = 'sk-s3-noted-0002';
    // Its own sandbox: the second file of the job is answered after 3 s, the window in which the run is killed.
    const slow = await startSandbox({ port: 0, keys: { [key]: 100_000 }, timeScale: 0.005, seed: 8, slowMs: 3000 });
    try {
      const manifest = join(t.dir, 'm.yaml');
      writeFileSync(manifest, ['jobs:', '  - id: two', '    model: dream-4', '    input:', '      prompt: "Two owls"', '      n: 2', ''].join('\n'));
      slow.script('file', ['ok', 'slow']);
      const env = { ...s3.env, GENBATCH_BASE_URL: slow.url, GENBATCH_API_KEY: key };
      const args = ['run', manifest, '--out', s3.url('noted'), '--time-scale', '0.005', '--yes'];
      const child = spawnCli(args, env, t.dir);
      const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
      // Killed once the first image is in the bucket (the second is still coming: the job is not recorded done).
      const deadline = Date.now() + 30_000;
      let first: string[] = [];
      while (Date.now() < deadline && child.exitCode === null && first.length === 0) {
        first = (await s3.keys('noted/two/')).filter((k) => /image-1\./.test(k));
        if (first.length === 0) await new Promise((r) => setTimeout(r, 10));
      }
      child.kill('SIGKILL');
      await exited;
      expect(first).toHaveLength(1);
      const state = join(t.dir, 'genbatch-state', 'm.db');
      expect(readJobs(state)[0]!.state).toBe('downloading');

      const again = await runCli(args, env, t.dir);
      expect(again.code, again.stdout + again.stderr).toBe(0);
      // The first image was fetched once over both runs: the rerun found it in the bucket with its noted size and sha256.
      const gets = slow.requestLog().filter((e) => e.endpoint === 'file');
      expect(gets.filter((e) => e.path === gets[0]!.path)).toHaveLength(1);
      expect(new Set(gets.map((e) => e.path)).size).toBe(2);
      const files = doneFiles(state);
      expect(files.map((f) => f.path)).toEqual([first[0]!.slice('noted/'.length), expect.stringMatching(/^two\/image-2\./)]);
      const objects = new Map((await s3.objects('noted/two/')).map((o) => [o.key, o]));
      expect([...objects.keys()].sort()).toEqual([...files.map((f) => `noted/${f.path}`), 'noted/two/result.json'].sort());
      for (const f of files) {
        expect(objects.get(`noted/${f.path}`)!.metadata.sha256).toBe(f.sha256);
        expect(sha256(await s3.get(`noted/${f.path}`))).toBe(f.sha256);
      }
    } finally {
      await slow.close();
    }
  }, 90_000);

  it('retries an upload whose connection to the bucket is cut midway, and the object is whole', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const proxy = await startProxy(s3.port);
    try {
      const manifest = videoManifest(join(t.dir, 'm.yaml'), 1);
      // The request that carries byte 10 MiB + 1 of what genbatch sends to the bucket is reset: the second part of the upload.
      proxy.cutAfter(10 * 1024 * 1024, { direction: 'up' });
      const env = { ...s3.env, AWS_ENDPOINT_URL_S3: proxy.url, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY };
      const r = await runCli(['run', manifest, '--out', s3.url('cut'), '--time-scale', '0.005', '--yes', '--json'], env, t.dir);
      expect(r.code, r.stderr).toBe(0);
      expect(proxy.cuts).toBe(1);
      const retries = r.stdout.split('\n').filter((l) => l.includes('"type":"retry"') && l.includes('"what":"download"'));
      expect(retries.length).toBeGreaterThanOrEqual(1);
      await expectClean('cut', join(t.dir, 'genbatch-state', 'm.db'), 1);
    } finally {
      await proxy.stop();
    }
  }, 90_000);
});
