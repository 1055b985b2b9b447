// Every bench script at a tiny size, one after another, so that none rots unseen (issue #24 item 5): each must
// start, print its table and exit 0 within its time limit. The figures printed are meaningless at these sizes;
// only the exit status is checked. Run by .ci/run after the suite; `npm run bench:smoke` (build first).
// Usage: npm run build && node bench/smoke.mjs [--parallel 3] [name ...]   (names: only those scripts, e.g. run.js view.mjs)
// Scripts run --parallel at a time (most of their time is spent waiting on their children); each one's output is
// printed whole when it ends.
// Not run here: the helpers run.measure.mjs (every script that measures a CLI run uses it) and prof-summary.mjs
// (needs a profile), and this file.
import { spawn } from 'node:child_process';
import { readdirSync, writeFileSync } from 'node:fs';
import { getPriority } from 'node:os';
import { join, resolve } from 'node:path';

const BENCH = resolve(import.meta.dirname);
const ROOT = resolve(BENCH, '..');

/** Each script's smallest useful size; a script with no entry here fails the smoke (a new script must be added). */
const SIZES = {
  'chat.mjs': ['--seconds', '0.3', '--clients', '4'],
  'chat-run.mjs': ['--jobs', '10'],
  'export.mjs': ['--jobs', '10'],
  'floor-job.mjs': ['--jobs', '50', '--repeat', '1'],
  'floors.mjs': ['--requests', '100', '--files', '50'],
  'manifest.mjs': ['200', '--rounds', '1', '--wide', '200'],
  'pg-claims.mjs': ['--seconds', '0.3', '--jobs', '300'],
  'pg-store.mjs': ['--jobs', '50'],
  'resume.mjs': ['--jobs', '30', '--rounds', '1'],
  'run.js': ['--jobs', '20', '--big', '300', '--scale', '0.001', '--wait', 'poll'],
  'run.parts.mjs': ['--jobs', '50'],
  's3.mjs': ['--jobs', '2', '--mb', '1', '--big-mb', '2'],
  'sandbox.mjs': ['--seconds', '0.3', '--clients', '4', '--tasks', '500'],
  'view.mjs': ['--jobs', '200'],
  'workers.mjs': ['--jobs', '20', '--scale', '0.001', '--claims-seconds', '0.3', '--claims-jobs', '300', '--workers', '1,2'],
};
const HELPERS = new Set(['run.measure.mjs', 'prof-summary.mjs', 'smoke.mjs']);
// Per script; CI runs the smoke at the lowest CPU priority beside the suite, where a script may wait long for CPU.
const LIMIT_S = Number(process.env.BENCH_SMOKE_LIMIT_S ?? 300);

const args = process.argv.slice(2);
const pi = args.indexOf('--parallel');
const PARALLEL = pi >= 0 ? Number(args.splice(pi, 2)[1]) : 3;
if (!Number.isInteger(PARALLEL) || PARALLEL < 1) {
  console.error('bench smoke: --parallel expects an integer >= 1');
  process.exit(2);
}
const all = readdirSync(BENCH).filter((f) => /\.(mjs|js)$/.test(f) && !HELPERS.has(f)).sort();
// The slowest first, so that the last ones to start are short.
const SLOW_FIRST = ['workers.mjs', 'run.js', 'manifest.mjs'];
const chosen = args.length > 0 ? args : [...SLOW_FIRST.filter((f) => all.includes(f)), ...all.filter((f) => !SLOW_FIRST.includes(f))];
const unknown = chosen.filter((f) => !all.includes(f));
if (unknown.length > 0) {
  console.error(`bench smoke: no script ${unknown.join(', ')} in bench/`);
  process.exit(2);
}

/**
 * A detached child starts a session of its own, and with the kernel's autogroup scheduling (on by default) each
 * session is one scheduling group that competes with the others as an equal, whatever its processes' nice value:
 * the smoke run at nice 19 beside the suite (.ci/run) had each of its three scripts at a time take a full share,
 * and a suite file took 55-69 s instead of 21 s (32 s with autogroup off). The child's group gets this process's
 * nice value (/proc/PID/autogroup); where there is no such file (another OS, autogroup off), nothing to do.
 */
function keepNice(pid) {
  const nice = getPriority();
  if (nice <= 0 || pid === undefined) return;
  try {
    writeFileSync(`/proc/${pid}/autogroup`, String(nice));
  } catch {
    // no autogroup here: the nice value the child inherited is all there is
  }
}

/** One script to its end: null when it exited 0, else why not (after LIMIT_S its process group is killed); its output with it. */
function runOne(name) {
  return new Promise((finish) => {
    const child = spawn(process.execPath, [join(BENCH, name), ...SIZES[name]], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    keepNice(child.pid);
    const out = [];
    child.stdout.on('data', (d) => out.push(d));
    child.stderr.on('data', (d) => out.push(d));
    const done = (err) => finish({ err, out: Buffer.concat(out).toString('utf8') });
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }, LIMIT_S * 1000);
    child.on('error', (err) => done(`failed to start: ${err.message}`));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      // What the script started and left behind (a script that failed may not stop its sandbox): its process group.
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // none left
      }
      done(timedOut ? `timed out after ${LIMIT_S} s` : code === 0 ? null : `exit ${code ?? signal}`);
    });
  });
}

const t0 = performance.now();
const failed = [];
const queue = [...chosen];
async function lane() {
  for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
    if (!SIZES[name]) {
      failed.push(`${name}: no smoke size in bench/smoke.mjs`);
      continue;
    }
    const t = performance.now();
    const { err, out } = await runOne(name);
    const s = ((performance.now() - t) / 1000).toFixed(1);
    console.log(`\n== bench smoke: ${name} ${SIZES[name].join(' ')}\n${out.trimEnd()}\n== bench smoke: ${name} ${err ?? 'ok'} (${s} s)`);
    if (err) failed.push(`${name}: ${err}`);
  }
}
await Promise.all(Array.from({ length: PARALLEL }, lane));
console.log(`\nbench smoke: ${chosen.length - failed.length} of ${chosen.length} scripts ran in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
if (failed.length > 0) {
  console.error(`bench smoke FAILED:\n  ${failed.join('\n  ')}`);
  process.exit(1);
}
