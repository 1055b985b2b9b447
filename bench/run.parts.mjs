// CPU per job of the three per-job parts of `genbatch run`, each alone in this process
// (numbers printed; no pass/fail). Explains the per-job cost that bench/run.js reports.
//  1. client: submit + status through the real ServiceClient (retry layer, limits, zod),
//     against a plain HTTP server in another process that answers like the service
//  2. store: the state changes of one job (intent and task id through GroupCommit,
//     downloading with its file rows, done with the file recorded), real SQLite file
//  3. files: one 5.6 KB result downloaded by the real downloader (temp file, size check,
//     sha256, fsync, link), result.json written atomically, one folder fsync
// Usage: npm run build && node bench/run.parts.mjs [--jobs 2000] [--only client|store|files]
import http from 'node:http';
import { fork } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const WORK = join(ROOT, 'bench', '.work', 'parts');
const i = process.argv.indexOf('--jobs');
const N = i > 0 ? Number(process.argv[i + 1]) : 2000;
// --only client|store|files: one part alone (e.g. under node --cpu-prof).
const oi = process.argv.indexOf('--only');
const ONLY = oi > 0 ? process.argv[oi + 1] : null;
const part = (name) => ONLY === null || ONLY === name;

if (process.argv[2] === 'server') {
  const file = Buffer.alloc(5641, 7);
  const task = (id) =>
    JSON.stringify({
      code: 200,
      data: { task_id: id, status: 'finished', created_time: new Date().toISOString(), progress: 100, error_message: null, files: [{ file_url: `http://127.0.0.1:${port()}/files/${id}/image-1.png`, file_type: 'image', format: 'png', content_type: 'image/png', file_name: 'image-1.png', file_size: file.length }] },
    });
  let srv;
  const port = () => srv.address().port;
  let n = 0;
  srv = http.createServer((req, res) => {
    if (req.url.startsWith('/files/')) {
      res.setHeader('content-type', 'image/png');
      res.setHeader('content-length', file.length);
      return res.end(file);
    }
    res.setHeader('content-type', 'application/json');
    if (req.method === 'POST') {
      req.resume();
      return req.on('end', () => res.end(JSON.stringify({ code: 200, data: { task_id: `t${++n}`, status: 'not_started', created_time: new Date().toISOString() } })));
    }
    res.end(task(req.url.split('/').pop()));
  });
  srv.listen(0, '127.0.0.1', () => process.send(port()));
} else {
  const { ServiceClient } = await import('../dist/client/index.js');
  const { downloadFile, fsyncDir } = await import('../dist/download/index.js');
  const { writeFileAtomic } = await import('../dist/engine/files.js');
  const { Root } = await import('../dist/lib/root.js');
  const { GroupCommit } = await import('../dist/store/group-commit.js');
  const { Store } = await import('../dist/store/index.js');

  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  const server = fork(new URL(import.meta.url).pathname, ['server']);
  const port = await new Promise((r) => server.on('message', r));
  const base = `http://127.0.0.1:${port}`;

  /** Runs `one(i)` for i < n, 32 at once; returns CPU microseconds per call (user, sys). */
  const measure = async (n, one) => {
    const c0 = process.cpuUsage();
    let next = 0;
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < n) await one(next++);
    }));
    const c = process.cpuUsage(c0);
    return { all: (c.user + c.system) / n, user: c.user / n, sys: c.system / n };
  };
  const show = (name, r) => console.log(`  ${name.padEnd(58)} ${(r.all / 1000).toFixed(3)} ms CPU per job (user ${(r.user / 1000).toFixed(3)}, sys ${(r.sys / 1000).toFixed(3)})`);

  // 1. client
  if (part('client')) {
  const client = new ServiceClient({ baseUrl: base, apiKey: 'sk-parts', statusRatePerSec: 1e6, policy: { baseMs: 10, maxMs: 100, maxAttempts: 3 } });
  const callOnce = async () => {
    const { task_id } = await client.submit({ model: 'alpha-image-2', input: { prompt: 'Bench picture' } });
    await client.status(task_id);
  };
  await measure(300, callOnce); // warm-up (JIT), as a long run is
  show('client: submit + status (2 HTTP calls)', await measure(N, callOnce));
  await client.close();
  }

  // 2. store
  if (part('store')) {
  const store = Store.openForWrite(join(WORK, 'state.db'));
  store.openRun(join(WORK, 'm.yaml'), WORK, base, false, false);
  store.beginSync();
  const spec = JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'Bench picture' }, refs: [] });
  for (let j = 0; j < N + 300; j++) store.syncJob({ id: `b${j}`, model: 'alpha-image-2', kind: 'generate', where: `m.yaml:${j}`, specHash: `h${j}`, spec, estimatedCredits: 1 });
  store.commitSync();
  store.skipRemoved();
  const group = new GroupCommit(store);
  const result = JSON.stringify({ task_id: 't', status: 'finished', files: [{ file_url: `${base}/files/t/image-1.png`, file_type: 'image', file_size: 5641 }] });
  const states = async (j) => {
    const id = `b${j}`;
    await group.commit(() => store.transition(id, 'pending', 'submitting', { attemptsInc: 1, submitted_input: '{"prompt":"Bench picture"}', submitted_at: new Date().toISOString(), last_error: null }));
    await group.commit(() => store.transition(id, 'submitting', 'submitted', { task_id: `t${j}` }));
    store.transition(id, 'submitted', 'downloading', { result, finished_at: new Date().toISOString(), expires_at: Date.now() }, () =>
      store.addFiles(id, [{ idx: 0, name: 'image-1.png', url: `${base}/files/t/image-1.png`, type: 'image', content_type: 'image/png', expected_size: 5641, expires_at: 1 }]),
    );
    store.filesOf(id);
    store.transition(id, 'downloading', 'done', {}, () => store.fileDone(id, 0, { path: `${id}/image-1.png`, size: 5641, sha256: 'a'.repeat(64), content_type: 'image/png' }));
  };
  let k = 0;
  await measure(300, () => states(k++));
  show('store: 4 state changes (2 durable, grouped) + file rows', await measure(N, () => states(k++)));
  store.close();
  }

  // 3. files
  if (part('files')) {
  mkdirSync(join(WORK, 'out'), { recursive: true });
  // result.json is written as the pipeline writes it: through the output folder's Root (src/lib/root.ts).
  const out = Root.open(join(WORK, 'out'));
  const fetchOne = async (j) => {
    const dir = join(WORK, 'out', `b${j}`);
    mkdirSync(dir, { recursive: true });
    await downloadFile({ url: `${base}/files/t${j}/image-1.png`, dir, name: 'image-1.png', expectedSize: 5641, dirExists: true, deferDirSync: true });
    await writeFileAtomic(out, `b${j}/result.json`, JSON.stringify({ job_id: `b${j}`, files: [] }, null, 2) + '\n');
    await fsyncDir(dir);
  };
  let f = 0;
  await measure(300, () => fetchOne(f++));
  show('files: GET + temp file + sha256 + fsync + link, result.json, dir fsync', await measure(N, () => fetchOne(f++)));
  }
  server.kill();
}
