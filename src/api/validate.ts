import type { Problem } from '../errors.js';
import { validateManifest } from '../manifest/index.js';

export interface ValidateResult {
  /** True when no problem was found. */
  valid: boolean;
  /** Jobs read (valid or not). */
  jobs: number;
  /** Every problem, in the order met: `{job, where, path, message}` (formatProblem() gives the CLI's line). */
  problems: Problem[];
}

/**
 * Check every job of a manifest (YAML, CSV or TSV) without touching the service: the object
 * `genbatch validate --json` prints. Problems are returned, not thrown; a missing file is a problem too.
 */
export async function validate(manifestPath: string, opts: { confine?: boolean } = {}): Promise<ValidateResult> {
  const { jobs, problems } = await validateManifest(manifestPath, { confine: opts.confine === true });
  return { valid: problems.length === 0, jobs, problems };
}
