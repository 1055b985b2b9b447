import type { FastifyReply } from 'fastify';

/**
 * A server-sent-events writer on the raw response: `text/event-stream`,
 * `Cache-Control: no-cache`, one write per event. Chat Completions and Gemini
 * send data-only events; Responses and Messages name each event. Gemini events
 * end with CRLF CRLF, as Google's servers do; the others with LF LF.
 */
export class SseWriter {
  private readonly reply: FastifyReply;
  private readonly eol: string;

  constructor(reply: FastifyReply, headers: Record<string, string>, crlf = false) {
    this.reply = reply;
    this.eol = crlf ? '\r\n' : '\n';
    reply.hijack();
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      ...headers,
    });
  }

  /** False once the client has gone away. */
  get open(): boolean {
    return !this.reply.raw.destroyed && !this.reply.raw.writableEnded;
  }

  /** One event: an optional `event:` line, then `data: <json or text>`. */
  send(data: unknown, event?: string): void {
    if (!this.open) return;
    const text = typeof data === 'string' ? data : JSON.stringify(data);
    const head = event === undefined ? '' : `event: ${event}${this.eol}`;
    this.reply.raw.write(`${head}data: ${text}${this.eol}${this.eol}`);
  }

  /** End the stream normally. */
  end(): void {
    if (this.open) this.reply.raw.end();
  }

  /** Cut the connection after what was written so far (no terminating chunk): a broken stream. */
  cut(): void {
    const socket = this.reply.raw.socket;
    if (socket && !socket.destroyed) socket.end();
    else this.reply.raw.destroy();
  }
}
