import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..', '..');
const BUNDLE = join(ROOT, 'dist', 'bundle', 'main.js');

/** The newest modification time of a file under `dir` (recursively). */
function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/**
 * Whether dist/ (the library and the CLI bundle that bin/genbatch.js runs) is older than any source of it:
 * a file under src/, the bundler script, tsconfig.json or package.json.
 */
export function buildIsStale(): boolean {
  if (!existsSync(BUNDLE)) return true;
  const sources = Math.max(
    newest(join(ROOT, 'src')),
    ...['bin/bundle.js', 'tsconfig.json', 'package.json'].map((f) => statSync(join(ROOT, f)).mtimeMs),
  );
  return sources > statSync(BUNDLE).mtimeMs;
}

/** `npm run build` (tsc, then the bundle) when dist/ is stale; throws with the compiler's output when it fails. */
export function buildIfStale(): void {
  if (!buildIsStale()) return;
  const tsc = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', ROOT], { encoding: 'utf8' });
  if (tsc.status !== 0) throw new Error(`build failed (tsc): ${tsc.stdout}${tsc.stderr}`);
  const bundle = spawnSync(process.execPath, [join(ROOT, 'bin', 'bundle.js')], { encoding: 'utf8' });
  if (bundle.status !== 0) throw new Error(`build failed (bundle): ${bundle.stdout}${bundle.stderr}`);
}
