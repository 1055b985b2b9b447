import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatProblem } from '../../src/errors.js';
import { openManifest, type ManifestJob } from '../../src/manifest/index.js';

/** Every job of a manifest, and every problem (manifest-level and per job) as formatted lines. */
export async function readAll(path: string): Promise<{ jobs: ManifestJob[]; problems: string[] }> {
  const m = await openManifest(path);
  const jobs: ManifestJob[] = [];
  for await (const j of m.jobs()) jobs.push(j);
  return { jobs, problems: [...m.problems, ...jobs.flatMap((j) => j.problems)].map(formatProblem) };
}

/** Write `text` to `dir/name` and return the path. */
export function writeIn(dir: string, name: string, text: string | Buffer): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}
