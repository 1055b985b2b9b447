#!/usr/bin/env node
/**
 * Manifest benchmark: validate + estimate throughput and peak RSS on a
 * generated 100,000-row CSV; the same jobs as a YAML job list (block style, as
 * the yaml package and PyYAML write one, and flow style) and as JSONL,
 * validated side by side; and `estimate --offline` on the PartiPrompts
 * manifest (1632 jobs); and mappings of 20,000 keys (in a job's input, at the
 * root). Needs a build first: `npx tsc -p .`.
 *
 *   node bench/manifest.mjs [rows] [--rounds 3] [--wide 20000]   (default 100000 rows)
 *
 * Every measurement runs in a fresh node process so its peak RSS is its own.
 * Targets: >= 50,000 jobs/s, <= 200 MB peak RSS; a YAML job list or JSONL
 * validates in at most 2.5x the time of the same jobs as CSV, within 200 MB;
 * PartiPrompts estimate < 2 s; a mapping of 20,000 keys well under 1 s.
 */
import { spawnSync } from 'node:child_process';
import { createWriteStream, mkdtempSync, rmSync, existsSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const dist = (p) => pathToFileURL(join(root, 'dist', p)).href;

if (process.argv[2] === '--child') {
  const [mode, file] = process.argv.slice(3);
  const { openManifest, validateManifest } = await import(dist('manifest/index.js'));
  const { estimate } = await import(dist('pricing/index.js'));
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  let jobs = 0;
  let problems = 0;
  if (mode === 'validate') {
    const r = await validateManifest(file);
    jobs = r.jobs;
    problems = r.problems.length;
  } else if (mode === 'estimate') {
    const m = await openManifest(file);
    const e = await estimate(m.jobs(), m.pricing);
    jobs = e.jobs_count;
    problems = e.problems.length + m.problems.length;
  } else {
    const r = await validateManifest(file);
    const m = await openManifest(file);
    const e = await estimate(m.jobs(), m.pricing);
    jobs = e.jobs_count;
    problems = r.problems.length;
  }
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(JSON.stringify({ jobs, problems, ms, cpuMs: (cpu.user + cpu.system) / 1000, rssMB: process.resourceUsage().maxRSS / 1024 }) + '\n');
  process.exit(0);
}

if (!existsSync(join(root, 'dist', 'manifest', 'index.js'))) {
  console.error('build first: npx tsc -p .');
  process.exit(2);
}

const flag = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const rows = Number(/^\d+$/.test(process.argv[2] ?? '') ? process.argv[2] : 100_000);
// --rounds N: rounds of each timed comparison (default 3, the least kept); --wide N: keys of the wide mappings (default 20,000).
const ROUNDS = flag('--rounds', 3);
const WIDE = flag('--wide', 20_000);
const dir = mkdtempSync(join(tmpdir(), 'genbatch-bench-'));
const csv = join(dir, 'jobs.csv');

/** Job i of the generated manifests: the same jobs in every format. */
function job(i) {
  const sizes = ['1:1', '16:9', '9:16', '4:3', '2048x1536', 'auto'];
  const res = ['1K', '2K', '4K'];
  const quality = ['low', 'medium', 'high'];
  const size = sizes[i % sizes.length];
  return { id: `job-${i}`, model: 'alpha-image-2', prompt: `Prompt number ${i}: a "quoted" lighthouse, watercolor`, quality: quality[i % 3], size, resolution: size === '2048x1536' ? '2K' : res[i % res.length] };
}

/** Writes `head` and then line(i) for every job, with backpressure. */
async function writeJobs(file, head, line) {
  const out = createWriteStream(file);
  out.write(head);
  for (let i = 1; i <= rows; i++) if (!out.write(line(job(i)))) await new Promise((ok) => out.once('drain', ok));
  await new Promise((ok) => out.end(ok));
}

const writeCsv = () =>
  writeJobs(csv, 'id,model,input.prompt,input.quality,input.size,input.resolution\n', (j) => `${j.id},${j.model},"${j.prompt.replaceAll('"', '""')}",${j.quality},${j.size},${j.resolution}\n`);
/** Block style, as `yaml.stringify` writes a job list (PyYAML's differs only in list indentation). */
const writeYamlBlock = (file) =>
  writeJobs(file, 'jobs:\n', (j) => `  - id: ${j.id}\n    model: ${j.model}\n    input:\n      prompt: '${j.prompt}'\n      quality: ${j.quality}\n      size: ${j.size}\n      resolution: ${j.resolution}\n`);
/** Flow style, one line of input per job (as a hand-written manifest often has it). */
const writeYamlFlow = (file) =>
  writeJobs(file, 'jobs:\n', (j) => `  - id: ${j.id}\n    model: ${j.model}\n    input: {prompt: ${JSON.stringify(j.prompt)}, quality: ${j.quality}, size: "${j.size}", resolution: ${j.resolution}}\n`);
const writeJsonl = (file) =>
  writeJobs(file, '', (j) => `${JSON.stringify({ id: j.id, model: j.model, input: { prompt: j.prompt, quality: j.quality, size: j.size, resolution: j.resolution } })}\n`);

function child(mode, file) {
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url), '--child', mode, file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`child ${mode} failed: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

/** Wall time of a CLI command (node startup included) and its peak RSS. */
function cli(args) {
  const hook = 'data:text/javascript,process.on("exit",()=>process.stderr.write("\\nRSS_KB="+process.resourceUsage().maxRSS+"\\n"))';
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ['--import', hook, join(root, 'bin', 'genbatch.js'), ...args], { encoding: 'utf8', maxBuffer: 1 << 28 });
  const ms = performance.now() - t0;
  const rss = Number(/RSS_KB=(\d+)/.exec(r.stderr)?.[1] ?? NaN) / 1024;
  return { status: r.status, ms, rssMB: rss, out: r.stdout };
}

const fmt = (n) => Math.round(n).toLocaleString('en-US');
try {
  const t0 = performance.now();
  await writeCsv();
  console.log(`generated ${fmt(rows)} rows in ${fmt(performance.now() - t0)} ms (${csv})`);
  // estimate() checks every job as it prices it (one pass: what `genbatch estimate` does);
  // 'validate+estimate' runs validateManifest and then estimate (two passes over the file).
  for (const mode of ['validate', 'estimate', 'validate+estimate']) {
    const r = child(mode, csv);
    console.log(`api ${mode.padEnd(17)} ${fmt(r.jobs)} jobs, ${r.problems} problems, ${fmt(r.ms)} ms, ${fmt(r.jobs / (r.ms / 1000))} jobs/s, peak RSS ${r.rssMB.toFixed(0)} MB`);
  }
  // The same rows through a YAML rows source with templates.
  const yaml = join(dir, 'rows.yaml');
  writeFileSync(yaml, 'jobs:\n  - id: "{{id}}"\n    rows: {file: jobs.csv}\n    model: "{{model}}"\n    input: {prompt: "{{input.prompt}}", quality: "{{input.quality}}", size: "{{input.size}}", resolution: "{{input.resolution}}"}\n');
  const ry = child('estimate', yaml);
  console.log(`api estimate (YAML rows source) ${fmt(ry.jobs)} jobs, ${ry.problems} problems, ${fmt(ry.ms)} ms, ${fmt(ry.jobs / (ry.ms / 1000))} jobs/s, peak RSS ${ry.rssMB.toFixed(0)} MB`);
  // The same jobs as a YAML job list (not rows/matrix) and as JSONL, validated side by side with the CSV.
  const block = join(dir, 'list.yaml');
  const flow = join(dir, 'flow.yaml');
  const jsonl = join(dir, 'jobs.jsonl');
  await writeYamlBlock(block);
  await writeYamlFlow(flow);
  await writeJsonl(jsonl);
  // Three rounds, the formats interleaved; each format's best wall time (the machine is shared: a round can
  // take another process's load), its CPU time in that run, and its highest peak RSS over the rounds.
  const formats = [['CSV', csv], ['YAML list (block)', block], ['YAML list (flow)', flow], ['JSONL', jsonl]];
  const best = new Map();
  for (let round = 0; round < ROUNDS; round++) {
    for (const [label, file] of formats) {
      const r = child('validate', file);
      const b = best.get(label);
      best.set(label, !b ? r : { ...(r.ms < b.ms ? r : b), rssMB: Math.max(r.rssMB, b.rssMB) });
    }
  }
  const base = best.get('CSV');
  for (const [label] of formats) {
    const r = best.get(label);
    console.log(`api validate ${label.padEnd(17)} ${fmt(r.jobs)} jobs, ${r.problems} problems, best of ${ROUNDS} ${fmt(r.ms)} ms (${(r.ms / base.ms).toFixed(2)}x CSV), CPU ${fmt(r.cpuMs)} ms (${(r.cpuMs / base.cpuMs).toFixed(2)}x CSV), ${fmt(r.jobs / (r.ms / 1000))} jobs/s, peak RSS ${r.rssMB.toFixed(0)} MB`);
  }
  for (const cmd of [['validate', csv], ['estimate', '--offline', csv]]) {
    const r = cli(cmd);
    console.log(`cli ${cmd.join(' ').replace(csv, 'jobs.csv').padEnd(27)} exit ${r.status}, ${fmt(r.ms)} ms wall (node startup included), ${fmt(rows / (r.ms / 1000))} jobs/s, peak RSS ${r.rssMB.toFixed(0)} MB`);
  }
  const parti = join(root, 'manifests', 'parti.yaml');
  const runs = Array.from({ length: ROUNDS }, () => cli(['estimate', '--offline', parti]));
  const parti3 = runs.reduce((a, b) => (a.ms < b.ms ? a : b));
  console.log(`cli estimate --offline manifests/parti.yaml: exit ${parti3.status}, best of ${ROUNDS} ${fmt(parti3.ms)} ms wall, peak RSS ${parti3.rssMB.toFixed(0)} MB (${parti3.out.trim().split('\n').find((l) => l.startsWith('total')) ?? ''})`);
  // Wide mappings: 20,000 keys in one job's input, and 20,000 unknown keys at the root (each a problem with its
  // line). Target: well under a second each (the yaml library's own duplicate check made them 5 s and 29 s).
  const keys = Array.from({ length: WIDE }, (_, i) => `k${i}: v\n`);
  const wide = { [`input (${fmt(WIDE)} keys)`]: `jobs:\n  - id: a\n    model: dream-4\n    input:\n      prompt: hi\n${keys.map((k) => `      ${k}`).join('')}`, [`root (${fmt(WIDE)} keys)`]: `${keys.join('')}jobs:\n  - id: a\n    model: dream-4\n    input:\n      prompt: hi\n` };
  for (const [label, text] of Object.entries(wide)) {
    const file = join(dir, 'wide.yaml');
    writeFileSync(file, text);
    const r = Array.from({ length: ROUNDS }, () => child('validate', file)).reduce((a, b) => (a.ms < b.ms ? a : b));
    console.log(`api validate wide mapping, ${label.padEnd(19)} ${r.problems} problems, best of ${ROUNDS} ${fmt(r.ms)} ms, CPU ${fmt(r.cpuMs)} ms`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
