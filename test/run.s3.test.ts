import { createHash } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import Database from 'better-sqlite3';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { startS3, type TestS3 } from './helpers/s3.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * `genbatch run --out s3://bucket/prefix` against s3rver (in this process, port 0): every result and each
 * job's result.json in the bucket with the disk layout, each object's x-amz-meta-sha256 equal to the sha256
 * recorded in the state file and to its body's; the state file on this machine; a bucket that cannot be
 * written stops the run before anything is submitted (exit 74 naming the bucket).
 */

let s3: TestS3;
let sb: Sandbox;
const KEY = 'sk-s3-run-0001';
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  s3 = await startS3();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.005, seed: 3 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  await s3?.stop();
  while (cleanups.length) cleanups.pop()!();
});

const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

/** The files recorded done in a state file, in job and index order. */
function doneFiles(statePath: string): Array<{ job_id: string; idx: number; path: string; size: number; sha256: string }> {
  const db = new Database(statePath, { readonly: true });
  try {
    return db.prepare(`SELECT job_id, idx, path, size, sha256 FROM files WHERE state = 'done' ORDER BY job_id, idx`).all() as Array<{ job_id: string; idx: number; path: string; size: number; sha256: string }>;
  } finally {
    db.close();
  }
}

describe('run --out s3://', () => {
  it('puts every result and result.json in the bucket, each sha256 in its metadata equal to the recorded one; the state stays local', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const manifest = imageManifest(join(t.dir, 'm.yaml'), 6, 'pic');
    const env = { ...s3.env, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY };
    const r = await runCli(['run', manifest, '--out', s3.url('runs/one'), '--time-scale', '0.005'], env, t.dir);
    expect(r.stderr).not.toContain('NodeVersionSupportWarning');
    expect(r.code, r.stderr).toBe(0);
    const state = join(t.dir, 'genbatch-state', 'm.db');
    expect(r.stdout.split('\n')[0]).toContain(`output in s3://${s3.bucket}/runs/one (state ${state})`);
    expect(existsSync(state)).toBe(true);

    const objects = new Map((await s3.objects('runs/one/')).map((o) => [o.key, o]));
    const jobs = readJobs(state);
    expect(jobs.map((j) => j.state)).toEqual(Array(6).fill('done'));
    const files = doneFiles(state);
    for (const job of jobs) {
      const mine = files.filter((f) => f.job_id === job.id);
      expect(mine.length).toBeGreaterThan(0);
      for (const f of mine) {
        const o = objects.get(`runs/one/${f.path}`);
        expect(o, `${f.path} in the bucket`).toBeDefined();
        expect(f.path.startsWith(`${job.id}/`)).toBe(true);
        expect(o!.metadata.sha256).toBe(f.sha256);
        expect(o!.size).toBe(f.size);
        expect(sha256(await s3.get(`runs/one/${f.path}`))).toBe(f.sha256);
      }
      const result = JSON.parse((await s3.get(`runs/one/${job.id}/result.json`)).toString('utf8')) as { job_id: string; files: Array<{ sha256: string }> };
      expect(result.job_id).toBe(job.id);
      expect(result.files.map((f) => f.sha256)).toEqual(mine.map((f) => f.sha256));
    }
    for (const report of ['report.json', 'report.csv', 'report.md', 'report.html']) expect(objects.has(`runs/one/${report}`), report).toBe(true);
    // Nothing but results, result.json and reports: no temporary object, no SQLite file in the bucket.
    expect([...objects.keys()].filter((k) => /\.genbatch-partial|\.db$/.test(k))).toEqual([]);
    expect(s3.pendingUploads()).toEqual([]);
  }, 60_000);

  it('never replaces an object it did not write (numbered name; a foreign result.json kept in previous-1/); a chat answer goes to the bucket too', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const manifest = join(t.dir, 'm.yaml');
    writeFileSync(
      manifest,
      ['jobs:', '  - id: pic', '    model: alpha-image-2', '    input:', '      prompt: "A quiet harbour"', '  - id: talk', '    model: vendora/chat-5-mini', '    input:', '      messages:', '        - role: user', '          content: "Say hi"', ''].join('\n'),
    );
    // Objects that were there before the run, under the keys the results would take.
    const foreign = Buffer.from('not genbatch');
    for (const key of ['pic/image-1.png', 'pic/image-1.jpeg', 'talk/response.txt']) await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: `runs/keep/${key}`, Body: foreign }));
    const otherResult = JSON.stringify({ job_id: 'someone-else' });
    await s3.client.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'runs/keep/pic/result.json', Body: otherResult }));

    const r = await runCli(['run', manifest, '--out', s3.url('runs/keep'), '--time-scale', '0.005', '--yes'], { ...s3.env, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY }, t.dir);
    expect(r.code, r.stderr).toBe(0);
    for (const key of ['pic/image-1.png', 'pic/image-1.jpeg', 'talk/response.txt']) expect((await s3.get(`runs/keep/${key}`)).equals(foreign), key).toBe(true);
    expect((await s3.get('runs/keep/pic/previous-1/result.json')).toString()).toBe(otherResult);
    const files = doneFiles(join(t.dir, 'genbatch-state', 'm.db'));
    const image = files.find((f) => f.job_id === 'pic')!;
    expect(image.path).toMatch(/^pic\/image-1 \(2\)\.(png|jpeg)$/);
    expect(files.filter((f) => f.job_id === 'talk').map((f) => f.path)).toEqual(['talk/response (2).txt', 'talk/response.json']);
    for (const f of files) {
      const body = await s3.get(`runs/keep/${f.path}`);
      expect(sha256(body)).toBe(f.sha256);
      expect((await s3.objects(`runs/keep/${f.path}`))[0]!.metadata.sha256).toBe(f.sha256);
    }
    expect(JSON.parse((await s3.get('runs/keep/pic/result.json')).toString()).job_id).toBe('pic');
    // Nothing written to the disk in place of the bucket (a folder named after the URL).
    expect(existsSync(join(t.dir, 's3:'))).toBe(false);
  }, 60_000);

  it('moves the objects of a job sent again (its prompt changed) to <job>/previous-1/, as on disk', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const manifest = join(t.dir, 'm.yaml');
    const write = (prompt: string): void =>
      writeFileSync(manifest, ['jobs:', '  - id: pic', '    model: alpha-image-2', '    input:', `      prompt: "${prompt}"`, ''].join('\n'));
    const env = { ...s3.env, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY };
    const args = ['run', manifest, '--out', s3.url('runs/again'), '--time-scale', '0.005', '--yes'];
    write('A red door');
    expect((await runCli(args, env, t.dir)).code).toBe(0);
    const first = (await s3.keys('runs/again/pic/')).filter((k) => !k.endsWith('result.json'));
    expect(first).toHaveLength(1);
    const firstBody = await s3.get(first[0]!);
    const firstResult = await s3.get('runs/again/pic/result.json');

    write('A blue door');
    const r = await runCli(args, env, t.dir);
    expect(r.code, r.stderr).toBe(0);
    const name = first[0]!.slice('runs/again/pic/'.length);
    expect((await s3.get(`runs/again/pic/previous-1/${name}`)).equals(firstBody)).toBe(true);
    expect((await s3.get('runs/again/pic/previous-1/result.json')).equals(firstResult)).toBe(true);
    const [now] = doneFiles(join(t.dir, 'genbatch-state', 'm.db'));
    expect(now!.path).toMatch(/^pic\/image-1\.(png|jpeg)$/);
    expect(sha256(await s3.get(`runs/again/${now!.path}`))).toBe(now!.sha256);
    expect(JSON.parse((await s3.get('runs/again/pic/result.json')).toString()).input.prompt).toBe('A blue door');
  }, 60_000);

  it('runs 150 jobs to the bucket with faults on the service side (truncated and failed downloads, 5xx, 429): each done job once, whole, with its sha256', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const key = 'sk-s3-faults-03';
    const faulty = await startSandbox({
      port: 0,
      keys: { [key]: 100_000 },
      timeScale: 0.005,
      seed: 21,
      failureRate: 0.03,
      faults: 'file:truncate=0.1,file:500=0.05,file:drop=0.03,status:503=0.05,submit:429=0.05',
    });
    try {
      const manifest = imageManifest(join(t.dir, 'm.yaml'), 150, 'many');
      const r = await runCli(['run', manifest, '--out', s3.url('runs/many'), '--time-scale', '0.005', '--concurrency', '16'], { ...s3.env, GENBATCH_BASE_URL: faulty.url, GENBATCH_API_KEY: key }, t.dir);
      expect([0, 1], r.stderr).toContain(r.code);
      const injected = faulty.stats().faults_injected;
      expect((injected['file:truncate'] ?? 0) + (injected['file:500'] ?? 0)).toBeGreaterThan(0);
      const state = join(t.dir, 'genbatch-state', 'm.db');
      const jobs = readJobs(state);
      const done = jobs.filter((j) => j.state === 'done');
      expect(done.length + jobs.filter((j) => j.state === 'failed').length).toBe(150);
      expect(done.length).toBeGreaterThan(125); // 3% of tasks fail at the sandbox
      const files = doneFiles(state);
      const objects = new Map((await s3.objects('runs/many/')).map((o) => [o.key, o]));
      const expected = [...files.map((f) => `runs/many/${f.path}`), ...done.map((j) => `runs/many/${j.id}/result.json`)];
      const reports = ['report.json', 'report.csv', 'report.md', 'report.html'].map((f) => `runs/many/${f}`);
      // Exactly the done jobs' files and result.json (failed jobs have none), and the reports: no duplicate, no partial object.
      expect([...objects.keys()].sort()).toEqual([...expected, ...reports].sort());
      for (const f of files) {
        expect(objects.get(`runs/many/${f.path}`)!.metadata.sha256).toBe(f.sha256);
        expect(objects.get(`runs/many/${f.path}`)!.size).toBe(f.size);
      }
      expect(s3.pendingUploads().filter((u) => u.key.startsWith('runs/many/'))).toEqual([]);
    } finally {
      await faulty.close();
    }
  }, 90_000);

  it('stops before anything is submitted when the credentials are wrong (an unknown access key): exit 74 naming the bucket, no task made', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const key = 'sk-s3-badcreds-02';
    const local = await startSandbox({ port: 0, keys: { [key]: 1000 }, timeScale: 0.005 });
    try {
      const manifest = imageManifest(join(t.dir, 'm.yaml'), 3, 'pic');
      const env = { ...s3.env, AWS_ACCESS_KEY_ID: 'NOT-A-KEY', AWS_SECRET_ACCESS_KEY: 'not-the-secret', GENBATCH_BASE_URL: local.url, GENBATCH_API_KEY: key };
      const r = await runCli(['run', manifest, '--out', s3.url('runs/bad')], env, t.dir);
      expect(r.code, r.stdout + r.stderr).toBe(74);
      expect(r.stderr).toContain(`bucket "${s3.bucket}" is not writable`);
      expect(r.stderr).not.toContain('not-the-secret');
      expect(local.stats().tasks_total).toBe(0);
      expect(await s3.keys('runs/bad')).toEqual([]);
    } finally {
      await local.close();
    }
  }, 60_000);

  it('addresses the bucket path-style with a custom endpoint, and as a host name with GENBATCH_S3_VIRTUAL_HOSTS=1', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const manifest = imageManifest(join(t.dir, 'm.yaml'), 1, 'pic');
    const env = { ...s3.env, AWS_ENDPOINT_URL_S3: `http://localhost:${s3.port}`, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY };
    const path = await runCli(['run', manifest, '--out', s3.url('runs/hosts'), '--time-scale', '0.005'], env, t.dir);
    expect(path.code, path.stderr).toBe(0);
    // bucket.localhost does not resolve here: the probe fails and names the host it tried.
    const virtual = await runCli(['run', manifest, '--out', s3.url('runs/hosts2')], { ...env, GENBATCH_S3_VIRTUAL_HOSTS: '1' }, t.dir);
    expect(virtual.code, virtual.stdout + virtual.stderr).toBe(74);
    expect(virtual.stderr).toContain(`${s3.bucket}.localhost`);
  }, 60_000);

  it('takes credentials, region and endpoint from a profile of the AWS config files (AWS_PROFILE)', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const manifest = imageManifest(join(t.dir, 'm.yaml'), 1, 'pic');
    const config = join(t.dir, 'aws-config');
    const credentials = join(t.dir, 'aws-credentials');
    writeFileSync(config, `[profile local]\nregion = us-east-1\nendpoint_url = ${s3.endpoint}\n`);
    writeFileSync(credentials, `[local]\naws_access_key_id = ${s3.env.AWS_ACCESS_KEY_ID}\naws_secret_access_key = ${s3.env.AWS_SECRET_ACCESS_KEY}\n`);
    // Empty: whatever this machine's environment holds plays no part (the SDK takes an empty value as none).
    const none = { AWS_ACCESS_KEY_ID: '', AWS_SECRET_ACCESS_KEY: '', AWS_SESSION_TOKEN: '', AWS_ENDPOINT_URL_S3: '', AWS_ENDPOINT_URL: '' };
    const env: Record<string, string> = { ...none, AWS_CONFIG_FILE: config, AWS_SHARED_CREDENTIALS_FILE: credentials, AWS_PROFILE: 'local', AWS_EC2_METADATA_DISABLED: 'true', GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY };
    const r = await runCli(['run', manifest, '--out', s3.url('runs/profile'), '--time-scale', '0.005'], env, t.dir);
    expect(r.code, r.stderr).toBe(0);
    expect((await s3.keys('runs/profile/pic-0000/')).some((k) => k.endsWith('result.json'))).toBe(true);
  }, 60_000);

  it('refuses a malformed s3:// URL before anything (exit 2 naming the rule)', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const manifest = imageManifest(join(t.dir, 'm.yaml'), 1, 'pic');
    const env = { ...s3.env, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY };
    const badName = await runCli(['run', manifest, '--out', 's3://Bad_Bucket/x'], env, t.dir);
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain('"Bad_Bucket" is not a valid bucket name');
    const dots = await runCli(['run', manifest, '--out', `s3://${s3.bucket}/a/../b`], env, t.dir);
    expect(dots.code).toBe(2);
    expect(dots.stderr).toContain('the key prefix may not contain empty, "." or ".." segments');
    expect(existsSync(join(t.dir, 'genbatch-state'))).toBe(false);
  }, 60_000);

  it('names a missing bucket (exit 74) before anything is submitted', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const manifest = imageManifest(join(t.dir, 'm.yaml'), 2, 'pic');
    const r = await runCli(['run', manifest, '--out', 's3://no-such-bucket/x'], { ...s3.env, GENBATCH_BASE_URL: sb.url, GENBATCH_API_KEY: KEY }, t.dir);
    expect(r.code, r.stdout + r.stderr).toBe(74);
    expect(r.stderr).toContain('bucket "no-such-bucket" is not writable');
  }, 60_000);
});
