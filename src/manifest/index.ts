import { dirname, isAbsolute, resolve } from 'node:path';
import type { Problem } from '../errors.js';
import { hasRef, type JobLinks } from '../graph/index.js';
import { findModel, isRemoteRef } from '../models/index.js';
import { Confine } from './confine.js';
import { JobBuilder, valuesAt, type ManifestJob } from './job.js';
import { isTablePath } from './table.js';
import type { YamlManifest } from './yaml.js';
import { isJsonlPath } from './jsonl-path.js';

/**
 * Manifests: YAML (`jobs:` list with optional defaults, rows/glob/matrix
 * sources, budget, pricing), CSV/TSV (one row per job) or JSONL (one job
 * object per line). The format is
 * documented in manifests/README.md.
 *
 * Jobs are produced by an async iterator, one at a time: a 100,000-row CSV is
 * never held in memory, and file checks are cached per path.
 */

export type { ManifestJob } from './job.js';
export type { JobLinks } from '../graph/index.js';
export { ID_PATTERN, deriveId } from './job.js';
export { manifestJsonSchema, manifestJsonSchemaText } from './schema.js';

export interface Manifest {
  /** The manifest path as given. */
  path: string;
  /** Absolute folder of the manifest: relative paths inside it resolve here. */
  dir: string;
  /** `budget:` of a YAML manifest (max credits), or null. */
  budget: number | null;
  /** `budget_per_invocation:` of a YAML manifest (max credits one invocation may be charged), or null. */
  budgetPerInvocation: number | null;
  /** `pricing:` of a YAML manifest (model id -> credits), or null. */
  pricing: Record<string, number> | null;
  /**
   * Problems not tied to one job: YAML syntax, manifest keys, CSV header and
   * malformed rows, missing rows files. Holds the reading problems at once and
   * gains the source problems while `jobs()` is iterated; complete after a
   * full iteration (each new iteration starts them over).
   */
  readonly problems: Problem[];
  /**
   * Every job in file order. A job with problems is still yielded (with
   * `problems` filled) so callers can report all of them. Each call starts over.
   */
  jobs(): AsyncIterable<ManifestJob>;
  /**
   * The job graph after a full iteration of `jobs()`: the links (parents and
   * for_each) of every job that has any. Its problems (unknown ids, cycles,
   * unknown fields, for_each over a non-list) are added to `problems` at the
   * end of the iteration.
   */
  readonly links: ReadonlyMap<string, JobLinks>;
}

export interface OpenOptions {
  /**
   * `--confine`: every file the manifest names (rows files, glob patterns and
   * their matches, local image paths) must be inside the manifest's folder,
   * symbolic links resolved; any other is a problem of its job. Default false:
   * any file the user can read (trusted manifests).
   */
  confine?: boolean;
}

/** Open a YAML (.yaml/.yml), CSV (.csv), TSV (.tsv) or JSONL (.jsonl/.ndjson) manifest. Never throws for manifest content: see `problems`. */
export async function openManifest(path: string, options: OpenOptions = {}): Promise<Manifest> {
  const abs = resolve(path);
  const dir = dirname(abs);
  const confine = options.confine === true ? new Confine(dir) : null;
  let sourceProblems: Problem[] = [];
  let links: ReadonlyMap<string, JobLinks> = new Map();
  // Graph problems need every id: they are checked after the last job.
  async function* withGraph(source: (b: JobBuilder) => AsyncIterable<ManifestJob>): AsyncGenerator<ManifestJob> {
    const builder = new JobBuilder(dir, confine);
    yield* source(builder);
    const g = builder.graph.finish();
    for (const p of g.problems) sourceProblems.push(p);
    links = g.links;
  }
  // Each format's reader is loaded when a manifest of that format is opened (a CSV run never loads the yaml package).
  const streamed = async (jobs: (b: JobBuilder, problems: Problem[]) => AsyncIterable<ManifestJob>): Promise<Manifest> => ({
    path,
    dir,
    budget: null,
    budgetPerInvocation: null,
    pricing: null,
    get problems() {
      return sourceProblems;
    },
    get links() {
      return links;
    },
    async *jobs() {
      sourceProblems = [];
      yield* withGraph((b) => jobs(b, sourceProblems));
    },
  });
  if (isTablePath(path)) {
    const { csvJobs } = await import('./csv.js');
    return streamed((b, problems) => csvJobs(abs, path, b, problems));
  }
  if (isJsonlPath(path)) {
    const { jsonlJobs } = await import('./jsonl.js');
    return streamed((b, problems) => jsonlJobs(abs, path, dir, b, problems));
  }
  let yaml: YamlManifest | null = null;
  let readProblem: Problem | null = null;
  try {
    yaml = await (await import('./yaml.js')).openYaml(abs, path, dir);
  } catch (err) {
    const code = (err as { code?: string }).code;
    readProblem = { job: null, where: path, path: '', message: code === 'ENOENT' ? 'manifest file not found' : `cannot read the manifest: ${(err as Error).message}` };
  }
  const fixed = readProblem ? [readProblem] : (yaml?.problems ?? []);
  sourceProblems = [...fixed];
  return {
    path,
    dir,
    budget: yaml?.budget ?? null,
    budgetPerInvocation: yaml?.budgetPerInvocation ?? null,
    pricing: yaml?.pricing ?? null,
    get problems() {
      return sourceProblems;
    },
    get links() {
      return links;
    },
    async *jobs() {
      sourceProblems = [...fixed];
      if (yaml) yield* withGraph((b) => yaml.jobs(b, sourceProblems));
    },
  };
}

/**
 * Local image paths in a job's image fields, for the runner to upload and
 * replace: `path` is where the value sits (`input.image_urls[0]`), `file` the
 * absolute file. http(s) and data: URLs are not listed.
 */
export function localImageRefs(job: ManifestJob): Array<{ path: string; file: string }> {
  const spec = job.kind === 'submit' ? findModel(job.model) : undefined;
  if (!spec) return [];
  const out: Array<{ path: string; file: string }> = [];
  for (const field of spec.imageFields) {
    for (const [path, value] of valuesAt(job.input, field, 'input')) {
      if (typeof value === 'string' && value !== '' && !isRemoteRef(value) && !hasRef(value)) {
        out.push({ path, file: isAbsolute(value) ? value : resolve(job.dir, value) });
      }
    }
  }
  return out;
}

/**
 * Read every job and return the job count and every problem, in the order
 * they are met: reading problems first, then source and job problems as the
 * jobs stream by.
 */
export async function validateManifest(path: string, options: OpenOptions = {}): Promise<{ jobs: number; problems: Problem[] }> {
  const manifest = await openManifest(path, options);
  const problems: Problem[] = [];
  let seen = 0;
  const takeManifestProblems = () => {
    const list = manifest.problems;
    for (; seen < list.length; seen++) problems.push(list[seen] as Problem);
  };
  let jobs = 0;
  for await (const job of manifest.jobs()) {
    takeManifestProblems();
    jobs++;
    for (const p of job.problems) problems.push(p);
  }
  takeManifestProblems();
  return { jobs, problems };
}
