import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as z from 'zod';
import { UsageError } from '../../errors.js';

/**
 * The completion-callback receiver (`--listen HOST:PORT`). It accepts POSTs
 * only on a path ending in this run's unguessable token (compared in constant
 * time), answers 200 at once, and hands `{job, attempt, task_id, status}` to the
 * engine. A callback is a hint, never a source: the service does not sign
 * callbacks and a callback URL can leak (logs, proxies), so the engine acts only
 * on its own status read of the task (one read, at once), never on what the body
 * says the task holds (its result URLs are not even kept). The job id travels in
 * the `job` query parameter, so a late callback can adopt a task whose submit
 * answer was lost (an `uncertain` job; the status read then decides), and the
 * attempt in `attempt`, so only a callback of the job's latest submit can.
 */
export interface CallbackNote {
  job: string;
  /** The job's attempt the URL was made for (`attempt` parameter); null in URLs without one (older genbatch). */
  attempt: number | null;
  taskId: string;
  status: string;
}

const bodySchema = z.object({ data: z.object({ task_id: z.string().min(1), status: z.string() }) });
const MAX_BODY = 1 << 20;

/** Whether `given` is `token`, in time that does not depend on where they differ. */
function sameToken(given: string | undefined, token: string): boolean {
  const a = Buffer.from(given ?? '');
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * A request's target as a URL, or null when it is none (`POST http://[`, which anyone reaching the port can
 * send): `new URL` throws then, and a throw in the request handler is uncaught, which ended the whole run.
 */
function targetOf(target: string | undefined): URL | null {
  try {
    return new URL(target ?? '/', 'http://x');
  } catch {
    return null;
  }
}

export function parseListen(spec: string): { host: string; port: number } {
  const m = /^(.*):(\d{1,5})$/.exec(spec);
  const port = m ? Number(m[2]) : NaN;
  if (!m || !m[1] || port > 65535) throw new UsageError(`--listen expects HOST:PORT (e.g. 127.0.0.1:8788), got "${spec}"`);
  return { host: m[1].replace(/^\[(.*)\]$/, '$1'), port };
}

/** A new unguessable path token (144 random bits). */
export function newCallbackToken(): string {
  return randomBytes(18).toString('base64url');
}

export class CallbackReceiver {
  private server: Server | null = null;
  received = 0;
  rejected = 0;

  /**
   * `token`: the secret path segment. The engine keeps one per state file (meta
   * `callback_token`), so the callbacks of a task sent by an earlier run that
   * crashed still reach a later run. It appears only inside callback URLs.
   */
  constructor(
    private readonly onNote: (note: CallbackNote) => void,
    readonly token: string = newCallbackToken(),
    /** Takes the API key out of what a callback carries (its task id is stored and reported). */
    private readonly redact: (value: unknown) => unknown = (v) => v,
  ) {}

  async listen(host: string, port: number): Promise<AddressInfo> {
    const server = createServer((req, res) => {
      const url = targetOf(req.url);
      if (url === null) {
        this.rejected++;
        res.writeHead(400).end();
        req.resume();
        return;
      }
      const last = url.pathname.split('/').filter(Boolean).pop();
      if (req.method !== 'POST' || !sameToken(last, this.token)) {
        this.rejected++;
        res.writeHead(404).end();
        req.resume();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY) req.destroy();
        else chunks.push(c);
      });
      req.on('end', () => {
        let note: CallbackNote | null = null;
        try {
          const body = bodySchema.parse(JSON.parse(Buffer.concat(chunks).toString('utf8')));
          const job = url.searchParams.get('job');
          const attempt = url.searchParams.get('attempt');
          const n = attempt === null ? null : /^[1-9]\d{0,8}$/.test(attempt) ? Number(attempt) : NaN;
          if (job && !Number.isNaN(n)) note = { job, attempt: n, taskId: String(this.redact(body.data.task_id)), status: String(this.redact(body.data.status)) };
        } catch {
          note = null;
        }
        if (!note) {
          this.rejected++;
          res.writeHead(400).end();
          return;
        }
        this.received++;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
        this.onNote(note);
      });
    });
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve());
    });
    return server.address() as AddressInfo;
  }

  /**
   * The callback URL of one submit: the public base, this run's token, the job id and the job's
   * attempt number (a callback of an earlier attempt's task never adopts a later attempt's job).
   */
  urlFor(publicBase: string, jobId: string, attempt: number): string {
    const u = new URL(publicBase);
    u.pathname = `${u.pathname.replace(/\/+$/, '')}/${this.token}`;
    u.searchParams.set('job', jobId);
    u.searchParams.set('attempt', String(attempt));
    return u.toString();
  }

  async close(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    s.closeAllConnections?.();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
