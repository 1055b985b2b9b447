import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { checkServiceOptions } from '../../api/run.js';
import { UsageError } from '../../errors.js';
import { parseStateLocation, stateOption, STATE_ENV } from '../../store/location.js';
import { chooseRun, runName } from '../../store/run-name.js';
import type { RunRow } from '../../store/types.js';
import { flushed, ignoreBrokenPipe } from '../progress.js';

/**
 * `genbatch work --state postgres://... [--run NAME] [--until-empty]`: a worker that joins a run kept in
 * PostgreSQL without its manifest (a pod that only pulls work). The run was made by `genbatch run <manifest>
 * --state URL`; this process claims its jobs beside any other worker, with run's service and output flags.
 */

export interface WorkFlags {
  state?: string;
  run?: string;
  untilEmpty?: boolean;
  baseUrl?: string;
  out?: string;
  concurrency: number;
  yes?: boolean;
  json?: boolean;
  callbackUrl?: string;
  listen?: string;
  timeScale?: number;
  statusRate?: string;
  requestTimeout?: number | string;
}

/**
 * The output folder a worker writes to: --out, else the folder the run recorded, which must be there on this
 * machine (storage every worker sees, mounted at the same path); a worker never makes it, so that results
 * never go to a local disk by mistake.
 */
export function workOutDir(run: Pick<RunRow, 'manifest' | 'out_dir'>, out: string | undefined): string {
  if (out !== undefined) return resolve(out);
  if (!existsSync(run.out_dir)) {
    throw new UsageError(`the output folder of ${runName(run)}, ${run.out_dir}, is not on this machine; mount the shared folder there, or pass --out DIR where this machine sees it`);
  }
  return run.out_dir;
}

export default async function work(flags: WorkFlags): Promise<number> {
  ignoreBrokenPipe();
  const named = stateOption(flags.state);
  if (named === undefined) throw new UsageError(`work expects --state postgres://USER:PASSWORD@HOST:PORT/DATABASE (or ${STATE_ENV}): the database that holds the run`);
  const location = parseStateLocation(named, flags.state === undefined ? STATE_ENV : '--state');
  if (location.kind !== 'postgres') {
    throw new UsageError(`work joins a run kept in PostgreSQL (--state postgres://...); ${location.path} is a SQLite state file, which has one writer: use genbatch run <manifest> --state ${location.path}`);
  }
  await checkServiceOptions(flags);
  const { PgReader } = await import('../../store/pg/snapshot.js');
  const reader = await PgReader.open(location.url, location.display);
  try {
    const run = chooseRun(await reader.runs(), flags.run, `the PostgreSQL state ${location.display}`);
    const outDir = workOutDir(run, flags.out);
    process.stderr.write(`genbatch work: run ${runName(run)} (${run.manifest}), output folder ${outDir}\n`);
    throw new UsageError('genbatch work: the worker loop on a PostgreSQL state is not built yet');
  } finally {
    await reader.close();
    await flushed(process.stderr);
  }
}
