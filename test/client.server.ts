import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A real HTTP server on 127.0.0.1:0 whose replies are scripted by call count
 * (as undici's retry-handler tests do). Used by test/client*.test.ts only.
 */

export interface Call {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
  /** performance.now() when the request body was fully read. */
  at: number;
}

export type Reply = (req: IncomingMessage, res: ServerResponse, call: Call) => void;

export interface Scripted {
  url: string;
  port: number;
  calls: Call[];
  close(): Promise<void>;
}

/** Serve `replies[i]` for call i; calls past the end get the last reply. */
export async function scripted(replies: Reply[] | ((n: number, call: Call) => Reply), port = 0): Promise<Scripted> {
  const calls: Call[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const call: Call = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks), at: performance.now() };
      const n = calls.push(call) - 1;
      const reply = typeof replies === 'function' ? replies(n, call) : (replies[Math.min(n, replies.length - 1)] as Reply);
      reply(req, res, call);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  const actual = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${actual}`,
    port: actual,
    calls,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Reply =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  };

export const ok = (data: unknown): Reply => json(200, { code: 200, data });

/** A 200 status answer (task()) about the task the request asks for: its path's last part, or its task_id parameter. */
export const okTaskAsked =
  (over: Record<string, unknown> = {}): Reply =>
  (req, res, call) => {
    const url = new URL(call.url, 'http://x');
    const id = url.searchParams.get('task_id') ?? decodeURIComponent(url.pathname.split('/').pop() ?? '');
    ok(task({ ...over, task_id: id }))(req, res, call);
  };

/** Close the connection without any answer (after the request was fully received). */
export const drop: Reply = (req) => {
  req.socket.destroy();
};

/** Answer after `ms` (long enough for a client timeout to fire first). */
export const slow =
  (ms: number, then: Reply): Reply =>
  (req, res, call) => {
    const t = setTimeout(() => {
      if (!res.destroyed && !req.socket.destroyed) then(req, res, call);
    }, ms);
    res.on('close', () => clearTimeout(t));
  };

/** A port on 127.0.0.1 with nothing listening (connections are refused). */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

export const task = (over: Record<string, unknown> = {}) => ({
  task_id: 't-1',
  status: 'finished',
  files: [{ file_url: 'http://127.0.0.1/x.png', file_type: 'image' }],
  created_time: '2026-11-21T10:00:00',
  progress: 100,
  error_message: null,
  ...over,
});
