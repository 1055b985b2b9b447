import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readlinkSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, ensureBuilt } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * `genbatch` on PATH as the README says (Quick start, "genbatch on your PATH"): the package as `npm pack`
 * makes it, unpacked into a folder that has the dependencies an `npm install` made (linked from this
 * repository's node_modules: nothing is fetched, no registry), installed globally with `npm install -g`
 * into a temporary prefix, as `npm install -g .` (or `npm link`) does from a clone. Then a shell whose
 * PATH has only `<prefix>/bin` added runs `genbatch --version` and a command from another folder.
 */

let work: { dir: string; cleanup: () => void };
let prefix: string;

function sh(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = {}): { code: number | null; out: string; stdout: string } {
  const clean: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('GENBATCH_') && !k.startsWith('VITEST') && !k.startsWith('npm_')) clean[k] = v;
  const r = spawnSync(cmd, args, { cwd, env: { ...clean, NO_COLOR: '1', ...env }, encoding: 'utf8', timeout: 120_000 });
  return { code: r.status, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}`, stdout: r.stdout ?? '' };
}

beforeAll(() => {
  ensureBuilt();
  work = tempDir('genbatch-path-');
  const pack = sh('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work.dir], ROOT);
  if (pack.code !== 0) throw new Error(`npm pack failed: ${pack.out}`);
  const info = JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as Array<{ filename: string }>;
  const clone = join(work.dir, 'genbatch');
  mkdirSync(clone);
  const untar = sh('tar', ['-xzf', join(work.dir, info[0]!.filename), '-C', clone, '--strip-components=1'], work.dir);
  if (untar.code !== 0) throw new Error(`tar failed: ${untar.out}`);
  symlinkSync(join(ROOT, 'node_modules'), join(clone, 'node_modules'), 'dir');
  prefix = join(work.dir, 'prefix');
  const install = sh('npm', ['install', '-g', '--prefix', prefix, '--offline', '--ignore-scripts', '--no-audit', '--no-fund', '.'], clone);
  if (install.code !== 0) throw new Error(`npm install -g failed: ${install.out}`);
}, 180_000);

afterAll(() => work?.cleanup());

describe('genbatch on PATH', () => {
  it('npm install -g into a prefix puts genbatch in <prefix>/bin; a shell finds it there and it prints its version', () => {
    expect(readlinkSync(join(prefix, 'bin', 'genbatch'))).toMatch(/genbatch\/bin\/genbatch\.js$/);
    const version = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    const r = sh('sh', ['-c', 'command -v genbatch && genbatch --version'], work.dir, { PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}` });
    expect(r.code, r.out).toBe(0);
    expect(r.stdout).toBe(`${join(prefix, 'bin', 'genbatch')}\n${version}\n`);
  }, 60_000);

  it('the command on PATH works from any folder: validate the example manifest it ships', () => {
    const demo = join(prefix, 'lib', 'node_modules', 'genbatch', 'manifests', 'demo.yaml');
    const r = sh('sh', ['-c', `genbatch validate '${demo}'`], work.dir, { PATH: `${join(prefix, 'bin')}:${process.env.PATH ?? ''}` });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/valid/);
  }, 60_000);
});
