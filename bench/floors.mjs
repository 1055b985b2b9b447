// The floors under the runner's per-job CPU on this machine (numbers printed; no pass/fail):
//  1. raw undici requests against a local keep-alive server in another process (no genbatch code):
//     what each of a job's 3 HTTP exchanges costs at the least
//  2. the file-system calls a job's results need (mkdir, create+write+close, fsync, rename, folder fsync)
// Usage: node bench/floors.mjs [--requests 5000] [--files 2000]
import { fork } from 'node:child_process';
import { closeSync, fsyncSync, mkdirSync, mkdtempSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Pool } from 'undici';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};

if (process.argv[2] === 'server') {
  const http = await import('node:http');
  const body = JSON.stringify({ code: 200, data: { task_id: 'x'.repeat(32), status: 'finished', files: [] } });
  http
    .createServer((q, r) => {
      q.resume();
      q.on('end', () => {
        r.writeHead(200, { 'content-type': 'application/json' });
        r.end(body);
      });
    })
    .listen(0, '127.0.0.1', function () {
      process.send(this.address().port);
    });
} else {
  const N = arg('--requests', 5000);
  const server = fork(import.meta.filename, ['server']);
  const port = await new Promise((r) => server.once('message', r));
  const pool = new Pool(`http://127.0.0.1:${port}`, { connections: 32 });
  const cpu = async (label, n, one) => {
    for (let i = 0; i < 300; i++) await one(i); // warm-up
    const c = process.cpuUsage();
    let i = 0;
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (i < n) await one(i++);
    }));
    const d = process.cpuUsage(c);
    console.log(`${label.padEnd(44)} ${((d.user + d.system) / n).toFixed(1)} us CPU each`);
  };
  await cpu('undici Pool.request GET + JSON body', N, async () => (await pool.request({ path: '/status/1', method: 'GET' })).body.json());
  await cpu('undici Pool.request POST + JSON body', N, async () =>
    (await pool.request({ path: '/submit', method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"model":"m","input":{"prompt":"p"}}' })).body.json(),
  );
  await pool.close();
  server.kill();

  const F = arg('--files', 2000);
  const dir = mkdtempSync(join(tmpdir(), 'genbatch-floors-'));
  const fsCpu = (label, f) => {
    const c = process.cpuUsage();
    for (let i = 0; i < F; i++) f(i);
    const d = process.cpuUsage(c);
    console.log(`${label.padEnd(44)} ${((d.user + d.system) / F).toFixed(1)} us CPU each (sys ${(d.system / F).toFixed(1)})`);
  };
  const data = Buffer.alloc(5641, 7);
  fsCpu('mkdir of a job folder', (i) => mkdirSync(join(dir, `d${i}`)));
  fsCpu('create + write 5.6 KB + close', (i) => {
    const fd = openSync(join(dir, `d${i}`, 'a.part'), 'wx');
    writeSync(fd, data);
    closeSync(fd);
  });
  fsCpu('fsync of that file', (i) => {
    const fd = openSync(join(dir, `d${i}`, 'a.part'), 'r+');
    fsyncSync(fd);
    closeSync(fd);
  });
  fsCpu('rename into place', (i) => renameSync(join(dir, `d${i}`, 'a.part'), join(dir, `d${i}`, 'a.png')));
  fsCpu('fsync of the folder', (i) => {
    const fd = openSync(join(dir, `d${i}`), 'r');
    fsyncSync(fd);
    closeSync(fd);
  });
  rmSync(dir, { recursive: true, force: true });
}
