// Benchmarks of `genbatch run` (numbers printed; no pass/fail):
//  1. runner CPU seconds per 1,000 jobs, sandbox in another process   (target <= 1 s)
//  2. status requests per task (same run)
//  3. makespan of that time-scaled run vs its lower bound, waiting by polling (under --status-rate) and
//     again with completion callbacks (--listen), each against its target (issue #11 item 13):
//       polling:   makespan <= bound + status reads / read rate + one poll interval
//       callbacks: makespan <= 1.2 x bound
//  4. peak RSS of the load/validate/store phase on a 100,000-job manifest (--max-credits 0: nothing sent)
//  5. peak RSS of the whole run of those 100,000 jobs against a sandbox in another process (target <= 200 MB)
//  6. time to resume that finished run (its jobs done, their files on disk) with nothing left to do,
//     and again once the reports are up to date                      (target <= 2 s both)
// Usage: npm run build && node bench/run.js [--jobs 1000] [--big 100000] [--scale 0.01]
//          [--jobs 1000,5000] (a second, larger size: also run it and print the steady-state CPU per job,
//                              (CPU(N2) - CPU(N1)) / (N2 - N1), so fixed cost, warm-up and steady state are
//                              reported apart; with --repeat, the least CPU of each size is used)
//          [--only run|big] [--prof DIR]   (--prof: node --cpu-prof of every measured child into DIR;
//                                           summarise with node bench/prof-summary.mjs DIR/<file>)
//          [--node-args "--flag ..."] (node/V8 flags for the measured runner)
//          [--repeat N] (the run N times, the least CPU reported) [--csv] (CSV manifest for the run)
//          [--stdout-file] (the runner's --json output to a file instead of a pipe)
//          [--status-rate R] (the runner's --status-rate in the polling run; default: the runner's own, 10)
//          [--wait poll|callbacks|both] (how the JOBS run waits for results; default both: one run each)
// The per-job parts alone (client calls, state changes, file writes): node bench/run.parts.mjs
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, createWriteStream, openSync, closeSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { once } from 'node:events';

const ROOT = resolve(import.meta.dirname, '..');
// A fresh folder under the system temp dir each time (never a fixed folder in the repo), removed at exit.
const WORK = mkdtempSync(join(tmpdir(), 'genbatch-bench-run-'));
process.on('exit', () => rmSync(WORK, { recursive: true, force: true }));
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
// --jobs N or --jobs N1,N2: the first size is the main run; a second (larger) size is run too, for the steady state.
const JOB_SIZES = (() => {
  const i = process.argv.indexOf('--jobs');
  const list = i > 0 ? String(process.argv[i + 1]).split(',').map(Number) : [1000];
  if (list.length > 2 || list.some((n) => !Number.isInteger(n) || n < 2) || (list.length === 2 && list[1] <= list[0])) {
    console.error('--jobs expects N or N1,N2 with integers 2 <= N1 < N2');
    process.exit(2);
  }
  return list;
})();
const JOBS = JOB_SIZES[0];
const JOBS2 = JOB_SIZES[1] ?? null;
const BIG = arg('--big', 100_000);
const SCALE = arg('--scale', 0.01);
const CONCURRENCY = arg('--concurrency', 32);
const sarg = (name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : null;
};
const ONLY = sarg('--only');
const PROF = sarg('--prof');
// --node-args "--flag ...": extra node/V8 flags for the measured runner (e.g. to compare V8 settings).
const NODE_ARGS = (sarg('--node-args') ?? '').split(' ').filter(Boolean);
// --repeat N: the JOBS run N times (fresh output each time); the least CPU is reported (a shared,
// loaded machine only ever adds CPU time), with every run listed.
const REPEAT = arg('--repeat', 1);
// --csv: the run's manifest as a CSV table instead of YAML (YAML parsing is ~0.2 ms per job of the runner's CPU).
const CSV = process.argv.includes('--csv');
// The measured child's stdout (the --json events the timeline is read from) goes to a pipe read by
// this process; --stdout-file: to a file instead, as `genbatch run --json > events.ndjson` would
// (measured: no difference above the noise, 5,000 jobs x2 each).
const STDOUT_PIPE = !process.argv.includes('--stdout-file');
// The polling run's status-read cap (reads per second of the service's time, as `run --status-rate`); null: the default.
const STATUS_RATE = sarg('--status-rate');
const WAIT = sarg('--wait') ?? 'both';
if (!['poll', 'callbacks', 'both'].includes(WAIT)) {
  console.error('--wait expects poll, callbacks or both');
  process.exit(2);
}
let outFiles = 0;


function startSandbox() {
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'genbatch.js'), 'sandbox', '--port', '0', '--time-scale', String(SCALE), '--keys', 'sk-bench-key=100000000', '--seed', '1', '--allow-loopback'], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((res, rej) => {
    let out = '';
    child.on('exit', (c) => rej(new Error(`sandbox exited ${c}`)));
    child.stdout.on('data', (d) => {
      out += d;
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      const token = /^admin token \(.*\): (\S+)$/m.exec(out)?.[1];
      // stats and tasks need the admin token, also from loopback.
      const headers = { 'x-sandbox-admin-token': token };
      if (url && token) res({ url, child, stats: async () => (await fetch(url + '/__sandbox/stats', { headers })).json(), tasks: async () => (await (await fetch(url + '/__sandbox/tasks', { headers })).json()).tasks });
    });
  });
}

/** Run the CLI in a measured child; returns its usage line. */
function measured(args, env = {}) {
  return new Promise((res, rej) => {
    const nodeArgs = [...NODE_ARGS, ...(PROF ? ['--cpu-prof', '--cpu-prof-dir', resolve(PROF)] : [])];
    const outPath = join(WORK, `stdout-${++outFiles}.txt`);
    const outFd = STDOUT_PIPE ? null : openSync(outPath, 'w');
    const child = spawn(process.execPath, [...nodeArgs, join(ROOT, 'bench', 'run.measure.mjs'), ...args], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', outFd ?? 'pipe', 'pipe', 'pipe'],
    });
    if (outFd !== null) closeSync(outFd);
    let usage = '';
    let err = '';
    let out = '';
    child.stdout?.on('data', (d) => (out += d));
    child.stdio[3].on('data', (d) => (usage += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', rej);
    child.on('close', () => {
      if (outFd !== null) {
        out = readFileSync(outPath, 'utf8');
        rmSync(outPath, { force: true });
      }
      try {
        res({ ...JSON.parse(usage.trim()), stderr: err, stdout: out });
      } catch {
        rej(new Error(`no usage line; stderr: ${err.slice(0, 2000)}`));
      }
    });
  });
}

function yamlManifest(path, n) {
  const lines = ['jobs:'];
  for (let i = 0; i < n; i++) lines.push(`  - id: b${i}`, '    model: alpha-image-2', '    input:', `      prompt: "Bench picture ${i}"`);
  writeFileSync(path, lines.join('\n') + '\n');
}

async function csvManifest(path, n) {
  const ws = createWriteStream(path);
  ws.write('id,model,input.prompt,input.quality\n');
  for (let i = 0; i < n; i++) {
    if (!ws.write(`j${i},alpha-image-2,"Picture ${i} of a harbour at dawn",low\n`)) await once(ws, 'drain');
  }
  ws.end();
  await once(ws, 'finish');
}

const fmt = (x, d = 2) => Number(x).toFixed(d);

// ---- 1-3: a time-scaled run of JOBS jobs, sandbox in another process ----
if (ONLY !== 'big') {
const sb = await startSandbox();
try {
  const env = { GENBATCH_API_KEY: 'sk-bench-key' };
  const runOnce = async (n, name, extra = []) => {
    const manifest = join(WORK, `${name}.${CSV ? 'csv' : 'yaml'}`);
    if (CSV) writeFileSync(manifest, 'id,model,input.prompt\n' + Array.from({ length: n }, (_, i) => `b${i},alpha-image-2,Bench picture ${i}\n`).join(''));
    else yamlManifest(manifest, n);
    const out = join(WORK, `${name}-out`);
    rmSync(out, { recursive: true, force: true });
    const before = (await sb.stats()).requests;
    const known = new Set((await sb.tasks()).map((t) => t.task_id));
    const r = await measured(['run', manifest, '--base-url', sb.url, '--time-scale', String(SCALE), '--out', out, '--concurrency', String(CONCURRENCY), '--json', ...extra], env);
    const after = (await sb.stats()).requests;
    r.requests = Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]));
    r.cpu = r.user_s + r.sys_s;
    // When the run's last task ended at the service (the sandbox's clock is this machine's: never moved here),
    // in seconds from the start of the runner's wall time: no run can have every result before then.
    const ends = (await sb.tasks()).filter((t) => !known.has(t.task_id)).map((t) => t.ends_at);
    r.lastEnd_s = ends.length > 0 ? (Math.max(...ends) - r.start_ms) / 1000 : NaN;
    return r;
  };
  const statusReadsOf = (u) => u.requests.status ?? Object.entries(u.requests).filter(([k]) => k.includes('status')).reduce((a, [, v]) => a + v, 0);
  // Lower bound: every task could run at once, so the makespan is at least the longest
  // image duration (60 s x scale); the runner's own floor is the submit throughput, which the
  // timeline shows, and the moment the last task ended at the service is printed beside it.
  const lb = 60 * SCALE;
  const verdict = (ok) => (ok ? 'met' : 'MISSED');
  // Fixed cost (process start, module loading, manifest, balance, reports): a 1-job run.
  const fixed = await runOnce(1, 'one');
  if (WAIT !== 'callbacks') {
  const runs = [];
  for (let i = 0; i < REPEAT; i++) runs.push(await runOnce(JOBS, 'run', STATUS_RATE === null ? [] : ['--status-rate', STATUS_RATE]));
  const u = runs.reduce((a, b) => (b.cpu < a.cpu ? b : a));
  if (REPEAT > 1) console.log(`runner CPU of the ${REPEAT} runs: ${runs.map((r) => fmt(r.cpu)).join(', ')} s (the least is reported)`);
  const events = u.stdout.trim().split('\n').map((l) => JSON.parse(l));
  const t0 = Date.parse(events[0].ts);
  const at = (pred) => events.filter(pred).map((e) => (Date.parse(e.ts) - t0) / 1000);
  const submitted = at((e) => e.type === 'job' && e.to === 'submitted');
  const done = at((e) => e.type === 'job' && e.to === 'done');
  const firstSubmit = Math.min(...at((e) => e.type === 'job' && e.to === 'submitting'));
  const stats = { requests: u.requests };
  const statusReqs = statusReadsOf(u);
  const cpu = u.cpu;
  console.log(`run of ${JOBS} jobs (${CSV ? 'CSV' : 'YAML'} manifest, time scale ${SCALE}, concurrency ${CONCURRENCY}, polling): exit ${u.exit}, wall ${fmt(u.wall_s)} s, runner CPU ${fmt(cpu)} s (user ${fmt(u.user_s)}, sys ${fmt(u.sys_s)}), peak RSS ${fmt(u.max_rss_mb, 0)} MB`);
  console.log(`  runner CPU per 1,000 jobs: ${fmt((cpu * 1000) / JOBS)} s   (target <= 1 s)`);
  console.log(`  of which fixed (a 1-job run: start, modules, manifest, balance, reports): ${fmt(fixed.cpu)} s; per job after that: ${fmt(((cpu - fixed.cpu) * 1000) / (JOBS - 1), 3)} ms`);
  console.log(`  status requests: ${statusReqs} for ${JOBS} tasks = ${fmt(statusReqs / JOBS)} per task`);
  console.log(`  makespan ${fmt(u.wall_s)} s vs lower bound ${fmt(lb)} s (longest image task at this scale) = ${fmt(u.wall_s / lb, 1)}x; process start and report writing included`);
  console.log(`  timeline: first submit at ${fmt(firstSubmit)} s, last task id at ${fmt(Math.max(...submitted))} s (${fmt(JOBS / (Math.max(...submitted) - firstSubmit), 0)} submits/s), last task ended at the service at ${fmt(u.lastEnd_s)} s, last job done at ${fmt(Math.max(...done))} s`);
  // The polling target: the bound, plus the time the reads take at the cap, plus one poll interval (5 s x scale).
  const rate = Number(STATUS_RATE ?? 10) / SCALE;
  const pollTarget = lb + statusReqs / rate + 5 * SCALE;
  console.log(`  target (polling, --status-rate ${STATUS_RATE ?? '10 (default)'} = ${fmt(rate, 0)} reads/s here): makespan <= bound + status reads / rate + one poll interval = ${fmt(lb)} + ${fmt(statusReqs / rate)} + ${fmt(5 * SCALE)} = ${fmt(pollTarget)} s: ${verdict(u.wall_s <= pollTarget)} (${fmt(u.wall_s)} s)`);
  console.log(`  sandbox requests: ${JSON.stringify(stats.requests)}`);
  if (JOBS2 !== null) {
    // Steady state: the extra CPU of N2 - N1 more jobs (fixed cost and V8 warm-up are in both runs, so they cancel).
    const runs2 = [];
    for (let i = 0; i < REPEAT; i++) runs2.push(await runOnce(JOBS2, 'run2'));
    const u2 = runs2.reduce((a, b) => (b.cpu < a.cpu ? b : a));
    if (REPEAT > 1) console.log(`runner CPU of the ${REPEAT} runs of ${JOBS2} jobs: ${runs2.map((r) => fmt(r.cpu)).join(', ')} s (the least is used)`);
    const steady = ((u2.cpu - cpu) * 1000) / (JOBS2 - JOBS); // ms per job
    const warmup = cpu - fixed.cpu - (steady / 1000) * (JOBS - 1);
    console.log(`run of ${JOBS2} jobs: exit ${u2.exit}, wall ${fmt(u2.wall_s)} s, runner CPU ${fmt(u2.cpu)} s (user ${fmt(u2.user_s)}, sys ${fmt(u2.sys_s)}), peak RSS ${fmt(u2.max_rss_mb, 0)} MB; per 1,000 jobs: ${fmt((u2.cpu * 1000) / JOBS2)} s`);
    console.log(`  steady state: (CPU(${JOBS2}) - CPU(${JOBS})) / ${JOBS2 - JOBS} = ${fmt(steady, 3)} ms per job = ${fmt(steady)} s per 1,000 jobs`);
    console.log(`  so a ${JOBS}-job run is: fixed ${fmt(fixed.cpu)} s + warm-up ${fmt(warmup)} s (CPU above the steady state while V8 compiles and optimises) + steady ${fmt((steady / 1000) * (JOBS - 1))} s`);
  }
  }
  if (WAIT !== 'poll') {
    // The same jobs with completion callbacks: the receiver on a free port of this machine (the sandbox may call loopback).
    const c = await runOnce(JOBS, 'callbacks', ['--listen', '127.0.0.1:0']);
    const statusReqs = statusReadsOf(c);
    const target = 1.2 * lb;
    console.log(`run of ${JOBS} jobs with completion callbacks (--listen): exit ${c.exit}, wall ${fmt(c.wall_s)} s, runner CPU ${fmt(c.cpu)} s, status requests ${statusReqs} (${fmt(statusReqs / JOBS)} per task)`);
    console.log(`  target (callbacks): makespan <= 1.2 x bound = ${fmt(target)} s: ${verdict(c.wall_s <= target)} (${fmt(c.wall_s)} s = ${fmt(c.wall_s / lb, 2)}x)`);
    const ev = c.stdout.trim().split('\n').map((l) => JSON.parse(l));
    // Event times are from the runner's first event; shifted to its wall-time origin (start_ms) like lastEnd_s.
    const since = (pred) => Math.max(...ev.filter(pred).map((e) => (Date.parse(e.ts) - c.start_ms) / 1000));
    console.log(`  timeline: last task id at ${fmt(since((e) => e.type === 'job' && e.to === 'submitted'))} s, last task ended at the service at ${fmt(c.lastEnd_s)} s, last result noticed at ${fmt(since((e) => e.type === 'job' && e.to === 'downloading'))} s, last job done at ${fmt(since((e) => e.type === 'job' && e.to === 'done'))} s, exit at ${fmt(c.wall_s)} s`);
    console.log(`  the makespan is ${fmt(c.wall_s / c.lastEnd_s, 2)}x the end of the last task at the service (${fmt(c.wall_s - c.lastEnd_s)} s after it to notice, download and report)`);
    console.log(`  sandbox requests: ${JSON.stringify(c.requests)}`);
  }
} finally {
  sb.child.kill('SIGTERM');
}
}
if (ONLY === 'run') process.exit(0);

// ---- 4-6: BIG jobs against a sandbox of their own (another process) ----
const bigSb = await startSandbox();
try {
  const env = { GENBATCH_API_KEY: 'sk-bench-key' };
  const bigRun = (out, extra = []) => measured(['run', big, '--out', out, '--base-url', bigSb.url, '--time-scale', String(SCALE), '--concurrency', String(CONCURRENCY), '--json', ...extra], env);
  const big = join(WORK, 'big.csv');
  await csvManifest(big, BIG);

  // 4: load/validate/store alone: --max-credits 0 sends nothing and leaves every job pending (exit 5).
  const v = await bigRun(join(WORK, 'big-load'), ['--max-credits', '0']);
  console.log(`load+validate+store of ${BIG} jobs: exit ${v.exit} (5 expected: every job left pending by --max-credits 0), wall ${fmt(v.wall_s)} s, CPU ${fmt(v.user_s + v.sys_s)} s, peak RSS ${fmt(v.max_rss_mb, 0)} MB`);
  if (v.exit !== 5) console.log(v.stderr.slice(0, 2000));

  // 5: the whole run of BIG jobs (submit, wait, download, reports), from a new state.
  const bigOut = join(WORK, 'big-out');
  const full = await bigRun(bigOut);
  const states = full.stdout.trim().split('\n').map((l) => JSON.parse(l)).findLast((e) => e.type === 'finish')?.counts;
  console.log(`run of ${BIG} jobs (time scale ${SCALE}, concurrency ${CONCURRENCY}): exit ${full.exit}, wall ${fmt(full.wall_s)} s, CPU ${fmt(full.user_s + full.sys_s)} s, peak RSS ${fmt(full.max_rss_mb, 0)} MB   (target <= 200 MB); jobs: ${JSON.stringify(states ?? null)}`);
  if (full.exit !== 0) console.log(full.stderr.slice(0, 2000));

  // 6: resume that finished state (its jobs done, their files on disk) with nothing left to do:
  // the manifest re-read and matched against the state, then the reports, written again (one is removed first).
  rmSync(join(bigOut, 'report.md'), { force: true });
  const r = await bigRun(bigOut);
  const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
  const ev = Object.fromEntries(events.map((e) => [e.type, Date.parse(e.ts)]));
  console.log(`resume of the finished ${BIG}-job run with nothing to do (report.md removed, so the reports are rewritten): exit ${r.exit}, wall ${fmt(r.wall_s)} s (target <= 2 s), CPU ${fmt(r.user_s + r.sys_s)} s, peak RSS ${fmt(r.max_rss_mb, 0)} MB`);
  console.log(`  of which: manifest re-read, checked and matched against the state ${fmt((ev.synced - ev.start) / 1000)} s; ready to submit after ${fmt((ev.estimate - ev.start) / 1000)} s; four reports rewritten ${fmt((ev.finish - ev.estimate) / 1000)} s (rewritten: ${events.find((e) => e.type === 'reports')?.written})`);
  if (r.exit !== 0) console.log(r.stderr.slice(0, 2000));

  // 6b: the same command again: nothing changed, so the reports are left as they are.
  const r2 = await bigRun(bigOut);
  const ev2 = Object.fromEntries(r2.stdout.trim().split('\n').map((l) => JSON.parse(l)).map((e) => [e.type, e]));
  console.log(`second resume (reports already written, nothing changed): exit ${r2.exit}, wall ${fmt(r2.wall_s)} s (target <= 2 s), CPU ${fmt(r2.user_s + r2.sys_s)} s, peak RSS ${fmt(r2.max_rss_mb, 0)} MB, reports rewritten: ${ev2.reports?.written}`);
  if (r2.exit !== 0) console.log(r2.stderr.slice(0, 2000));
} finally {
  bigSb.child.kill('SIGTERM');
}
