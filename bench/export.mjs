#!/usr/bin/env node
// Benchmark of `genbatch export` (numbers printed; no pass/fail): a run of --jobs done jobs (default 10,000,
// one image each) exported to a fresh folder, to the same folder again (every file kept: hashed, not copied),
// and to a bucket in s3rver (each file streamed up). The run is made once: one job run against the in-process
// sandbox, then its rows and its file cloned in the state (the files hard links of the one image), so the
// bench measures the export alone. Wall seconds of the CLI each time.
// Before/after: --bin PATH runs another build's bin/genbatch.js on the same run (e.g. one built from main).
// Usage: npm run build && node bench/export.mjs [--jobs 10000] [--bin /path/to/bin/genbatch.js] [--no-s3]
import { spawn } from 'node:child_process';
import { linkSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import S3rver from 's3rver';

const ROOT = resolve(import.meta.dirname, '..');
const WORK = mkdtempSync(join(tmpdir(), 'genbatch-bench-export-'));
process.on('exit', () => rmSync(WORK, { recursive: true, force: true }));
const opt = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const JOBS = Number(opt('--jobs', '10000'));
const BINS = [join(ROOT, 'bin', 'genbatch.js'), ...(opt('--bin', null) ? [resolve(opt('--bin'))] : [])];
const S3 = !process.argv.includes('--no-s3');

function cli(bin, args, env = {}) {
  return new Promise((res, rej) => {
    const t0 = performance.now();
    const child = spawn(process.execPath, [bin, ...args], { cwd: WORK, env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('close', (code) => (code === 0 ? res({ s: (performance.now() - t0) / 1000, out }) : rej(new Error(`${args.join(' ')}: exit ${code}\n${out.slice(-2000)}`))));
  });
}

// One job, run against the in-process sandbox.
const manifest = join(WORK, 'm.yaml');
writeFileSync(manifest, 'jobs:\n  - id: j-00000\n    model: alpha-image-2\n    input:\n      prompt: "a quiet harbour"\n');
const out = join(WORK, 'out');
await cli(BINS[0], ['run', manifest, '--sandbox', '--yes', '--out', out]);

// Cloned to JOBS jobs: rows through SQL, the files as hard links of the first job's.
const db = new Database(join(out, 'state.db'));
const files = db.prepare(`SELECT path FROM files WHERE job_id = 'j-00000'`).pluck().all();
const cols = (t) => db.prepare('SELECT name FROM pragma_table_info(?)').pluck().all(t);
const ids = `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${JOBS - 1})`;
const idOf = `'j-' || substr('0000' || n.i, -5)`;
const select = (t) => cols(t).map((c) => (c === 'id' || c === 'job_id' ? idOf : c === 'seq' ? 'n.i + 1' : c === 'path' ? `replace(path, 'j-00000', ${idOf})` : `"${c}"`)).join(', ');
db.exec(`${ids} INSERT INTO jobs SELECT ${select('jobs')} FROM jobs, n WHERE jobs.id = 'j-00000'`);
db.exec(`${ids} INSERT INTO files SELECT ${select('files')} FROM files, n WHERE files.job_id = 'j-00000'`);
db.close();
for (let i = 1; i < JOBS; i++) {
  const id = `j-${String(i).padStart(5, '0')}`;
  mkdirSync(join(out, id));
  for (const f of files) linkSync(join(out, f), join(out, f.replace('j-00000', id)));
}

let bucket = null;
if (S3) {
  const server = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: join(WORK, 's3rver'), configureBuckets: [{ name: 'bench' }] });
  const { port } = await server.run();
  bucket = {
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

console.log(`export of ${JOBS} jobs (${JOBS * files.length} files), wall seconds`);
console.log(['build', 'to a folder', 'again (kept)', ...(S3 ? ['to s3rver'] : [])].join('\t'));
for (const [b, bin] of BINS.entries()) {
  const to = join(WORK, `export-${b}`);
  const fresh = await cli(bin, ['export', '--out', out, '--to', to]);
  const again = await cli(bin, ['export', '--out', out, '--to', to]);
  const row = [bin, fresh.s.toFixed(2), again.s.toFixed(2)];
  if (bucket) row.push((await cli(bin, ['export', '--out', out, '--to', `s3://bench/export-${b}`], bucket.env)).s.toFixed(2));
  if (readdirSync(to).length < JOBS) throw new Error(`${to}: fewer than ${JOBS} job folders`);
  console.log(row.join('\t'));
}
await bucket?.stop();
