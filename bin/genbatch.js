#!/usr/bin/env node
// Entry point: the bundled CLI, dist/bundle/main.js (built by `npm install` via the prepare
// script: tsc into dist/, then bin/bundle.js). When the bundle is missing or older than tsc's
// dist/cli/main.js (only tsc was run since), the unbundled CLI runs instead: same code, slower start.
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import module from 'node:module';
import v8 from 'node:v8';

hideSecretArgs();
keepCompiledCode();
collectGarbageSooner();
compileHttpParserOnce();

const bundle = new URL('../dist/bundle/main.js', import.meta.url);
const compiled = new URL('../dist/cli/main.js', import.meta.url);
const mtime = (url) => statSync(url, { throwIfNoEntry: false })?.mtimeMs ?? -1;
const b = mtime(bundle);
await import(b >= 0 && b >= mtime(compiled) ? bundle.href : compiled.href);

/**
 * Node 22.1 and later keep V8's compiled code of the modules a run loads between runs (about a fifth less
 * start-up CPU for `genbatch estimate` on Node 22); Node 20 has no such cache and this does nothing. The cache
 * lives in the package's own folder, never in the shared temporary folder, where another user could leave
 * compiled code for us to load. A folder that cannot be written (a read-only install) only means no cache;
 * NODE_DISABLE_COMPILE_CACHE=1 turns it off, and .ci/node22-smoke checks that it is written.
 */
function keepCompiledCode() {
  try {
    module.enableCompileCache?.(fileURLToPath(new URL('../.compile-cache', import.meta.url)));
  } catch {
    // no cache: the same run, a little slower to start
  }
}

/**
 * V8 lets the old generation grow up to 4x what the last full collection kept before it collects again. A long
 * run promotes garbage steadily (download buffers, rows, events that outlive a young collection) and nearly all
 * of it is dead: a 100,000-job run on 2 cores had no full collection for 40 s after its sync while its heap grew
 * to 137 MB and its malloc heap (the dead buffers' memory) to 67 MB; one full collection then left 28 MB of 84 MB
 * used. With the heap allowed 1.5x what the last collection kept, the same run holds about 64 MB of heap and 30 MB
 * of malloc heap: bench/run.js --big 100000, peak RSS of the run 196 MB (255 MB without this, 298 MB before the
 * fixes of this branch), CPU 334 s against 353 s without (noise). Its cost shows on short runs: a resume with
 * nothing to do takes 0.1-0.3 s more CPU (1.3 against 1.1 s) and 7 MB more RSS. It changes when V8 collects,
 * never what is kept; a `node --heap-growing-percent=N` of the user's own wins (bench/README.md).
 */
function collectGarbageSooner() {
  if (process.execArgv.some((a) => a.startsWith('--heap-growing-percent') || a.startsWith('--heap_growing_percent'))) return;
  v8.setFlagsFromString('--heap-growing-percent=50');
}

/**
 * undici parses HTTP with llhttp compiled to WebAssembly. V8 compiles a WebAssembly module twice: at once with its
 * baseline compiler (Liftoff), then again with its optimizing one (TurboFan) on background threads. For llhttp that
 * second compile is 165-230 ms of CPU in every process that sends a request (`genbatch run` of 2 jobs against a
 * sandbox process: 0.94 -> 0.71 s of CPU, 5 interleaved runs), and buys nothing measurable here: 3,000 small
 * requests and five 64 MB downloads took the same time and CPU either way, within noise (the parser's work is a
 * small part of a request's). WebAssembly is all this flag touches; a `node --liftoff...` or `--wasm-...` flag of
 * the user's own wins.
 */
function compileHttpParserOnce() {
  if (process.execArgv.some((a) => /^--(no-)?(liftoff|wasm)/.test(a))) return;
  v8.setFlagsFromString('--liftoff-only');
}

/**
 * Secrets given as flags (a URL's password, as in --state postgres://USER:PASSWORD@HOST/DB; the sandbox's
 * --keys and --admin-token) leave the process's command line first thing: another user's `ps` or a read of
 * /proc/PID/cmdline shows them as ***. On Linux and macOS, setting process.title writes over the memory of
 * the original command line (libuv fills the rest with zeros); process.argv, a copy, keeps them for the
 * commands. Until this line runs (Node's start, a few tens of ms) they are visible: the environment
 * (GENBATCH_STATE, PGPASSWORD, ~/.pgpass, GENBATCH_SANDBOX_ADMIN_TOKEN) is the safe place. Test:
 * test/cli.secret-args.test.ts.
 */
function hideSecretArgs() {
  const SECRET_FLAGS = new Set(['--keys', '--admin-token']);
  const args = process.argv.slice(1);
  const shown = args.map((arg, i) => {
    if (i > 0 && SECRET_FLAGS.has(args[i - 1])) return '***';
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0 && SECRET_FLAGS.has(arg.slice(0, eq))) return `${arg.slice(0, eq)}=***`;
    return hideUrlPassword(arg);
  });
  if (shown.every((s, i) => s === args[i])) return;
  try {
    process.title = [process.argv0, ...shown].join(' ');
  } catch {
    // a platform without a settable title: nothing more to do here
  }
}

/** `scheme://user:***@host/...` (also after `--flag=`): a password in the user part or a `password=` parameter as ***. */
function hideUrlPassword(arg) {
  const m = /^(--[\w-]+=)?([a-z][a-z0-9+.-]*:\/\/)([\s\S]*)$/i.exec(arg);
  if (m === null) return arg;
  let rest = m[3];
  // As src/store/location.ts displayUrl: the user part is everything up to the last @.
  const at = rest.lastIndexOf('@');
  if (at >= 0) {
    const colon = rest.slice(0, at).indexOf(':');
    if (colon >= 0) rest = `${rest.slice(0, colon)}:***${rest.slice(at)}`;
  }
  return (m[1] ?? '') + m[2] + rest.replace(/([?&]password=)[^&#]*/gi, '$1***');
}
