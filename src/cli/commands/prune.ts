import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { ManifestError, UsageError } from '../../errors.js';
import { openManifest } from '../../manifest/index.js';
import { prune as pruneOutput } from '../../engine/tools/prune.js';
import { ACTIVE_STATES, Store } from '../../store/index.js';
import { isS3Url } from '../../storage/url.js';
import { flushed, ignoreBrokenPipe } from '../progress.js';
import { readLocation } from './state-file.js';

/**
 * `genbatch prune <manifest> [--out DIR] [--state PATH] [--keep K] [--removed] [--dry-run] [--json]`: the output
 * folder's earlier generations beyond the newest K per job, and with --removed the result files of jobs the
 * manifest no longer names (src/engine/tools/prune.ts). Holds the state's lease: refused while a run works on it.
 */
export const DEFAULT_KEEP = 3;

export default async function prune(manifest: string, opts: { state?: string; out?: string; keep?: number; removed?: boolean; dryRun?: boolean; json?: boolean }): Promise<number> {
  ignoreBrokenPipe();
  if (opts.out !== undefined && isS3Url(opts.out)) throw new UsageError('prune works on an output folder on this machine, not a bucket');
  const location = readLocation(manifest, opts.state, opts.out, 'prune');
  if (location.kind === 'postgres') throw new UsageError('prune works on a SQLite state file (a run kept in PostgreSQL records no earlier generations)');
  if (!existsSync(location.path)) throw new UsageError(`no state file at ${location.path} (has this manifest been run? pass --state if it used another one)`);
  const store = Store.openForWrite(location.path);
  try {
    const run = store.findRun(manifest);
    if (!run) throw new UsageError(`the state file ${location.path} holds no run of ${resolve(manifest)}`);
    store.useRun(run);
    const outDir = opts.out ?? run.out_dir;
    if (isS3Url(outDir)) throw new UsageError('prune works on an output folder on this machine; this run keeps its results in a bucket');
    const removed = opts.removed ? await removedJobs(store, manifest) : null;
    const res = await pruneOutput({ store, outDir: resolve(outDir), keep: opts.keep ?? DEFAULT_KEEP, removed, dryRun: opts.dryRun === true });
    if (opts.json) process.stdout.write(`${JSON.stringify(res)}\n`);
    else {
      const verb = res.dry_run ? 'would remove' : 'removed';
      process.stdout.write(`${verb} ${res.removed.length} file(s) (${res.bytes} bytes) and ${res.removed_dirs.length} folder(s); kept ${res.kept} earlier generation(s) (--keep ${opts.keep ?? DEFAULT_KEEP})\n`);
      for (const p of [...res.removed, ...res.removed_dirs]) process.stdout.write(`  ${verb}: ${p}\n`);
      for (const p of res.foreign) process.stdout.write(`  left (not recorded by the state): ${p}\n`);
      for (const p of res.changed) process.stdout.write(`  left (changed since recorded): ${p}\n`);
    }
    return 0;
  } finally {
    store.close();
    await flushed(process.stdout);
  }
}

/**
 * The jobs of the run the manifest no longer names (nor makes: for_each children of a job it names), apart from
 * those in flight or uncertain (their task may still deliver). An invalid or empty manifest removes nothing.
 */
async function removedJobs(store: Store, manifestPath: string): Promise<Set<string>> {
  if (!existsSync(manifestPath)) throw new ManifestError([{ job: null, where: manifestPath, path: '', message: 'manifest file not found' }]);
  const manifest = await openManifest(manifestPath);
  const seen = new Set<string>();
  const problems = [];
  for await (const job of manifest.jobs()) {
    for (const p of job.problems) problems.push(p);
    seen.add(job.id);
  }
  problems.push(...manifest.problems);
  if (problems.length > 0) throw new ManifestError(problems);
  if (seen.size === 0) throw new ManifestError([{ job: null, where: manifest.path, path: 'jobs', message: 'the manifest has no jobs' }]);
  const children = store.graph.childrenOf(seen);
  const active = new Set<string>(ACTIVE_STATES);
  const out = new Set<string>();
  for (const row of store.allJobs()) if (!seen.has(row.id) && !children.has(row.id) && !active.has(row.state) && row.state !== 'uncertain') out.add(row.id);
  return out;
}
