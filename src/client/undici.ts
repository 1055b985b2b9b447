/**
 * undici, evaluated on first use rather than when a module naming it is loaded, and only the parts the client
 * uses. Commands that only read a state (status, report, view, mark, export) reach the HTTP client's modules
 * through shared ones but never send a request. Evaluating undici was 125 ms of a profiled `genbatch status`;
 * measured without the profiler, status went from 0.52 to 0.44 s of CPU (20 runs each).
 *
 * The client needs the Agent, the dispatcher's request API, the errors and (for uploads) FormData; undici's
 * index also evaluates its fetch (and through it Node's own fetch, which its cookies module reaches by touching
 * globalThis.Headers), WebSocket, mock agents and caches: 130-180 ms of CPU against 50-80 ms for these parts
 * alone (`node -e` of each, 3 runs). So the parts are required by path, as undici's index requires them (undici
 * has no `exports` map; the version is pinned by package-lock.json, and test/client.undici-parts.test.ts checks
 * each part is the one the index exports). `request` below is the index's request() with the dispatcher always
 * given, as every caller here gives one.
 *
 * In the CLI bundle (bin/bundle.js) esbuild sees the bare `require(...)` calls and bundles those modules; in
 * the unbundled library (dist/, ES modules, where `require` is not defined) Node's createRequire loads the same
 * files. Types come from `import type`, which emits nothing.
 */
import { createRequire } from 'node:module';
import type * as U from 'undici';

/**
 * How long genbatch keeps an idle connection, whatever the server's Keep-Alive hint says (undici takes the hint,
 * less a second, up to keepAliveMaxTimeout: 29 s against the sandbox's 30 s). Below common server idle timeouts
 * (Node's 5 s), so an idle socket is dropped by us first (a POST written on a socket the server is closing would
 * end as an uncertain submit), and a process's idle sockets do not hold a server's connections per client for
 * half a minute: against a server that caps those, the service client's idle ones kept the downloads' out
 * (every download answered 503 for 29 s).
 */
export const KEEP_IDLE = { keepAliveTimeout: 4_000, keepAliveMaxTimeout: 4_000 } as const;

export interface Undici {
  Agent: typeof U.Agent;
  errors: typeof U.errors;
  /** FormData (evaluated on first use: only uploads need it). */
  readonly FormData: typeof U.FormData;
  /** undici's request(url, opts) for a caller that always names its dispatcher. */
  request(url: string | URL, opts: Omit<U.Dispatcher.RequestOptions, 'origin' | 'path'> & { dispatcher: U.Dispatcher }): Promise<U.Dispatcher.ResponseData>;
}

type Require = (id: string) => unknown;

let loaded: Undici | undefined;

export function undici(): Undici {
  return (loaded ??= load(typeof require === 'function' ? require : createRequire(import.meta.url)));
}

function load(req: Require): Undici {
  // As undici's index.js: the request API (request, stream, pipeline, ...) lives on every dispatcher's prototype.
  const Dispatcher = req('undici/lib/dispatcher/dispatcher') as { prototype: object };
  Object.assign(Dispatcher.prototype, req('undici/lib/api'));
  const Agent = req('undici/lib/dispatcher/agent') as typeof U.Agent;
  const errors = req('undici/lib/core/errors') as typeof U.errors;
  const util = req('undici/lib/core/util') as { parseURL(url: string | URL): URL };
  let formData: typeof U.FormData | undefined;
  return {
    Agent,
    errors,
    get FormData() {
      return (formData ??= (req('undici/lib/web/fetch/formdata') as { FormData: typeof U.FormData }).FormData);
    },
    request(url, opts) {
      // The same URL checks and request target as undici's request().
      const u = util.parseURL(url);
      return opts.dispatcher.request({ ...opts, origin: u.origin, path: u.search ? `${u.pathname}${u.search}` : u.pathname, method: opts.method ?? (opts.body ? 'PUT' : 'GET') });
    },
  };
}
