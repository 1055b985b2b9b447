import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { buildIfStale } from './build.js';
import { REPORT_ARGS, watchHang } from './hang.js';
import { join, resolve } from 'node:path';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const BIN = join(ROOT, 'bin', 'genbatch.js');

/**
 * Build dist/ when any source is newer (test/global-setup.ts does it once per vitest run; this covers a
 * source edited while a watch-mode run goes on).
 */
export function ensureBuilt(): void {
  buildIfStale();
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Run `genbatch <args>` as a child process and wait for it. `killAfterMs`: SIGKILL it then (for a run
 * that would never end before a fix; the result then has signal SIGKILL).
 */
export function runCli(args: string[], env: Record<string, string> = {}, cwd = ROOT, killAfterMs?: number): Promise<CliResult> {
  return new Promise((resolveP, reject) => {
    const child = spawnCli(args, env, cwd);
    const timer = killAfterMs === undefined ? null : setTimeout(() => child.kill('SIGKILL'), killAfterMs);
    const unwatch = watchHang(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      unwatch();
      resolveP({ code, signal, stdout, stderr });
    });
  });
}

/** The environment a CLI child process gets: this one without GENBATCH_* and VITEST* variables, NO_COLOR=1, then `env`. */
export function cliEnv(env: Record<string, string> = {}): Record<string, string> {
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('GENBATCH_') && !k.startsWith('VITEST')) clean[k] = v;
  return { ...clean, NO_COLOR: '1', ...env };
}

export function spawnCli(args: string[], env: Record<string, string> = {}, cwd = ROOT): ChildProcess {
  return spawn(process.execPath, [...REPORT_ARGS, BIN, ...args], { cwd, env: cliEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
}

/** A YAML manifest of `n` alpha-image-2 jobs (a contract price of 2 credits each). */
export function imageManifest(path: string, n: number, prefix = 'img', extra = ''): string {
  const lines = ['jobs:'];
  for (let i = 0; i < n; i++) {
    lines.push(`  - id: ${prefix}-${String(i).padStart(4, '0')}`, '    model: alpha-image-2', '    input:', `      prompt: "Picture number ${i} of a quiet harbour"`);
  }
  writeFileSync(path, lines.join('\n') + '\n' + extra);
  return path;
}
