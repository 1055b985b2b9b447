#!/usr/bin/env node
// Benchmark of results written to a bucket (`--out s3://...`) against the same results written to disk,
// in one run of this script (numbers printed; no pass/fail).
//
// The sandbox runs in its own process with --video-bytes, so every video result is a file of exactly the
// size asked, made as it is sent; s3rver (an S3 API that keeps objects in a folder) runs in this process.
// The CLI runs in a measured child (bench/run.measure.mjs: CPU and peak RSS of the whole process).
//   1. throughput: --jobs video jobs of --mb MB each (default 8 x 128 MB), to a folder, then to s3rver;
//      the same manifest, a fresh state each time. MB/s over the download window: from the first job that
//      starts downloading to the last file recorded (the run's --json events, stamped as they arrive), so
//      the submit and the wait for the service are not counted; and over the whole run (wall);
//   2. peak RSS with one result of --big-mb MB (default 1024), to a folder and to s3rver.
// Usage: npx tsc -p . && node bin/bundle.js && node bench/s3.mjs [--jobs 8] [--mb 128] [--big-mb 1024] [--concurrency 4]
import { spawn } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import S3rver from 's3rver';

const ROOT = resolve(import.meta.dirname, '..');
const WORK = join(ROOT, 'bench', '.work', 's3');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const JOBS = arg('--jobs', 8);
const MB = arg('--mb', 128);
const BIG_MB = arg('--big-mb', 1024);
const CONCURRENCY = arg('--concurrency', 4);
const KEY = 'sk-bench-s3-key';
const SCALE = '0.001';
const MiB = 1024 * 1024;

rmSync(WORK, { recursive: true, force: true });
mkdirSync(WORK, { recursive: true });

function startSandbox(videoBytes) {
  const extra = videoBytes ? ['--video-bytes', String(videoBytes)] : [];
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'genbatch.js'), 'sandbox', '--port', '0', '--keys', `${KEY}=100000000`, '--seed', '1', '--time-scale', SCALE, ...extra], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((res, rej) => {
    let out = '';
    child.on('exit', (c) => rej(new Error(`sandbox exited ${c}`)));
    child.stdout.on('data', (d) => {
      out += d;
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      if (url) res({ url, stop: () => new Promise((r) => (child.once('exit', r), child.kill('SIGTERM'))) });
    });
  });
}

async function startBucket() {
  const dir = join(WORK, 's3rver');
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, configureBuckets: [{ name: 'bench' }] });
  const { port } = await server.run();
  return {
    env: {
      AWS_ACCESS_KEY_ID: 'S3RVER',
      AWS_SECRET_ACCESS_KEY: 'S3RVER',
      AWS_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_S3: `http://127.0.0.1:${port}`,
      AWS_CONFIG_FILE: join(WORK, 'no-aws-config'),
      AWS_SHARED_CREDENTIALS_FILE: join(WORK, 'no-aws-credentials'),
    },
    stop: () => server.close(),
  };
}

/** The CLI in a measured child (bench/run.measure.mjs): its usage line plus stdout. */
function measured(args, env) {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [join(ROOT, 'bench', 'run.measure.mjs'), ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env, GENBATCH_API_KEY: KEY, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    let usage = '';
    let err = '';
    let out = '';
    let partial = '';
    const events = [];
    child.stdout.on('data', (d) => {
      out += d;
      const lines = (partial + d).split('\n');
      partial = lines.pop();
      const at = performance.now();
      for (const line of lines) {
        try {
          events.push({ at, e: JSON.parse(line) });
        } catch {
          // not an event line
        }
      }
    });
    child.stdio[3].on('data', (d) => (usage += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', rej);
    child.on('close', () => {
      try {
        const u = JSON.parse(usage.trim());
        if (u.exit !== 0) rej(new Error(`genbatch ${args.join(' ')}: exit ${u.exit}; stderr: ${err.slice(0, 2000)}`));
        res({ ...u, stdout: out, stderr: err, window_s: downloadWindow(events) });
      } catch {
        rej(new Error(`no usage line; stderr: ${err.slice(0, 2000)}`));
      }
    });
  });
}

/** Seconds from the first job that starts downloading to the last file recorded. */
function downloadWindow(events) {
  const starts = events.filter(({ e }) => e.type === 'job' && e.to === 'downloading').map(({ at }) => at);
  const files = events.filter(({ e }) => e.type === 'file').map(({ at }) => at);
  if (starts.length === 0 || files.length === 0) return NaN;
  return (Math.max(...files) - Math.min(...starts)) / 1000;
}

function manifest(name, n) {
  const lines = ['jobs:'];
  for (let i = 0; i < n; i++) lines.push(`  - id: v${i}`, '    model: clip-2.3', '    input:', `      prompt: "Slow waves at dusk, take ${i}"`);
  const path = join(WORK, `${name}.yaml`);
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

let run = 0;
/** One `genbatch run` of `path` against `sb` into `out` (a folder or s3://), a fresh state each time. */
function runOnce(sb, path, out, env = {}) {
  run++;
  const state = join(WORK, `state-${run}.db`);
  return measured(['run', path, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--state', state, '--concurrency', String(CONCURRENCY), '--yes', '--json'], env);
}

const fmt = (x, d = 1) => x.toFixed(d);
const bucket = await startBucket();
const rows = [];
try {
  const path = manifest('throughput', JOBS);
  const sb = await startSandbox(MB * MiB);
  const bytes = JOBS * MB * MiB;
  for (const [where, out] of [
    ['disk', join(WORK, 'out-disk')],
    ['s3rver', 's3://bench/throughput'],
  ]) {
    const r = await runOnce(sb, path, out, bucket.env);
    rows.push({ what: `${JOBS} x ${MB} MB to ${where}`, wall_s: r.wall_s, window_s: r.window_s, cpu_s: r.user_s + r.sys_s, max_rss_mb: r.max_rss_mb, mb: bytes / MiB });
    if (where === 'disk') rmSync(out, { recursive: true, force: true });
  }
  await sb.stop();

  const big = await startSandbox(BIG_MB * MiB);
  const one = manifest('big', 1);
  for (const [where, out] of [
    ['disk', join(WORK, 'out-big')],
    ['s3rver', 's3://bench/big'],
  ]) {
    const r = await runOnce(big, one, out, bucket.env);
    rows.push({ what: `1 x ${BIG_MB} MB to ${where}`, wall_s: r.wall_s, window_s: r.window_s, cpu_s: r.user_s + r.sys_s, max_rss_mb: r.max_rss_mb, mb: BIG_MB });
    if (where === 'disk') rmSync(out, { recursive: true, force: true });
  }
  await big.stop();

  console.log('what\tdownload window s\tMB/s (window)\twall s\tMB/s (wall)\tCPU s\tpeak RSS MB');
  for (const r of rows) console.log(`${r.what}\t${fmt(r.window_s, 2)}\t${fmt(r.mb / r.window_s)}\t${fmt(r.wall_s, 2)}\t${fmt(r.mb / r.wall_s)}\t${fmt(r.cpu_s, 2)}\t${fmt(r.max_rss_mb)}`);
} finally {
  await bucket.stop();
  rmSync(WORK, { recursive: true, force: true });
}
