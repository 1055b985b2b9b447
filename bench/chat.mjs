#!/usr/bin/env node
// Chat benchmark: requests per second for streaming chat against the sandbox,
// per protocol (raw HTTP with undici, the whole stream read and its terminator
// checked), plus non-streaming Chat Completions and the openai SDK streaming.
// Build first (`npx tsc -p .`), then: node bench/chat.mjs [--seconds 5] [--clients 50]
// The sandbox runs in a child process, so client and server each get a core.
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';

const KEY = 'bench-chat-key';

if (process.argv[2] === '--serve') {
  const { startSandbox } = await import('../dist/sandbox/index.js');
  const sb = await startSandbox({ keys: { [KEY]: 1e12 }, seed: 1 });
  process.on('message', (m) => {
    if (m === 'stop') void sb.close().then(() => process.exit(0));
    if (m === 'cpu') process.send({ cpu: process.cpuUsage() });
  });
  process.send({ url: sb.url });
} else {
  const arg = (name, dflt) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? Number(process.argv[i + 1]) : dflt;
  };
  const seconds = arg('--seconds', 5);
  const clients = arg('--clients', 50);

  const child = fork(fileURLToPath(import.meta.url), ['--serve']);
  const { url } = await new Promise((resolve) => child.once('message', resolve));
  const prompt = 'Write a one-line caption for: a lighthouse on a cliff at dusk, oil painting';
  const json = { 'content-type': 'application/json' };
  const bearer = { ...json, authorization: `Bearer ${KEY}` };

  const cases = [
    {
      name: 'chat-completions stream',
      path: '/v1/chat/completions',
      headers: bearer,
      body: { model: 'vendora/chat-5', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: prompt }] },
      ends: 'data: [DONE]\n\n',
    },
    {
      name: 'responses stream',
      path: '/v1/responses',
      headers: bearer,
      body: { model: 'vendora/chat-5', stream: true, input: prompt },
      ends: '}\n\n',
      has: 'event: response.completed',
    },
    {
      name: 'messages stream',
      path: '/v1/messages',
      headers: { ...json, 'x-api-key': KEY },
      body: { model: 'vendorb/verse-4.5', max_tokens: 256, stream: true, messages: [{ role: 'user', content: prompt }] },
      ends: 'event: message_stop\ndata: {"type":"message_stop"}\n\n',
    },
    {
      name: 'gemini stream',
      path: '/v1beta/models/vendorc/lumen-2.5-flash:streamGenerateContent?alt=sse',
      headers: { ...json, 'x-goog-api-key': KEY },
      body: { contents: [{ role: 'user', parts: [{ text: prompt }] }] },
      ends: '\r\n\r\n',
      has: '"finishReason":"STOP"',
    },
    {
      name: 'chat-completions JSON',
      path: '/v1/chat/completions',
      headers: bearer,
      body: { model: 'vendora/chat-5', messages: [{ role: 'user', content: prompt }] },
      ends: '}',
    },
  ];

  const serverCpu = () =>
    new Promise((resolve) => {
      child.once('message', (m) => resolve(m.cpu.user + m.cpu.system));
      child.send('cpu');
    });

  async function loop(one) {
    const warmEnd = Date.now() + 500;
    while (Date.now() < warmEnd) await one();
    let count = 0;
    const server0 = await serverCpu();
    const t0 = process.hrtime.bigint();
    const cpu0 = process.cpuUsage();
    const end = Date.now() + seconds * 1000;
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (Date.now() < end) {
          await one();
          count++;
        }
      }),
    );
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    const server = (await serverCpu()) - server0;
    return { rps: count / wall, count, clientCpuUsPerReq: (cpu.user + cpu.system) / count, serverCpuUsPerReq: server / count };
  }

  const rows = [];
  for (const c of cases) {
    const pool = new Pool(url, { connections: clients, pipelining: 1 });
    const body = JSON.stringify(c.body);
    const one = async () => {
      const r = await pool.request({ method: 'POST', path: c.path, headers: c.headers, body });
      const text = await r.body.text();
      if (r.statusCode !== 200 || !text.endsWith(c.ends) || (c.has && !text.includes(c.has))) {
        throw new Error(`${c.name}: ${r.statusCode} ${text.slice(0, 200)}`);
      }
    };
    rows.push({ case: c.name, ...(await loop(one)) });
    await pool.close();
  }

  {
    const { default: OpenAI } = await import('openai');
    const client = new OpenAI({ apiKey: KEY, baseURL: `${url}/v1`, maxRetries: 0 });
    const one = async () => {
      const s = await client.chat.completions.create({ model: 'vendora/chat-5', stream: true, messages: [{ role: 'user', content: prompt }] });
      let text = '';
      for await (const chunk of s) text += chunk.choices[0]?.delta.content ?? '';
      if (!text.startsWith('Echo: ')) throw new Error(`openai sdk: ${text}`);
    };
    rows.push({ case: 'openai SDK chat stream', ...(await loop(one)) });
  }

  console.log(`chat bench: ${clients} concurrent clients, ${seconds} s per case, sandbox in a child process (node ${process.version})`);
  for (const r of rows) {
    console.log(`${r.case.padEnd(26)} ${r.rps.toFixed(0).padStart(6)} req/s  (${r.count} requests; CPU per request: server ${r.serverCpuUsPerReq.toFixed(0)} us, client ${r.clientCpuUsPerReq.toFixed(0)} us)`);
  }
  await new Promise((resolve) => {
    child.once('exit', resolve);
    child.send('stop');
  });
}
