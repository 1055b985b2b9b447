// Time to resume a finished run with nothing to do (issue #24 item 5: target <= 2 s at 100,000 jobs), on a
// real state: one a whole run left, with its result files on disk (make one with `genbatch run` against a
// `genbatch sandbox` at a small --time-scale; bench/run.js's figure marks a fresh state done, with no files).
// Each round runs the same `genbatch run` twice: once with every report in place and nothing changed (the
// reports are kept), once with report.html removed first (the four reports are written again).
// The least wall time of the rounds is reported for each, with its CPU and peak RSS.
// Usage: npm run build && node bench/resume.mjs (--manifest M --out DIR --base-url URL | --jobs N) [--rounds 3]
//          (--jobs N: a finished run of N image jobs is made first, against a sandbox of its own, in a temporary folder)
//          [--root DIR] (the genbatch checkout to time: DIR/bin/genbatch.js, DIR/bench/run.measure.mjs; default: this one)
//          [--prof DIR] (node --cpu-prof of each timed run into DIR; node bench/prof-summary.mjs DIR/<file>)
// The state is used in place (a resume with nothing to do changes only its report marks and the reports).
// Measured 2026-11-28 on the 2-core machine at load 27-35 (base d50edfb and this branch interleaved, 3 rounds each,
// 100,000 image jobs, state 146 MB, 100,000 result files): reports kept: wall 30.06 -> 12.07 s, CPU 5.52 -> 1.84 s;
// reports rewritten: wall 40.02 -> 23.68 s, CPU 8.91 -> 5.29 s (least of 3 each; wall is mostly waiting for a core).
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const sarg = (name, dflt = null) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const ROUNDS = Number(sarg('--rounds', '3'));
const ROOT = resolve(sarg('--root', join(import.meta.dirname, '..')));
const PROF = sarg('--prof');
const JOBS = sarg('--jobs');
let MANIFEST = sarg('--manifest');
let OUT = sarg('--out');
let BASE_URL = sarg('--base-url');
/** --jobs N instead: a finished run of N image jobs made first, against a `genbatch sandbox` of its own. */
let made = null;
if (JOBS && !MANIFEST) made = await makeRun(Number(JOBS));
if (!MANIFEST || !OUT || !BASE_URL) {
  console.error('usage: node bench/resume.mjs (--manifest M --out DIR --base-url URL | --jobs N) [--rounds 3] [--root DIR] [--prof DIR]');
  process.exit(2);
}

/** A sandbox in another process, a manifest of n jobs, and their whole run (results on disk) in a temporary folder. */
async function makeRun(n) {
  const dir = mkdtempSync(join(tmpdir(), 'genbatch-bench-resume-'));
  const sandbox = spawn(process.execPath, [join(ROOT, 'bin', 'genbatch.js'), 'sandbox', '--port', '0', '--time-scale', '0.001', '--keys', 'sk-bench-key=100000000', '--seed', '1'], { stdio: ['ignore', 'pipe', 'inherit'] });
  BASE_URL = await new Promise((res, rej) => {
    let text = '';
    sandbox.on('exit', (c) => rej(new Error(`sandbox exited ${c}`)));
    sandbox.stdout.on('data', (d) => {
      text += d;
      const m = /(http:\/\/127\.0\.0\.1:\d+)/.exec(text);
      if (m) res(m[1]);
    });
  });
  MANIFEST = join(dir, 'm.csv');
  OUT = join(dir, 'out');
  writeFileSync(MANIFEST, 'id,model,input.prompt\n' + Array.from({ length: n }, (_, i) => `r${i},alpha-image-2,Resume picture ${i}\n`).join(''));
  const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'genbatch.js'), 'run', MANIFEST, '--out', OUT, '--base-url', BASE_URL, '--time-scale', '0.001', '--yes'], { env: { ...process.env, GENBATCH_API_KEY: 'sk-bench-key' }, stdio: ['ignore', 'ignore', 'inherit'] });
  if (r.status !== 0) throw new Error(`the first run of ${n} jobs exited ${r.status}`);
  return { dir, sandbox };
}

/** One `genbatch run` of the finished state, measured by run.measure.mjs; its usage line and the reports event. */
function resume() {
  return new Promise((res, rej) => {
    const nodeArgs = PROF ? ['--cpu-prof', '--cpu-prof-dir', resolve(PROF)] : [];
    const args = ['run', MANIFEST, '--out', OUT, '--base-url', BASE_URL, '--json'];
    const child = spawn(process.execPath, [...nodeArgs, join(ROOT, 'bench', 'run.measure.mjs'), ...args], { env: { ...process.env, GENBATCH_API_KEY: process.env.GENBATCH_API_KEY ?? 'sk-bench-key' }, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let usage = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.stdio[3].on('data', (d) => (usage += d));
    child.on('error', rej);
    child.on('close', () => {
      try {
        const u = JSON.parse(usage.trim());
        const events = out.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l));
        const reports = events.find((e) => e.type === 'reports');
        res({ ...u, cpu_s: u.user_s + u.sys_s, written: reports?.written, stderr: err });
      } catch {
        rej(new Error(`no usage line; stderr: ${err.slice(0, 2000)}`));
      }
    });
  });
}

const fmt = (x, d = 2) => Number(x).toFixed(d);
const kept = [];
const rewritten = [];
for (let i = 0; i < ROUNDS; i++) {
  kept.push(await resume());
  rmSync(join(OUT, 'report.html'), { force: true });
  rewritten.push(await resume());
}
for (const [name, rs] of [['reports kept (nothing changed)', kept], ['reports rewritten (report.html removed first)', rewritten]]) {
  const best = rs.reduce((a, b) => (b.wall_s < a.wall_s ? b : a));
  const bad = rs.filter((r) => r.exit !== 0);
  console.log(`resume, ${name}: least wall ${fmt(best.wall_s)} s of ${rs.map((r) => fmt(r.wall_s)).join(', ')} (target <= 2 s); its CPU ${fmt(best.cpu_s)} s, peak RSS ${fmt(best.max_rss_mb, 0)} MB, reports written: ${rs.map((r) => r.written).join(', ')}`);
  for (const r of bad) console.log(`  exit ${r.exit}: ${r.stderr.slice(0, 500)}`);
}
if (made) {
  made.sandbox.kill();
  rmSync(made.dir, { recursive: true, force: true });
}
