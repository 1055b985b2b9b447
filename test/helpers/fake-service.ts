import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A tiny hand-written service on 127.0.0.1, for what the sandbox will not do (answers in odd shapes,
 * callbacks before the submit answer, ...). `handle` gets the request with its whole body read.
 */
export interface FakeService {
  /** http://127.0.0.1:<port>, no trailing slash. */
  base: string;
  close(): Promise<void>;
}

export type FakeHandler = (req: IncomingMessage, body: string, res: ServerResponse) => void | Promise<void>;

export async function startFakeService(handle: FakeHandler): Promise<FakeService> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      Promise.resolve(handle(req, Buffer.concat(chunks).toString('utf8'), res)).catch((err: unknown) => {
        res.writeHead(500).end(String(err));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Answer with a JSON body. */
export function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

/** Answer with a file's bytes. */
export function bytes(res: ServerResponse, contentType: string, data: Buffer): void {
  res.writeHead(200, { 'content-type': contentType, 'content-length': data.length }).end(data);
}

/** The contract's answers for balance and submit, which most fake services give as they are. */
export const BALANCE = { code: 200, data: { balance: 1000 } };
/** The prompt of a submit request's body. */
export const promptIn = (body: string): string => (JSON.parse(body) as { input: { prompt: string } }).input.prompt;
export const submitted = (taskId: string) => ({ code: 200, data: { task_id: taskId, status: 'not_started', created_time: '2026-01-01T00:00:00' } });
