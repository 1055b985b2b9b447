import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, imageManifest, ROOT } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * `genbatch run` lasts as long as its tasks (hours for a big batch). When the installed genbatch is
 * rebuilt or upgraded meanwhile (`npm run build` removes dist/bundle/ and writes chunks under new
 * hashed names; an upgrade replaces the package folder), a chunk the run has not loaded yet is gone.
 * The report writers are needed at the very end of a run: they must already be loaded by then
 * (before the bundle, they were imported at start-up), or the run ends without its reports.
 */

const t = tempDir('genbatch-replaced-');

beforeAll(() => {
  ensureBuilt();
  const main = join(ROOT, 'dist', 'bundle', 'main.js');
  if (!existsSync(main) || statSync(main).mtimeMs < statSync(join(ROOT, 'dist', 'cli', 'main.js')).mtimeMs) {
    const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'bundle.js')], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`bundle failed: ${r.stdout}${r.stderr}`);
  }
}, 180_000);
afterAll(() => t.cleanup());

describe('bundled CLI replaced while a run is in progress', () => {
  it('run still writes its four reports when dist/bundle/ is removed after the first submits', async () => {
    // A copy of the installed package (bin, the bundle, package.json; node_modules shared).
    const pkg = join(t.dir, 'pkg');
    mkdirSync(join(pkg, 'dist'), { recursive: true });
    cpSync(join(ROOT, 'bin'), join(pkg, 'bin'), { recursive: true });
    cpSync(join(ROOT, 'package.json'), join(pkg, 'package.json'));
    cpSync(join(ROOT, 'dist', 'bundle'), join(pkg, 'dist', 'bundle'), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'));
    const manifest = imageManifest(join(t.dir, 'm.yaml'), 40);
    const out = join(t.dir, 'out');

    const clean: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('GENBATCH_') && !k.startsWith('VITEST')) clean[k] = v;
    const child = spawn(process.execPath, [join(pkg, 'bin', 'genbatch.js'), 'run', manifest, '--sandbox', '--yes', '--time-scale', '0.1', '--concurrency', '4', '--json', '--out', out], {
      env: { ...clean, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let removed = false;
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const done = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      // The first task is submitted: the run is under way; "rebuild" the package under it.
      if (!removed && stdout.includes('"to":"submitted"')) {
        removed = true;
        setTimeout(() => rmSync(join(pkg, 'dist', 'bundle'), { recursive: true, force: true }), 200);
      }
    });
    const code = await done;
    expect(removed).toBe(true);
    expect(existsSync(join(pkg, 'dist', 'bundle'))).toBe(false);
    expect(stderr).not.toContain('internal error');
    expect(stdout).not.toContain('could not write the reports');
    expect(stdout).toContain('"type":"reports"');
    expect(code).toBe(0);
    for (const f of ['report.json', 'report.csv', 'report.md', 'report.html']) expect(existsSync(join(out, f)), f).toBe(true);
  }, 120_000);
});
