import type { ModelSpec } from '../models/index.js';
import type { SandboxExtension } from './hooks.js';
import { musicExtension } from './music/index.js';

/**
 * Extension points of the sandbox core, for model families whose behaviour
 * goes beyond the generic one (music workflows: result fields, ownership
 * checks, once-per-track 409s, staged callbacks).
 *
 * To add one: write `src/sandbox/<family>/index.ts` exporting a
 * `SandboxExtension` (hooks.ts), and add it to EXTENSIONS below. The first extension
 * whose `matches(spec)` is true handles a model; others use the generic path.
 */

/** Registered extensions, in priority order. Add yours here. */
export const EXTENSIONS: SandboxExtension[] = [musicExtension];

const cache = new Map<string, SandboxExtension | null>();

export function extensionFor(spec: ModelSpec): SandboxExtension | null {
  let ext = cache.get(spec.id);
  if (ext === undefined) {
    ext = EXTENSIONS.find((e) => e.matches(spec)) ?? null;
    cache.set(spec.id, ext);
  }
  return ext;
}
