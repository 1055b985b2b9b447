import { isIP } from 'node:net';
import { fetch, type Dispatcher } from 'undici';
import { addressAllowed, refusedAddress, type HostResolver } from '../guard.js';
import { isLoopbackHost } from '../../lib/address.js';
import { invalid, Refused } from './refused.js';

/**
 * upload/url: download a public http(s) file. The host (and every address it
 * resolves to, and every redirect hop, at most 3) must be public: private,
 * loopback, link-local and internal addresses are refused, except loopback when
 * the sandbox runs with allowLoopback. The download has a time limit (408
 * timeout_error) and a size cap (413 content_too_long_error); an unreachable
 * host, a refused connection or a non-2xx answer is 400 validation_error.
 */

export interface DownloadOptions {
  allowLoopback: boolean;
  timeoutMs: number;
  maxBytes: number;
  /** Resolves host names (checked here for a clear message, and again at connect by `dispatcher`). */
  resolveHost: HostResolver;
  /** Connects only to allowed addresses (guard.ts guardedAgent). */
  dispatcher: Dispatcher;
}

const MAX_REDIRECTS = 3;

function allowed(host: string, o: DownloadOptions): boolean {
  return addressAllowed(host, o.allowLoopback);
}

/** Resolve a name, giving up when `signal` aborts (a resolver can hang longer than the download limit). */
function resolve(host: string, o: DownloadOptions, signal: AbortSignal): Promise<string[]> {
  return new Promise((ok, fail) => {
    const onAbort = () => fail(new Error('aborted'));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    o.resolveHost(host).then(ok, fail).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

async function checkHost(field: string, u: URL, o: DownloadOptions, signal: AbortSignal): Promise<void> {
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (!allowed(host, o)) throw invalid(`${field}: ${host} is a private, loopback, link-local or internal address; only public hosts are fetched`);
  if (isIP(host) !== 0 || (o.allowLoopback && isLoopbackHost(host))) return;
  let addresses: string[];
  try {
    addresses = await resolve(host, o, signal);
  } catch {
    if (signal.aborted) throw new Refused(408, 'timeout_error', `${field}: the host ${host} was not resolved within ${o.timeoutMs} ms`);
    throw invalid(`${field}: host ${host} could not be resolved`);
  }
  const bad = refusedAddress(addresses, o.allowLoopback);
  if (bad) throw invalid(`${field}: ${host} resolves to ${bad}, a private or internal address; only public hosts are fetched`);
}

function parse(field: string, url: string): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw invalid(`${field}: is not a valid URL`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw invalid(`${field}: must be an http or https URL (got ${u.protocol.replace(/:$/, '')})`);
  if (u.username || u.password) throw invalid(`${field}: must not carry credentials (the remote file must be public)`);
  return u;
}

async function readCapped(field: string, res: { headers: { get(name: string): string | null }; body: ReadableStream<Uint8Array> | null }, maxBytes: number): Promise<Buffer> {
  const declared = Number(res.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) throw new Refused(413, 'content_too_long_error', `${field}: the remote file is ${declared} bytes; the limit is ${maxBytes}`);
  const chunks: Buffer[] = [];
  let total = 0;
  if (!res.body) return Buffer.alloc(0);
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw new Refused(413, 'content_too_long_error', `${field}: the remote file is larger than the limit of ${maxBytes} bytes`);
    }
    chunks.push(Buffer.from(value));
  }
  return Buffer.concat(chunks);
}

/** Download `url`; throws Refused for every failure. */
export async function download(field: string, url: string, o: DownloadOptions): Promise<Buffer> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), o.timeoutMs);
  try {
    let u = parse(field, url);
    for (let hop = 0; ; hop++) {
      await checkHost(field, u, o, ac.signal);
      let res: Awaited<ReturnType<typeof fetch>>;
      try {
        res = await fetch(u, { redirect: 'manual', signal: ac.signal, headers: { 'user-agent': 'genbatch-sandbox-upload' }, dispatcher: o.dispatcher });
      } catch (err) {
        if (ac.signal.aborted) throw new Refused(408, 'timeout_error', `${field}: the download did not finish within ${o.timeoutMs} ms`);
        const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : String(err);
        throw invalid(`${field}: could not be downloaded (${cause})`);
      }
      if (res.status >= 300 && res.status < 400 && res.headers.get('location')) {
        await res.body?.cancel().catch(() => undefined);
        if (hop >= MAX_REDIRECTS) throw invalid(`${field}: more than ${MAX_REDIRECTS} redirects`);
        u = parse(field, new URL(res.headers.get('location') ?? '', u).toString());
        continue;
      }
      if (res.status < 200 || res.status > 299) {
        await res.body?.cancel().catch(() => undefined);
        throw invalid(`${field}: could not be downloaded (the remote server answered ${res.status})`);
      }
      try {
        return await readCapped(field, res, o.maxBytes);
      } catch (err) {
        if (err instanceof Refused) throw err;
        if (ac.signal.aborted) throw new Refused(408, 'timeout_error', `${field}: the download did not finish within ${o.timeoutMs} ms`);
        throw invalid(`${field}: the download broke off (${err instanceof Error ? err.message : String(err)})`);
      }
    }
  } finally {
    clearTimeout(timer);
  }
}
