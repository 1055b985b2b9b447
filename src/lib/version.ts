import { readFileSync } from 'node:fs';

/**
 * genbatch's version, from its package.json ('unknown' when that cannot be read). This file must stay two
 * folders below the package root (src/lib/, so dist/lib/ and, bundled, dist/bundle/): the path is relative
 * to it at run time.
 */
export const GENBATCH_VERSION = readVersion();

function readVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}
