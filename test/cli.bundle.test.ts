import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ensureBuilt, imageManifest, ROOT, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The bundled CLI (dist/bundle/, built by bin/bundle.js after tsc) is what bin/genbatch.js runs:
 * files it reads relative to its own location (package.json for the sync key's version) and
 * packages kept out of the bundle (better-sqlite3, fastify for the sandbox) load from there.
 */

const BUNDLE = join(ROOT, 'dist', 'bundle');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const t = tempDir('genbatch-bundle-');

beforeAll(() => {
  ensureBuilt();
  // `npm test` bundles in pretest; a lone run bundles here when tsc's output is newer.
  const main = join(BUNDLE, 'main.js');
  if (!existsSync(main) || statSync(main).mtimeMs < statSync(join(ROOT, 'dist', 'cli', 'main.js')).mtimeMs) {
    const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'bundle.js')], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`bundle failed: ${r.stdout}${r.stderr}`);
  }
}, 180_000);
afterAll(() => t.cleanup());

/** file: URLs of the scripts a run of the CLI loaded (V8 coverage lists every script it compiled). */
function loadedFiles(coverageDir: string): string[] {
  const urls = new Set<string>();
  for (const f of readdirSync(coverageDir)) {
    const c = JSON.parse(readFileSync(join(coverageDir, f), 'utf8')) as { result: Array<{ url: string }> };
    for (const r of c.result) if (r.url.startsWith('file:')) urls.add(fileURLToPath(r.url));
  }
  return [...urls];
}

describe('bundled CLI', () => {
  it('--version prints the package version', async () => {
    const r = await runCli(['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(VERSION);
  });

  it('bin/genbatch.js runs the bundle: run --sandbox loads no unbundled module of ours, keeps the sync key version, writes the reports', async () => {
    const dir = join(t.dir, 'run');
    const cov = join(t.dir, 'coverage');
    mkdirSync(dir);
    const manifest = imageManifest(join(dir, 'm.yaml'), 3);
    const r = await runCli(['run', manifest, '--sandbox', '--yes', '--time-scale', '0.01', '--out', join(dir, 'out'), '--json'], { NODE_V8_COVERAGE: cov });
    expect(r.stderr).not.toContain('internal error');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('"type":"synced"');
    for (const f of ['report.json', 'report.csv', 'report.md', 'report.html']) expect(existsSync(join(dir, 'out', f)), f).toBe(true);

    const loaded = loadedFiles(cov);
    const ours = loaded.filter((f) => f.startsWith(join(ROOT, 'dist') + '/'));
    expect(ours).toContain(join(BUNDLE, 'main.js'));
    expect(ours.filter((f) => !f.startsWith(BUNDLE + '/'))).toEqual([]);
    // Kept out of the bundle on purpose: the native addon and the sandbox's web framework.
    expect(loaded.some((f) => f.includes('/node_modules/better-sqlite3/'))).toBe(true);
    expect(loaded.some((f) => f.includes('/node_modules/fastify/'))).toBe(true);

    const db = new Database(join(dir, 'out', 'state.db'), { readonly: true });
    try {
      const rows = db.prepare("SELECT value FROM meta WHERE key LIKE 'sync-key:%'").all() as Array<{ value: string }>;
      expect(rows.length).toBe(1);
      expect((JSON.parse(rows[0]!.value) as { genbatch: string }).genbatch).toBe(VERSION);
    } finally {
      db.close();
    }
  });

  it('every bundle file has a source map that leads back to src/*.ts', () => {
    const js = readdirSync(BUNDLE).filter((f) => f.endsWith('.js'));
    expect(js.length).toBeGreaterThan(5);
    const sources = new Set<string>();
    for (const f of js) {
      expect(readFileSync(join(BUNDLE, f), 'utf8').trimEnd().endsWith(`//# sourceMappingURL=${f}.map`), f).toBe(true);
      const map = JSON.parse(readFileSync(join(BUNDLE, `${f}.map`), 'utf8')) as { sources: string[] };
      for (const s of map.sources) sources.add(join(BUNDLE, s));
    }
    for (const s of ['src/cli/main.ts', 'src/cli/commands/run.ts', 'src/engine/prepare/sync-key.ts', 'src/sandbox/index.ts']) expect(sources.has(join(ROOT, s)), s).toBe(true);
    for (const s of sources) if (s.startsWith(join(ROOT, 'src') + '/')) expect(existsSync(s), s).toBe(true);
  });

  it('bin/genbatch.js falls back to tsc output when the bundle is missing or older than it', () => {
    // A copy of bin/genbatch.js beside stand-ins that say which one ran.
    const root = join(t.dir, 'pick');
    mkdirSync(join(root, 'bin'), { recursive: true });
    mkdirSync(join(root, 'dist', 'cli'), { recursive: true });
    mkdirSync(join(root, 'dist', 'bundle'), { recursive: true });
    copyFileSync(BIN, join(root, 'bin', 'genbatch.js'));
    writeFileSync(join(root, 'package.json'), '{"type":"module"}');
    const compiled = join(root, 'dist', 'cli', 'main.js');
    const bundle = join(root, 'dist', 'bundle', 'main.js');
    writeFileSync(compiled, "process.stdout.write('compiled');");
    const ran = () => spawnSync(process.execPath, [join(root, 'bin', 'genbatch.js')], { encoding: 'utf8' }).stdout;
    expect(ran()).toBe('compiled');
    writeFileSync(bundle, "process.stdout.write('bundle');");
    utimesSync(compiled, 1000, 1000);
    utimesSync(bundle, 2000, 2000);
    expect(ran()).toBe('bundle');
    utimesSync(bundle, 2000, 2000);
    utimesSync(compiled, 2000, 2000);
    expect(ran()).toBe('bundle');
    utimesSync(compiled, 3000, 3000);
    expect(ran()).toBe('compiled');
  });
});
