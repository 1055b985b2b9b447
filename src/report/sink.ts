/**
 * Reports written in one pass over the jobs: each report is a sink that takes
 * job after job (a streamed report returns its text for the job; the others
 * keep their bounded lists and write everything at the end). Every job is read
 * once from the state, whatever the number of reports, and no list of all jobs
 * is built. Each report is written through a ReportWriter: on disk its own atomic file (temporary file,
 * fsync, rename), in a bucket one object (src/report/objects.ts).
 */
import { dirname } from 'node:path';
import { AtomicWriter, syncDir } from './atomic.js';
import type { ReportJob } from './types.js';

/**
 * One report being written: text pushed in order, flush() when push() says so, then finish() (complete
 * and durable, not yet under its final name where that is possible) and commit() (under its final name);
 * abort() after any failure leaves nothing half-written under the final name.
 */
export interface ReportWriter {
  push(text: string): boolean;
  flush(): Promise<void>;
  finish(): Promise<void>;
  commit(): Promise<void>;
  abort(): Promise<void>;
}

/** Opens the report named by a path (or key): on disk by default, an AtomicWriter. */
export type OpenReport = (where: string) => Promise<ReportWriter>;

export interface ReportSink {
  /** Text before the first job. */
  start(): string;
  /** Text for this job, written now ('' when the sink keeps what it needs for end()). */
  job(job: ReportJob): string;
  /** The rest of the file, after the last job. */
  end(): string[];
}

/**
 * Write each `[path, sink]` from one pass over `jobs`, each through `open(path)` (default: an atomic file).
 * On any error (from the jobs or the disk) no report is replaced: every temporary file is
 * removed and the error rethrown. The files are renamed (committed) in the order given,
 * once all four are complete and on disk; each folder is fsynced once after.
 */
export async function writeSinks(targets: ReadonlyArray<readonly [string, ReportSink]>, jobs: Iterable<ReportJob>, open: OpenReport = (p) => AtomicWriter.open(p)): Promise<void> {
  const files: ReportWriter[] = [];
  const sinks = targets.map(([, sink]) => sink);
  const n = sinks.length;
  try {
    for (const [path] of targets) files.push(await open(path));
    for (let i = 0; i < n; i++) await put(files[i]!, sinks[i]!.start());
    for (const job of jobs) {
      let due = false;
      for (let i = 0; i < n; i++) {
        const text = sinks[i]!.job(job);
        if (text !== '' && files[i]!.push(text)) due = true;
      }
      if (due) await settled(files.map((f) => f.flush()));
    }
    for (let i = 0; i < n; i++) for (const part of sinks[i]!.end()) await put(files[i]!, part);
    await settled(files.map((f) => f.finish()));
    for (const f of files) await f.commit();
  } catch (err) {
    await Promise.all(files.map((f) => f.abort()));
    throw err;
  }
  const onDisk = files.filter((f): f is AtomicWriter => f instanceof AtomicWriter);
  for (const dir of new Set(onDisk.map((f) => dirname(f.finalPath)))) await syncDir(dir);
}

async function put(file: ReportWriter, text: string): Promise<void> {
  if (text !== '' && file.push(text)) await file.flush();
}

/** Wait for every promise (none is left in flight when a file is then aborted); rethrow the first failure. */
async function settled(promises: Array<Promise<void>>): Promise<void> {
  const results = await Promise.allSettled(promises);
  for (const r of results) if (r.status === 'rejected') throw r.reason;
}
