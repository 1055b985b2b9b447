import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import { resolve } from 'node:path';
import { GenbatchError, UsageError } from '../errors.js';
import { markJobs, type MarkAction } from '../engine/index.js';
import { PageData } from '../report/index.js';
import { isS3Url } from '../storage/index.js';
import type { Store } from '../store/index.js';
import { detailPage } from './detail.js';
import { runOutput } from './output.js';
import { allowedHosts, cookieName, cookieValue, hostAllowed, newToken, originAllowed, TOKEN_HEADER, tokenCookie, tokenMatches } from './guard.js';
import { LiveState } from './live.js';
import { CHUNK_ROWS, galleryPage, parseAfter, rowsAnswer } from './gallery.js';
import { localRefs, sendRef } from './refs.js';

export interface ViewOptions {
  /** The state file, opened (Store.openForRead) with the run to show in use. */
  store: Store;
  /** Address to bind. Default 127.0.0.1. */
  host?: string;
  /** Port; 0: any free port. Default 8788. */
  port?: number;
  /** The token (default: a new random one); tests pass none. */
  token?: string;
  /** Rows per GET /api/rows answer (default CHUNK_ROWS); tests pass a few. */
  chunkRows?: number;
  /** Called after marks were written to `store` (a copy of a PostgreSQL state: they go to the database too). */
  saveMarks?: () => Promise<unknown>;
}

export interface View {
  /** The page's URL, with the token. */
  url: string;
  token: string;
  port: number;
  /** Marks written through this view (POST /api/marks) so far. */
  marksWritten(): number;
  close(): Promise<void>;
}

const MAX_BODY = 1 << 20;
const WILDCARD = new Set(['0.0.0.0', '::', '[::]']);

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-resource-policy': 'same-origin',
};

function send(res: ServerResponse, status: number, type: string, body: string): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
  res.end(body);
}
const json = (res: ServerResponse, status: number, body: string) => send(res, status, 'application/json; charset=utf-8', body);
const text = (res: ServerResponse, status: number, body: string) => send(res, status, 'text/plain; charset=utf-8', `${body}\n`);

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((done, fail) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (d: Buffer) => {
      size += d.length;
      if (size > MAX_BODY) {
        fail(new UsageError(`the request body is larger than ${MAX_BODY} bytes`));
        req.destroy();
      } else chunks.push(d);
    });
    req.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
    req.on('error', fail);
  });
}

/** POST /api/marks `{ids: [...], mark: "approved"|"rejected"|null, note?: string|null}`, checked, then markJobs as `genbatch mark`. */
function parseMarks(body: string): { ids: string[]; action: MarkAction; note: string | null } {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    throw new UsageError('POST /api/marks: the body is not JSON');
  }
  const o = (typeof v === 'object' && v !== null ? v : {}) as Record<string, unknown>;
  if (!Array.isArray(o.ids) || o.ids.length === 0 || !o.ids.every((x) => typeof x === 'string' && x !== '')) throw new UsageError('POST /api/marks: ids must be a non-empty list of job ids');
  const action: MarkAction | undefined = o.mark === 'approved' ? 'approve' : o.mark === 'rejected' ? 'reject' : o.mark === null ? 'clear' : undefined;
  if (action === undefined) throw new UsageError(`POST /api/marks: mark must be "approved", "rejected" or null, got ${JSON.stringify(o.mark)}`);
  if (o.note !== undefined && o.note !== null && typeof o.note !== 'string') throw new UsageError('POST /api/marks: note must be a string or null');
  return { ids: o.ids as string[], action, note: typeof o.note === 'string' && o.note !== '' ? o.note : null };
}

/**
 * `genbatch view`: the run's gallery (report.html's page, built from the state file by the same code) served
 * live, with job details and review marks. See src/view/README.md.
 */
export async function startView(o: ViewOptions): Promise<View> {
  const store = o.store;
  // The run's files: its output folder, or its prefix in a bucket (`--out s3://...`).
  const recorded = store.run().out_dir;
  // Its files, the state file never among them (it may be in the output folder under any name: --state out/run.sqlite).
  const output = await runOutput(isS3Url(recorded) ? recorded : resolve(recorded), [store.path]);
  const token = o.token ?? newToken();
  const live = new LiveState(store, new PageData('/files/'));
  const host = o.host ?? '127.0.0.1';
  let allowed = new Set<string>();
  let cookie = '';
  let marked = 0;
  const chunkRows = Math.max(1, Math.floor(o.chunkRows ?? CHUNK_ROWS));

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    for (const [k, v] of Object.entries(SECURITY_HEADERS)) res.setHeader(k, v);
    if (!hostAllowed(req, allowed)) return text(res, 403, `refused: the Host header ${JSON.stringify(req.headers.host ?? '')} is not an address this view answers to (use the printed URL)`);
    const url = new URL(req.url ?? '/', 'http://view.invalid');
    const path = url.pathname;
    const reading = req.method === 'GET' || req.method === 'HEAD';
    // The printed URL (?token=): the token becomes an HttpOnly, SameSite=Strict cookie, and the page is reloaded without it.
    const given = url.searchParams.get('token');
    if (given !== null && reading) {
      if (!tokenMatches(token, given)) return text(res, 403, 'refused: that is not this view\'s token (use the URL it printed)');
      url.searchParams.delete('token');
      res.writeHead(303, { location: `${path}${url.search}`, 'set-cookie': tokenCookie(cookie, token), 'cache-control': 'no-store' });
      return void res.end();
    }
    const byHeader = tokenMatches(token, req.headers[TOKEN_HEADER]);
    if (!byHeader && !tokenMatches(token, cookieValue(req, cookie))) {
      return text(res, 403, `refused: this view answers only with its token (open the URL it printed, with ?token=, or send the ${TOKEN_HEADER} header)`);
    }
    if (!reading) {
      // A write from a page must come from this view's own origin; one with no Origin (a script, curl) must carry the header.
      const origin = req.headers.origin;
      if (origin !== undefined ? !originAllowed(origin, allowed) : !byHeader) return json(res, 403, JSON.stringify({ error: `refused: a request that changes something must come from this view's page (Origin ${JSON.stringify(origin ?? null)}) or carry the ${TOKEN_HEADER} header` }));
      if (req.method !== 'POST' || path !== '/api/marks') return json(res, 405, JSON.stringify({ error: `${req.method ?? ''} ${path} is not something this view does` }));
      if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) return json(res, 415, JSON.stringify({ error: 'POST /api/marks expects Content-Type: application/json' }));
      try {
        const m = parseMarks(await readBody(req));
        const r = markJobs(store, m.ids, m.action, m.note, 'POST /api/marks');
        live.wrote();
        await o.saveMarks?.();
        marked += r.changed;
        return json(res, 200, JSON.stringify({ changed: r.changed, ids: r.ids, mark: r.state }));
      } catch (err) {
        if (err instanceof GenbatchError) return json(res, 400, JSON.stringify({ error: err.message }));
        throw err;
      }
    }
    if (path === '/') return send(res, 200, 'text/html; charset=utf-8', galleryPage(store, live));
    if (path === '/api/rows') {
      const after = parseAfter(url.searchParams.get('after'));
      if (after === null) return json(res, 400, JSON.stringify({ error: 'GET /api/rows: after must be a whole number (0: from the start; then the next of the previous answer)' }));
      return json(res, 200, rowsAnswer(store, live, after, chunkRows));
    }
    if (path === '/api/jobs') {
      const gen = Number(url.searchParams.get('gen') ?? '0');
      return json(res, 200, live.changes(url.searchParams.get('since') ?? '', Number.isFinite(gen) ? gen : 0));
    }
    if (path.startsWith('/job/')) {
      let id: string;
      try {
        id = decodeURIComponent(path.slice('/job/'.length));
      } catch {
        return text(res, 404, 'no such job');
      }
      const html = await detailPage(store, output, id, '/');
      if (html === null) return text(res, 404, `no job ${JSON.stringify(id)} in this run`);
      return send(res, 200, 'text/html; charset=utf-8', html);
    }
    if (path.startsWith('/ref/')) {
      // /ref/<job id>/<n>: the job's n-th local reference image (src/view/refs.ts: the recorded bytes, an image, or 404).
      const m = /^\/ref\/([^/]+)\/(\d{1,4})$/.exec(path);
      let id: string | null = null;
      try {
        id = m ? decodeURIComponent(m[1]!) : null;
      } catch {
        id = null;
      }
      const job = id === null ? null : store.getJob(id);
      const ref = job ? localRefs(job.spec, store.run().manifest).find((r) => r.n === Number(m![2])) : undefined;
      if (!ref || !(await sendRef(res, ref, req.method === 'HEAD'))) return text(res, 404, 'no such reference image (or its file changed since the run read it)');
      return;
    }
    if (path.startsWith('/files/')) {
      if (!(await output.send(res, path.slice('/files/'.length), req.method === 'HEAD'))) return text(res, 404, 'no such file in the output folder');
      return;
    }
    if (path === '/favicon.ico') {
      res.writeHead(204);
      return void res.end();
    }
    return text(res, 404, 'not found');
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) text(res, 500, `the view failed on this request: ${err instanceof Error ? err.message : String(err)}`);
      else res.destroy();
    });
  });
  await new Promise<void>((done, fail) => {
    server.once('error', fail);
    server.listen(o.port ?? 8788, host, () => done());
  }).catch((err: unknown) => {
    output.close();
    throw err;
  });
  const port = (server.address() as AddressInfo).port;
  allowed = allowedHosts(host, port);
  cookie = cookieName(port);
  if (WILDCARD.has(host)) for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) for (const h of allowedHosts(a.address, port)) allowed.add(h);
  const shown = WILDCARD.has(host) ? '127.0.0.1' : host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
  return {
    url: `http://${shown}:${port}/?token=${token}`,
    token,
    port,
    marksWritten: () => marked,
    close: () =>
      new Promise<void>((done) => {
        server.close(() => {
          output.close();
          done();
        });
        server.closeAllConnections();
      }),
  };
}
