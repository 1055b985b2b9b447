#!/usr/bin/env node
// Sandbox benchmark: requests per second for submit+status with 100 concurrent
// clients, and the server's memory (RSS) holding 100,000 tasks.
// Build first (`npx tsc -p .`), then: node bench/sandbox.mjs [--seconds 10] [--clients 100] [--tasks 100000]
// The sandbox runs in a child process so its RSS is measured alone.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

const KEY = 'bench-key';
const FLASH = 'vendora/dream-v5.0-flash/text-to-image';

if (process.argv[2] === '--serve') {
  const { startSandbox } = await import('../dist/sandbox/index.js');
  const sb = await startSandbox({ keys: { [KEY]: 1e12 }, seed: 1, timeScale: Number(process.argv[3] ?? 1) });
  process.on('message', (m) => {
    if (m === 'rss') {
      globalThis.gc?.();
      process.send({ rss: process.memoryUsage().rss, heapUsed: process.memoryUsage().heapUsed });
    }
    if (m === 'stop') void sb.close().then(() => process.exit(0));
  });
  process.send({ url: sb.url });
} else {
  const arg = (name, dflt) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? Number(process.argv[i + 1]) : dflt;
  };
  const seconds = arg('--seconds', 10);
  const clients = arg('--clients', 100);
  const taskCount = arg('--tasks', 100_000);

  const serve = (scale = 1) =>
    new Promise((resolve) => {
      const child = fork(fileURLToPath(import.meta.url), ['--serve', String(scale)], { execArgv: ['--expose-gc'] });
      child.once('message', (m) => resolve({ child, url: m.url }));
    });
  const ask = (child, what) => new Promise((resolve) => { child.once('message', resolve); child.send(what); });
  const stop = (child) => new Promise((resolve) => { child.once('exit', resolve); child.send('stop'); });
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  const body = JSON.stringify({ model: FLASH, input: { prompt: 'a lighthouse on a cliff at dusk, oil painting', size: '16:9' } });

  async function submit(pool) {
    const r = await pool.request({ method: 'POST', path: '/api/generate/submit', headers, body });
    const j = await r.body.json();
    if (r.statusCode !== 200) throw new Error(`submit ${r.statusCode} ${JSON.stringify(j)}`);
    return j.data.task_id;
  }
  async function status(pool, id) {
    const r = await pool.request({ method: 'GET', path: `/api/generate/status/${id}`, headers });
    await r.body.json();
    if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}`);
  }

  // 1. Throughput: each client loops submit then status.
  {
    const { child, url } = await serve();
    const pool = new Pool(url, { connections: clients, pipelining: 1 });
    const warmEnd = Date.now() + 1000;
    let count = 0;
    let measuring = false;
    const end = warmEnd + seconds * 1000;
    const loop = async () => {
      while (Date.now() < end) {
        const id = await submit(pool);
        await status(pool, id);
        if (measuring) count += 2;
        else if (Date.now() >= warmEnd) measuring = true;
      }
    };
    const t0 = Date.now();
    await Promise.all(Array.from({ length: clients }, loop));
    const elapsed = (Date.now() - Math.max(t0, warmEnd)) / 1000;
    const { rss } = await ask(child, 'rss');
    console.log(`submit+status, ${clients} concurrent clients, ${seconds} s: ${Math.round(count / elapsed)} req/s (${count} requests; server RSS ${(rss / 1048576).toFixed(0)} MB)`);
    await pool.close();
    await stop(child);
  }

  // 2. Memory holding taskCount tasks (timeScale 1: all still in flight).
  {
    const { child, url } = await serve();
    const pool = new Pool(url, { connections: clients, pipelining: 1 });
    const base = await ask(child, 'rss');
    let next = 0;
    const t0 = Date.now();
    await Promise.all(Array.from({ length: clients }, async () => { while (next++ < taskCount) await submit(pool); }));
    const loaded = await ask(child, 'rss');
    console.log(`holding ${taskCount} tasks in flight: server RSS ${(loaded.rss / 1048576).toFixed(0)} MB (idle ${(base.rss / 1048576).toFixed(0)} MB; heap ${(loaded.heapUsed / 1048576).toFixed(0)} MB; loaded in ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    await pool.close();
    await stop(child);
  }

  // 3. Memory holding taskCount finished tasks whose results were read (file lists cached, bytes not kept).
  {
    const { child, url } = await serve(0.00001);
    const pool = new Pool(url, { connections: clients, pipelining: 1 });
    let next = 0;
    const t0 = Date.now();
    await Promise.all(Array.from({ length: clients }, async () => { while (next++ < taskCount) await status(pool, await submit(pool)); }));
    const loaded = await ask(child, 'rss');
    console.log(`holding ${taskCount} finished tasks, results read: server RSS ${(loaded.rss / 1048576).toFixed(0)} MB (heap ${(loaded.heapUsed / 1048576).toFixed(0)} MB; ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    await pool.close();
    await stop(child);
  }
}
