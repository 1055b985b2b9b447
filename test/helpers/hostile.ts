import type { ServerResponse } from 'node:http';

/**
 * Answers of a hostile server, for a FakeHandler (fake-service.ts) or a scripted Reply (client.server.ts):
 * a huge answer streamed as it is read, an answer dripped one byte at a time, an answer nested very deep.
 */

/**
 * Streams a 200 JSON status answer of about `bytes` bytes (its metadata one long string), 1 MiB at a time,
 * as fast as the client reads it (`status`: 200 unless given). `onEnd` gets the bytes written when the answer ends or the client leaves.
 */
export function hugeStatus(res: ServerResponse, taskId: string, bytes: number, o: { status?: number; onEnd?: (written: number) => void } = {}): void {
  const head = Buffer.from(`{"code":200,"data":{"task_id":"${taskId}","status":"running","files":[],"created_time":"2026-01-01T00:00:00","metadata":{"pad":"`);
  const tail = Buffer.from('"}}}');
  const block = Buffer.alloc(1024 * 1024, 'x');
  let written = 0;
  let ended = false;
  const end = (): void => {
    if (ended) return;
    ended = true;
    o.onEnd?.(written);
  };
  res.on('close', end);
  res.on('error', end);
  res.writeHead(o.status ?? 200, { 'content-type': 'application/json' });
  const write = (b: Buffer): boolean => {
    written += b.length;
    return res.write(b);
  };
  write(head);
  const pump = (): void => {
    while (!ended && written + block.length < bytes) {
      if (!write(block)) return void res.once('drain', pump);
    }
    if (!ended) res.end(tail, end);
  };
  pump();
}

/**
 * Sends the status line and headers, then `body` one byte every `everyMs` ms: a server that keeps a
 * request open for ever while never going idle. Stops when the client goes away.
 */
export function drip(res: ServerResponse, body: string, everyMs: number, status = 200): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  let i = 0;
  const timer = setInterval(() => {
    if (res.destroyed || i >= body.length) {
      clearInterval(timer);
      if (!res.destroyed) res.end();
      return;
    }
    res.write(body[i++]!);
  }, everyMs);
  res.on('close', () => clearInterval(timer));
}

/** A status answer whose metadata is nested `depth` levels deep (`{"a":{"a":...}}`). */
export function nestedStatus(taskId: string, depth: number): string {
  return `{"code":200,"data":{"task_id":"${taskId}","status":"running","files":[],"created_time":"2026-01-01T00:00:00","metadata":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}}`;
}
