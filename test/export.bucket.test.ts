import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { startS3, type TestS3 } from './helpers/s3.js';
import { tempDir } from './helpers/tmp.js';

/**
 * `genbatch export` with a bucket on either side: a run to `s3://bucket/runs/e` exported into another prefix
 * (each file copied server-side, its sha256 metadata kept; again: kept; a rejected job's file removed), into a
 * folder (streamed, checked); a run on disk exported into a bucket (streamed, its sha256 checked before the
 * upload completes); an object or file changed since the run is named and left out (exit 1); an export prefix
 * inside the run's prefix is refused (exit 2). The sandbox serves the video 9 MiB long (over one part: a
 * multipart upload when streamed).
 */
const SCALE = '0.005';
const KEY = 'sk-s3-export-0123456789';
const VIDEO = 9 * 1024 * 1024;

let sb: Sandbox;
let s3: TestS3;
const t = tempDir('genbatch-s3-export-');
let m: string;
let state: string;
let env: Record<string, string>;
const RUN = 's3://bucket/runs/e';

function manifest(path: string): string {
  const lines = ['jobs:'];
  for (const id of ['p-1', 'p-2', 'p-3']) lines.push(`  - id: ${id}`, '    model: alpha-image-2', '    input:', `      prompt: "a lighthouse at dusk, ${id}"`);
  lines.push('  - id: v-1', '    model: clip-2.3', '    input:', '      prompt: "slow waves"');
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function doneFiles(statePath: string): Array<{ job_id: string; path: string; sha256: string }> {
  const db = new Database(statePath, { readonly: true });
  try {
    return db.prepare(`SELECT job_id, path, sha256 FROM files WHERE state = 'done' ORDER BY job_id, idx`).all() as Array<{ job_id: string; path: string; sha256: string }>;
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  ensureBuilt();
  s3 = await startS3();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 8, videoBytes: VIDEO });
  env = { ...s3.env, GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sb.url };
  m = manifest(join(t.dir, 'm.yaml'));
  state = join(t.dir, 'genbatch-state', 'm.db');
  const r = await runCli(['run', m, '--out', RUN, '--time-scale', SCALE, '--yes'], env, t.dir);
  if (r.code !== 0) throw new Error(`run failed: ${r.stderr}`);
}, 60_000);
afterAll(async () => {
  await sb?.close();
  await s3?.stop();
  t.cleanup();
});

describe('export with a bucket', () => {
  it('into another prefix: every file copied server-side with its sha256 metadata, metadata.jsonl beside; again: kept; a rejected job: removed', async () => {
    const files = doneFiles(state);
    expect(files.length).toBe(4);
    const r = await runCli(['export', m, '--out', RUN, '--to', 's3://bucket/exports/e'], env, t.dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('exported 4 file(s) of 4 job(s) to s3://bucket/exports/e (0 hard-linked, 4 copied, 0 already there); index: s3://bucket/exports/e/metadata.jsonl');
    const objects = new Map((await s3.objects('exports/e/')).map((o) => [o.key, o]));
    for (const f of files) {
      const o = objects.get(`exports/e/${f.path}`);
      expect(o, f.path).toBeDefined();
      expect(o!.metadata.sha256).toBe(f.sha256);
      expect(sha(await s3.get(`exports/e/${f.path}`))).toBe(f.sha256);
    }
    const index = (await s3.get('exports/e/metadata.jsonl')).toString('utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as { file_name: string; sha256: string });
    expect(index.map((l) => l.file_name).sort()).toEqual(files.map((f) => f.path).sort());
    expect(objects.has('exports/e/.genbatch-export.json')).toBe(true);

    const again = await runCli(['export', m, '--out', RUN, '--to', 's3://bucket/exports/e'], env, t.dir);
    expect(again.stdout).toContain('(0 hard-linked, 0 copied, 4 already there)');

    expect((await runCli(['mark', m, '--out', RUN, '--reject', 'p-2'], env, t.dir)).code).toBe(0);
    const third = await runCli(['export', m, '--out', RUN, '--to', 's3://bucket/exports/e'], env, t.dir);
    expect(third.stdout).toContain('exported 3 file(s) of 3 job(s)');
    expect(third.stdout).toContain('1 no longer chosen removed');
    expect((await s3.keys('exports/e/p-2/'))).toEqual([]);
    expect((await runCli(['mark', m, '--out', RUN, '--clear', 'p-2'], env, t.dir)).code).toBe(0);
  });

  it('into a folder: each object streamed to disk and checked', async () => {
    const dir = join(t.dir, 'export-here');
    const r = await runCli(['export', m, '--out', RUN, '--to', dir], env, t.dir);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('(0 hard-linked, 4 copied, 0 already there)');
    for (const f of doneFiles(state)) expect(sha(readFileSync(join(dir, f.path))), f.path).toBe(f.sha256);
  });

  it('an object changed since the run (other bytes, other sha256) is named and left out: exit 1', async () => {
    const f = doneFiles(state).find((x) => x.job_id === 'p-3')!;
    const original = await s3.get(`runs/e/${f.path}`);
    await s3.client.send(new PutObjectCommand({ Bucket: 'bucket', Key: `runs/e/${f.path}`, Body: Buffer.from('not the image'), Metadata: { sha256: sha(Buffer.from('not the image')) } }));
    try {
      const r = await runCli(['export', m, '--out', RUN, '--to', 's3://bucket/exports/changed'], env, t.dir);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`s3://bucket/runs/e/${f.path}: its sha256 ${sha(Buffer.from('not the image'))} is not the recorded ${f.sha256}; not exported`);
      expect(await s3.keys(`exports/changed/${f.path}`)).toEqual([]);
    } finally {
      await s3.client.send(new PutObjectCommand({ Bucket: 'bucket', Key: `runs/e/${f.path}`, Body: original, Metadata: { sha256: f.sha256 } }));
    }
  });

  it('a copy takes the type its bytes show, not the source object\'s: objects an older run stored as text/html are exported as media', async () => {
    const files = doneFiles(state);
    const originals = new Map<string, Buffer>();
    for (const f of files) {
      const body = await s3.get(`runs/e/${f.path}`);
      originals.set(f.path, body);
      await s3.client.send(new PutObjectCommand({ Bucket: 'bucket', Key: `runs/e/${f.path}`, Body: body, ContentType: 'text/html', Metadata: { sha256: f.sha256 } }));
    }
    try {
      const r = await runCli(['export', m, '--out', RUN, '--to', 's3://bucket/exports/typed'], env, t.dir);
      expect(r.code, r.stderr).toBe(0);
      const objects = new Map((await s3.objects('exports/typed/')).map((o) => [o.key, o]));
      for (const f of files) {
        const o = objects.get(`exports/typed/${f.path}`)!;
        expect(o.contentType, f.path).toMatch(/^(image|video)\/(png|jpeg|mp4)$/);
        expect(o.metadata.sha256, f.path).toBe(f.sha256);
      }
    } finally {
      for (const f of files) await s3.client.send(new PutObjectCommand({ Bucket: 'bucket', Key: `runs/e/${f.path}`, Body: originals.get(f.path)!, Metadata: { sha256: f.sha256 } }));
    }
  });

  it('a run on disk into a bucket: streamed, sha256 checked before the upload completes (a changed file leaves no object)', async () => {
    const out = join(t.dir, 'disk-out');
    const dm = manifest(join(t.dir, 'd.yaml'));
    expect((await runCli(['run', dm, '--out', out, '--time-scale', SCALE, '--yes'], env, t.dir)).code).toBe(0);
    const files = doneFiles(join(out, 'state.db'));
    const video = files.find((f) => f.job_id === 'v-1')!;
    // The video (9 MiB: a multipart upload) changed on disk after the run.
    const bytes = readFileSync(join(out, video.path));
    bytes[bytes.length - 1] ^= 0xff;
    writeFileSync(join(out, video.path), bytes);
    const r = await runCli(['export', dm, '--out', out, '--to', 's3://bucket/exports/disk'], env, t.dir);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${join(out, video.path)}: sha256 ${sha(bytes)} is not the recorded ${video.sha256}`);
    expect(r.stdout).toContain('exported 3 file(s) of 3 job(s) to s3://bucket/exports/disk (0 hard-linked, 3 copied, 0 already there)');
    for (const f of files.filter((x) => x !== video)) expect((await s3.objects(`exports/disk/${f.path}`))[0]!.metadata.sha256).toBe(f.sha256);
    expect(await s3.keys(`exports/disk/${video.path}`)).toEqual([]);
    expect(await s3.keys('exports/disk/.genbatch-partial/')).toEqual([]);
    expect(s3.pendingUploads()).toEqual([]);
  });

  it('a forged record entry with ../ (a key outside the export prefix) deletes nothing: named, exit 1', async () => {
    const to = 's3://bucket/exports/forged';
    expect((await runCli(['export', m, '--out', RUN, '--to', to], env, t.dir)).code).toBe(0);
    const ledger = JSON.parse((await s3.get('exports/forged/.genbatch-export.json')).toString('utf8')) as { files: Record<string, string> };
    // Each run object carries its sha256 in its metadata: a removal that reached it would find it "unchanged".
    const victims = doneFiles(state).slice(0, 2);
    ledger.files[`../../runs/e/${victims[0]!.path}`] = victims[0]!.sha256;
    ledger.files[`p-1/../../../runs/e/${victims[1]!.path}`] = victims[1]!.sha256;
    await s3.client.send(new PutObjectCommand({ Bucket: 'bucket', Key: 'exports/forged/.genbatch-export.json', Body: JSON.stringify(ledger) }));
    const before = await s3.keys('runs/e/');
    const r = await runCli(['export', m, '--out', RUN, '--to', to], env, t.dir);
    expect(await s3.keys('runs/e/')).toEqual(before);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`the entry "../../runs/e/${victims[0]!.path}" has a ".." part, not a name inside the export; nothing removed for it`);
  });

  it('refuses an export prefix inside the run\'s prefix (exit 2)', async () => {
    const r = await runCli(['export', m, '--out', RUN, '--to', `${RUN}/export`], env, t.dir);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("the export prefix must be outside the run's output prefix s3://bucket/runs/e");
  });
});
