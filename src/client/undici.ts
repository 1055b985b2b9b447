/**
 * undici, evaluated on first use rather than when a module naming it is loaded. Commands that only read a state
 * (status, report, view, mark, export) reach the HTTP client's modules through shared ones but never send a
 * request. Evaluating undici was 125 ms of a profiled `genbatch status`; measured without the profiler, status
 * went from 0.52 to 0.44 s of CPU (20 runs each).
 *
 * In the CLI bundle (bin/bundle.js) esbuild sees the bare `require('undici')` and bundles undici as before, called
 * here at first use; in the unbundled library (dist/, ES modules, where `require` is not defined) Node's
 * createRequire loads the same package. Types come from `import type`, which emits nothing.
 */
import { createRequire } from 'node:module';

type Undici = typeof import('undici');

let loaded: Undici | undefined;

export function undici(): Undici {
  return (loaded ??= typeof require === 'function' ? (require('undici') as Undici) : (createRequire(import.meta.url)('undici') as Undici));
}
