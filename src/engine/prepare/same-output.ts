import { existsSync, realpathSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { UsageError } from '../../errors.js';

/**
 * A run's state records where its results are (`runs.out_dir`). Given the same state and another output
 * folder or bucket, a run would report jobs done whose files are not there (and write new ones beside
 * nothing): refused, exit 2, naming both. Not refused: the same folder by another path (both exist and
 * resolve to one folder), and a SQLite state kept in the given folder (`<out>/state.db`, the default: the
 * folder was moved or copied with its state, so its files came along).
 */
export interface SameOutputCheck {
  /** The run's manifest (absolute path). */
  manifest: string;
  /** What the state recorded; undefined or null: no run of this manifest yet. */
  recorded: string | null | undefined;
  /** The folder (absolute) or `s3://bucket/prefix` this run was given. */
  given: string;
  /** The state as it may be printed (a path, or a URL with its password hidden). */
  state: string;
  /** The SQLite state file (absolute), or null for PostgreSQL. */
  stateFile: string | null;
}

export function checkSameOutput(c: SameOutputCheck): void {
  const { recorded, given } = c;
  if (recorded === undefined || recorded === null || recorded === given) return;
  const local = (p: string) => !/^s3:\/\//i.test(p);
  if (local(recorded) && local(given)) {
    if (c.stateFile !== null && dirname(c.stateFile) === resolve(given)) return;
    if (existsSync(recorded) && existsSync(given) && realpathSync(recorded) === realpathSync(given)) return;
  }
  const what = local(recorded) && local(given) ? 'folder' : 'place';
  const worker = c.stateFile === null ? ` (a machine that sees the folder at another path joins with \`genbatch work --out DIR\`)` : '';
  throw new UsageError(
    `the state ${c.state} records the output of ${c.manifest} in ${recorded}, and --out names another ${what}, ${given}: ` +
      `its recorded results are not there. Go on with --out ${recorded}${worker}, or start a run into ${given} with a new state (--state PATH)`,
  );
}
