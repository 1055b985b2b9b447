// The least CPU one job of `genbatch run` can cost on this machine, with no genbatch code: a
// straight-line program doing only the work issue #4 requires of each job, in its cheapest form,
// against a plain HTTP server in another process (numbers printed; no pass/fail).
//
// Per job, "required" (a strict lower bound: anything genbatch does beyond it can only add CPU):
//   HTTP    submit POST, one status GET, one file GET (5.6 KB body), keep-alive, 32 in flight
//   SQLite  3 transactions on a WAL database under synchronous=NORMAL (intent, task id, done + file row),
//           no fsync at all (the runner fsyncs the WAL once per group of intents/task ids)
//   files   mkdir out/<job id>; the file: create, write, fsync, rename into place;
//           result.json: create, write, rename (no fsync)
// "as the runner keeps it" adds the durability the runner keeps: the WAL fsynced once per event-loop
// turn of commits, result.json fsynced, the job folder fsynced after the renames.
// Usage: node bench/floor-job.mjs [--jobs 3000] [--repeat 2]
import { fork } from 'node:child_process';
import { closeSync, fsync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Pool } from 'undici';
import Database from 'better-sqlite3';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const FILE = Buffer.alloc(5641, 7);

if (process.argv[2] === 'server') {
  const http = await import('node:http');
  const submit = JSON.stringify({ code: 200, msg: 'success', data: { task_id: 'x'.repeat(32) } });
  const status = JSON.stringify({ code: 200, msg: 'success', data: { task_id: 'x'.repeat(32), status: 'finished', files: [{ file_url: 'http://h/f/1.png', file_type: 'image', file_size: FILE.length }] } });
  http
    .createServer((q, r) => {
      q.resume();
      q.on('end', () => {
        if (q.url.startsWith('/f/')) {
          r.writeHead(200, { 'content-type': 'image/png', 'content-length': FILE.length });
          r.end(FILE);
        } else {
          r.writeHead(200, { 'content-type': 'application/json' });
          r.end(q.method === 'POST' ? submit : status);
        }
      });
    })
    .listen(0, '127.0.0.1', function () {
      process.send(this.address().port);
    });
} else {
  const N = arg('--jobs', 3000);
  const REPEAT = arg('--repeat', 2);
  const fsyncP = promisify(fsync);
  const server = fork(import.meta.filename, ['server']);
  const port = await new Promise((r) => server.once('message', r));

  async function run(n, full) {
    const dir = mkdtempSync(join(tmpdir(), 'genbatch-floor-job-'));
    const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 32 });
    const db = new Database(join(dir, 'state.db'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec('CREATE TABLE jobs (id TEXT PRIMARY KEY, state TEXT NOT NULL, task_id TEXT, attempts INTEGER NOT NULL DEFAULT 0, updated INTEGER)');
    db.exec('CREATE TABLE files (job_id TEXT NOT NULL, path TEXT NOT NULL, size INTEGER, sha256 TEXT, PRIMARY KEY (job_id, path))');
    const add = db.prepare("INSERT INTO jobs (id, state) VALUES (?, 'pending')");
    db.transaction(() => {
      for (let i = 0; i < n; i++) add.run(`j${i}`);
    })();
    const move = db.prepare('UPDATE jobs SET state = ?, task_id = coalesce(?, task_id), attempts = attempts + ?, updated = ? WHERE id = ? AND state = ?');
    const addFile = db.prepare('INSERT INTO files VALUES (?, ?, ?, ?)');
    const tx = (f) => db.transaction(f);
    const intent = tx((id) => move.run('submitting', null, 1, Date.now(), id, 'pending'));
    const taskId = tx((id, t) => move.run('submitted', t, 0, Date.now(), id, 'submitting'));
    const done = tx((id, size) => {
      move.run('done', null, 0, Date.now(), id, 'submitted');
      addFile.run(id, 'a.png', size, 'f'.repeat(64));
    });
    // The runner's group commit: one fsync of the WAL per event-loop turn that committed something.
    let walSync = null;
    const durable = () => {
      if (!full) return Promise.resolve();
      walSync ??= new Promise((r) => setImmediate(r)).then(async () => {
        walSync = null;
        const fd = openSync(join(dir, 'state.db-wal'), 'r+');
        await fsyncP(fd);
        closeSync(fd);
      });
      return walSync;
    };
    const out = join(dir, 'out');
    mkdirSync(out);
    const json = async (p) => (await p).body.json();
    const job = async (i) => {
      const id = `j${i}`;
      intent(id);
      await durable();
      const sub = await json(pool.request({ path: '/api/generate/submit', method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"model":"alpha-image-2","input":{"prompt":"Bench picture ${i}"}}` }));
      taskId(id, sub.data.task_id);
      await durable();
      await json(pool.request({ path: `/api/generate/status?task_id=${sub.data.task_id}`, method: 'GET' }));
      const res = await pool.request({ path: '/f/1.png', method: 'GET' });
      const body = Buffer.from(await res.body.arrayBuffer());
      const folder = join(out, id);
      mkdirSync(folder);
      const fd = openSync(join(folder, '.a.png.part'), 'wx');
      writeSync(fd, body);
      await fsyncP(fd);
      closeSync(fd);
      renameSync(join(folder, '.a.png.part'), join(folder, 'a.png'));
      const rd = openSync(join(folder, '.result.json.part'), 'wx');
      writeSync(rd, JSON.stringify({ task_id: sub.data.task_id, model: 'alpha-image-2', files: [{ path: 'a.png', size: body.length, sha256: 'f'.repeat(64) }] }, null, 2));
      if (full) await fsyncP(rd);
      closeSync(rd);
      renameSync(join(folder, '.result.json.part'), join(folder, 'result.json'));
      if (full) {
        const dd = openSync(folder, 'r');
        await fsyncP(dd);
        closeSync(dd);
      }
      done(id, body.length);
    };
    const c = process.cpuUsage();
    let next = 0;
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < n) await job(next++);
    }));
    const d = process.cpuUsage(c);
    db.close();
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
    return (d.user + d.system) / 1000 / n; // ms per job
  }

  await run(500, true); // warm-up: V8 compiles the hot paths before anything is measured
  for (const [full, label] of [[false, 'required work only (strict lower bound)'], [true, 'with the durability the runner keeps']]) {
    const ms = [];
    for (let r = 0; r < REPEAT; r++) ms.push(await run(N, full));
    const least = Math.min(...ms);
    console.log(`${label.padEnd(42)} ${least.toFixed(3)} ms CPU per job = ${least.toFixed(2)} s per 1,000 jobs (runs: ${ms.map((x) => x.toFixed(3)).join(', ')})`);
  }
  server.kill();
  // What no run can avoid before its first job: an empty node process, start to exit.
  const { execFileSync } = await import('node:child_process');
  const starts = Array.from({ length: 5 }, () => {
    const u = JSON.parse(execFileSync(process.execPath, ['-e', "process.on('exit',()=>{const u=process.resourceUsage();console.log(JSON.stringify((u.userCPUTime+u.systemCPUTime)/1000))})"], { encoding: 'utf8' }));
    return u;
  });
  console.log(`${'an empty node process (start to exit)'.padEnd(42)} ${Math.min(...starts).toFixed(0)} ms CPU`);
}
