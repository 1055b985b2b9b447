import { join } from 'node:path';
import { decide } from '../../client/index.js';
import { UnsafeResultError } from '../../errors.js';
import { MinHeap } from '../../lib/heap.js';
import type { FileRow, JobRow } from '../../store/index.js';
import { fetchJob } from '../fetch/fetch.js';
import { outputRoot } from '../files.js';
import type { Root } from '../../lib/root.js';
import { errorText, type StageContext } from './context.js';
import type { DownloadPort } from '../ports.js';

/**
 * A download that still fails on a transient error (429, 5xx, dropped or cut connection) after the
 * client's retries is tried again in the same run, after a pause of 30 s, 60 s, 90 s (x time scale),
 * at most this many times; then the job is left `downloading` for the next run.
 */
const DOWNLOAD_REQUEUES = 3;
const DOWNLOAD_PAUSE_MS = 30_000;
/** Jobs read with their file rows by one statement when downloads start (fewer statements per job with PostgreSQL). */
const READ_AT_ONCE = 64;

/**
 * Downloads: jobs whose task finished (queued by Polls as they finish, or taken over at the
 * start), fetched soonest-expiring first, 2 x concurrency at once (they wait on fsync more than
 * on the network). `finished(id)` is told when a job became `done`.
 */
export class Downloads {
  private readonly queue = new MinHeap<{ at: number; id: string }>();
  private readonly active = new Set<string>();
  /** Jobs whose download failed on a transient error in this run, waiting to be tried again: id -> when. */
  private readonly again = new Map<string, number>();
  /** How often each job's download was tried again in this run. */
  private readonly retries = new Map<string, number>();
  /** The output folder's Root, opened at the first download (none for a bucket). */
  private root: Root | undefined;
  /**
   * The read of the next jobs' rows and the downloads it starts, while it runs: one at a time, and the pipeline's
   * loop does not wait for it (with PostgreSQL a round trip, during which a free submit slot would wait too).
   */
  private reading: Promise<void> | null = null;
  /** What that read threw: thrown by the next fill(), as a read made there would have. */
  private readError: unknown = null;

  constructor(
    private readonly c: StageContext,
    private readonly download: DownloadPort,
    private readonly finished: (id: string) => void,
  ) {}

  /** Downloads running now, and the read that starts the next ones. */
  get busy(): number {
    return this.active.size + (this.reading ? 1 : 0);
  }

  /** Jobs waiting for their download (queued, or paused before a try again). */
  get queued(): number {
    return this.queue.size + this.again.size;
  }

  /**
   * Queue a `downloading` job this worker took over (a stopped run's, or a dead worker's): the temporary files
   * its earlier download left in the job's folder are removed first.
   */
  async takeOver(id: string, expiresAt: number | null): Promise<void> {
    await this.download.cleanupPartials(join(this.c.opts.outDir, this.download.sanitizeName(id)));
    this.add(id, expiresAt);
  }

  /** Queue a `downloading` job (its results expire at `expiresAt`, ms epoch). */
  add(id: string, expiresAt: number | null): void {
    this.queue.push({ at: expiresAt ?? 0, id });
  }

  /** Start downloads, soonest-expiring first; returns when the next paused one may be tried again (ms epoch). */
  async fill(): Promise<number> {
    const err = this.readError;
    this.readError = null;
    if (err !== null) throw err;
    let next = Infinity;
    if (this.again.size > 0) {
      const now = Date.now();
      for (const [id, at] of this.again) {
        if (at > now) next = Math.min(next, at);
        else {
          this.again.delete(id);
          const row = await this.c.store.getJob(id);
          if (row?.state === 'downloading') this.add(id, row.expires_at);
        }
      }
    }
    // Only with room for a download: a read that could start none would end, wake the loop, and be made again at once.
    if (!this.reading && this.queue.size > 0 && this.active.size < this.c.opts.concurrency * 2) {
      this.reading = this.start()
        .catch((e: unknown) => void (this.readError = e))
        .finally(() => {
          this.reading = null;
          this.c.wake();
        });
    }
    return next;
  }

  /** Read the next jobs (soonest-expiring first) up to the room left, with their file rows in one go, and start them. */
  private async start(): Promise<void> {
    for (;;) {
      const tops: string[] = [];
      const room = Math.min(READ_AT_ONCE, this.c.opts.concurrency * 2 - this.active.size);
      while (tops.length < room) {
        const top = this.queue.pop();
        if (!top) break;
        tops.push(top.id);
      }
      if (tops.length === 0) break;
      const got = await this.c.store.jobsWithFiles(tops);
      // Stopped during the read (Ctrl-C, the lease lost): none started; they stay `downloading` for the next run.
      if (this.c.opts.signal.aborted || this.c.stopReason === 'lease-lost') return;
      for (const id of tops) {
        const read = got.get(id);
        if (!read || read.job.state !== 'downloading' || this.active.has(id)) continue;
        const row = read.job;
        this.active.add(row.id);
        void this.fetch(row, read.files)
          .catch((err: unknown) => this.c.warn(row.id, err))
          .finally(() => {
            this.active.delete(row.id);
            this.c.wake();
          });
      }
    }
  }

  /** `files`: the job's file rows, read with it (only this worker writes them while it holds the job). */
  private async fetch(row: JobRow, files: FileRow[]): Promise<void> {
    const { store, opts } = this.c;
    try {
      // The output folder's Root is opened once for the run (its realpath then is the bound every job folder is checked against).
      this.root ??= this.download.bucket ? undefined : outputRoot(opts.outDir);
      const got = await fetchJob(row, { store, download: this.download, outDir: opts.outDir, signal: opts.signal, emit: opts.emit, root: this.root, files });
      // The files are recorded in the same transaction as the state change (one per job).
      if (got && (await this.c.move(row.id, 'downloading', 'done', {}, { filesDone: got }))) this.finished(row.id);
    } catch (err) {
      if (opts.signal.aborted) return;
      if (this.download.isGone(err)) {
        await this.c.move(row.id, 'downloading', 'expired', { last_error: `results no longer available: ${errorText(err)}` });
      } else if (err instanceof UnsafeResultError) {
        await this.c.move(row.id, 'downloading', 'failed', { last_error: err.message });
      } else if (decide(err, 'GET') === 'retry' && (this.retries.get(row.id) ?? 0) < DOWNLOAD_REQUEUES) {
        // The client's retries were used up on a transient error: tried again in this run after a pause.
        const round = (this.retries.get(row.id) ?? 0) + 1;
        this.retries.set(row.id, round);
        this.again.set(row.id, Date.now() + this.c.scaled(DOWNLOAD_PAUSE_MS * round));
        await store.noteError(row.id, `download failed, tried again in this run: ${errorText(err)}`);
      } else {
        // Not transient, or tried again often enough: the job stays `downloading` for the next run.
        await store.noteError(row.id, `download failed: ${errorText(err)}`);
        await this.c.giveUp(row.id);
        opts.emit({ type: 'warning', message: `job ${row.id}: download failed (${errorText(err)}); left for the next run` });
      }
    }
  }
}
