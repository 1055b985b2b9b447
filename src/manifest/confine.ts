import { realpathSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { within } from '../lib/root.js';

/**
 * `--confine` (or GENBATCH_CONFINE=1): every file a manifest names (rows files,
 * glob patterns and their matches, local image paths) must be inside the
 * manifest's folder once symbolic links are resolved, so a manifest written by
 * someone else cannot read `../../../../etc/*.conf` or follow a link out of its
 * folder. Without it, a manifest may name any file the user can read.
 */
export class Confine {
  /** The manifest's folder with its symbolic links resolved. */
  private readonly real: string;
  /** Answers per file (100,000 jobs sharing one image resolve it once). */
  private readonly seen = new Map<string, string | null>();

  /** `dir`: the manifest's folder (absolute), as relative paths resolve against it. */
  constructor(readonly dir: string) {
    this.real = realOrNull(dir) ?? dir;
  }

  /**
   * Why `file` (absolute) may not be read, or null. A file that does not exist is
   * judged by its path (reading it then reports it missing).
   */
  problem(file: string): string | null {
    let answer = this.seen.get(file);
    if (answer === undefined) this.seen.set(file, (answer = this.judge(file)));
    return answer;
  }

  private judge(file: string): string | null {
    const real = realOrNull(file);
    if (real === null) return inside(resolve(file), this.dir) || inside(resolve(file), this.real) ? null : this.outside();
    if (inside(real, this.real)) return null;
    return inside(resolve(file), this.dir) ? `resolves to ${real} through a symbolic link, ${this.outside().slice('is '.length)}` : this.outside();
  }

  /** Why a glob pattern may not be used (absolute, or with a `..` part), or null. */
  patternProblem(pattern: string): string | null {
    if (isAbsolute(pattern) || /^[A-Za-z]:/.test(pattern) || pattern.split(/[\\/]/).includes('..')) return `leaves the manifest's folder (--confine: patterns are relative to ${this.dir}, without "..")`;
    return null;
  }

  private outside(): string {
    return `is outside the manifest's folder ${this.dir} (--confine: a manifest may name only files inside its folder, symbolic links resolved)`;
  }
}

function realOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

/** True when `child` is `parent` or below it (src/lib/root.ts's check, the one for every folder). */
const inside = (child: string, parent: string): boolean => within(parent, child);
