import { resolve } from 'node:path';
import { UsageError } from '../errors.js';

/**
 * Where a run's state lives: a SQLite file (a path, the default) or a PostgreSQL database (a
 * `postgres://` or `postgresql://` URL), as `--state` or `GENBATCH_STATE` names it. The URL's password
 * never leaves this module in anything printed: `display` shows it as `***` (a `password=` query
 * parameter too), and an error about a bad URL shows only the display form.
 */
export type StateLocation = { kind: 'sqlite'; path: string } | { kind: 'postgres'; url: string; display: string };

/** The environment variable that is the default of `--state`. */
export const STATE_ENV = 'GENBATCH_STATE';

const SCHEME = /^([a-z][a-z0-9+.-]*):\/\//i;
const POSTGRES_SCHEMES: ReadonlySet<string> = new Set(['postgres', 'postgresql']);

/** `--state` as given, else `GENBATCH_STATE` (empty: unset), else undefined. */
export function stateOption(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (flag !== undefined) return flag;
  const v = env[STATE_ENV];
  return v === undefined || v === '' ? undefined : v;
}

/** True when `value` names a PostgreSQL database (by its scheme; it may still be a bad URL). */
export function isPostgresUrl(value: string): boolean {
  const m = SCHEME.exec(value);
  return m !== null && POSTGRES_SCHEMES.has(m[1]!.toLowerCase());
}

/**
 * Parse a state location. A value with a scheme (`xyz://`) must be a PostgreSQL URL; anything else is a
 * path, resolved against the current folder. `from` names where the value came from in errors (`--state`).
 */
export function parseStateLocation(value: string, from = '--state'): StateLocation {
  const m = SCHEME.exec(value);
  if (m === null) {
    if (value.trim() === '') throw new UsageError(`${from} expects a path or a postgres:// URL, got ""`);
    return { kind: 'sqlite', path: resolve(value) };
  }
  const shown = displayUrl(value);
  if (!POSTGRES_SCHEMES.has(m[1]!.toLowerCase())) {
    throw new UsageError(`${from} expects a path or a postgres:// (or postgresql://) URL, got "${shown}": the scheme ${m[1]}:// is not supported`);
  }
  if (!parsesAsUrl(value)) {
    throw new UsageError(`${from}: "${shown}" is not a valid URL (expected postgres://USER:PASSWORD@HOST:PORT/DATABASE; a password with @, :, / or # in it must be percent-encoded)`);
  }
  return { kind: 'postgres', url: value, display: shown };
}

/** As the pg driver reads it: a URL, or one with no host (`postgres://user@/db?host=/socket/dir`). */
function parsesAsUrl(value: string): boolean {
  for (const v of [value, value.replace('@/', '@localhost/')]) {
    try {
      new URL(v);
      return true;
    } catch {
      // the next form
    }
  }
  return false;
}

/**
 * The URL to print: its password (in the user part, or a `password=` parameter) as `***`. Works on text
 * that is not a valid URL too: the user part is everything up to the last `@` (a password may hold an
 * unencoded @, /, ? or #), and everything in it from its first `:` is hidden.
 */
export function displayUrl(value: string): string {
  const m = SCHEME.exec(value);
  if (m === null) return value;
  let rest = value.slice(m[0].length);
  const at = rest.lastIndexOf('@');
  if (at >= 0) {
    const colon = rest.slice(0, at).indexOf(':');
    if (colon >= 0) rest = `${rest.slice(0, colon)}:***${rest.slice(at)}`;
  }
  return m[0] + rest.replace(/([?&]password=)[^&#]*/gi, '$1***');
}
