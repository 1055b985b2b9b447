#!/usr/bin/env node
// Benchmark of chat jobs in `genbatch run` (numbers printed; no pass/fail):
// a manifest of N chat jobs (default 1,000) with streaming on, spread over the four
// protocols (chat-completions, responses, messages, gemini), run by the CLI in a
// measured child process against `genbatch sandbox` in another process.
// Prints jobs per second (whole run, and first call to last done) and the runner's
// CPU per job (whole process, and marginal: minus a 1-job run's fixed start-up cost).
// Usage: npx tsc -p . && node bench/chat-run.mjs [--jobs 1000] [--concurrency 32]
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const WORK = join(ROOT, 'bench', '.work', 'chat-run');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const JOBS = arg('--jobs', 1000);
const CONCURRENCY = arg('--concurrency', 32);
const KEY = 'sk-bench-chat-key';

rmSync(WORK, { recursive: true, force: true });
mkdirSync(WORK, { recursive: true });

function startSandbox() {
  const child = spawn(process.execPath, [join(ROOT, 'bin', 'genbatch.js'), 'sandbox', '--port', '0', '--keys', `${KEY}=100000000`, '--seed', '1'], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((res, rej) => {
    let out = '';
    child.on('exit', (c) => rej(new Error(`sandbox exited ${c}`)));
    child.stdout.on('data', (d) => {
      out += d;
      const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
      if (url) res({ url, child });
    });
  });
}

/** The CLI in a measured child (bench/run.measure.mjs): its usage line plus stdout. */
function measured(args) {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, [join(ROOT, 'bench', 'run.measure.mjs'), ...args], {
      cwd: ROOT,
      env: { ...process.env, GENBATCH_API_KEY: KEY },
      stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
    });
    let usage = '';
    let err = '';
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stdio[3].on('data', (d) => (usage += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', rej);
    child.on('close', () => {
      try {
        res({ ...JSON.parse(usage.trim()), stdout: out, stderr: err });
      } catch {
        rej(new Error(`no usage line; stderr: ${err.slice(0, 2000)}`));
      }
    });
  });
}

const PROTOCOLS = [
  ['chat-completions', 'vendora/chat-5-mini'],
  ['responses', 'vendora/chat-5'],
  ['messages', 'vendorb/verse-4.5-fast'],
  ['gemini', 'vendorc/lumen-2.5-flash'],
];

function manifest(path, n) {
  const lines = ['pricing:', ...PROTOCOLS.map(([, m]) => `  ${m}: 0.05`), 'jobs:'];
  for (let i = 0; i < n; i++) {
    const [protocol, model] = PROTOCOLS[i % PROTOCOLS.length];
    lines.push(
      `  - id: c${i}`,
      `    model: ${model}`,
      `    protocol: ${protocol}`,
      '    input:',
      '      stream: true',
      '      messages:',
      '        - {role: system, content: "You write one-line image captions."}',
      `        - {role: user, content: "Caption number ${i}: a lighthouse on a cliff at dusk, oil painting"}`,
    );
  }
  writeFileSync(path, lines.join('\n') + '\n');
}

const fmt = (x, d = 2) => Number(x).toFixed(d);
const sb = await startSandbox();
try {
  const runOnce = async (name, n) => {
    const m = join(WORK, `${name}.yaml`);
    manifest(m, n);
    const out = join(WORK, `${name}-out`);
    const u = await measured(['run', m, '--base-url', sb.url, '--out', out, '--concurrency', String(CONCURRENCY), '--json']);
    if (u.exit !== 0) throw new Error(`run ${name} exited ${u.exit}: ${u.stderr.slice(0, 2000)}`);
    const events = u.stdout.trim().split('\n').map((l) => JSON.parse(l));
    const ts = (pred) => events.filter(pred).map((e) => Date.parse(e.ts));
    const first = Math.min(...ts((e) => e.type === 'job' && e.to === 'submitting'));
    const last = Math.max(...ts((e) => e.type === 'job' && e.to === 'done'));
    const done = events.filter((e) => e.type === 'job' && e.to === 'done').length;
    return { ...u, done, callSpan: (last - first) / 1000, out };
  };
  const base = await runOnce('one', 1);
  const r = await runOnce('run', JOBS);
  const cpu = r.user_s + r.sys_s;
  const baseCpu = base.user_s + base.sys_s;
  const report = JSON.parse(readFileSync(join(r.out, 'report.json'), 'utf8'));
  console.log(`chat run of ${JOBS} jobs, stream on, 4 protocols, concurrency ${CONCURRENCY}, sandbox in another process`);
  console.log(`  done ${r.done}/${JOBS}, exit ${r.exit}, repeated calls ${report.summary.chat?.repeated_calls}, tokens in/out ${report.summary.chat?.input_tokens}/${report.summary.chat?.output_tokens}`);
  console.log(`  wall ${fmt(r.wall_s)} s (start-up, validation, calls, reports): ${fmt(JOBS / r.wall_s, 0)} jobs/s`);
  console.log(`  first call to last done ${fmt(r.callSpan)} s: ${fmt(JOBS / r.callSpan, 0)} jobs/s`);
  console.log(`  runner CPU ${fmt(cpu)} s (user ${fmt(r.user_s)}, sys ${fmt(r.sys_s)}), peak RSS ${fmt(r.max_rss_mb, 0)} MB`);
  console.log(`  runner CPU per job: ${fmt((cpu * 1000) / JOBS)} ms (whole process); ${fmt(((cpu - baseCpu) * 1000) / (JOBS - 1))} ms marginal (a 1-job run costs ${fmt(baseCpu)} s)`);
} finally {
  sb.child.kill('SIGTERM');
}
