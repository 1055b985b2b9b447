import { decide } from '../client/index.js';
import { UnsafeResultError } from '../errors.js';
import type { JobRow } from '../store/index.js';
import { fetchJob } from './fetch.js';
import { PipelineState, errorText } from './pipeline-state.js';

/**
 * A download that still fails on a transient error (429, 5xx, dropped or cut connection) after the
 * client's retries is tried again in the same run, after a pause of 30 s, 60 s, 90 s (x time scale),
 * at most this many times; then the job is left `downloading` for the next run.
 */
const DOWNLOAD_REQUEUES = 3;
const DOWNLOAD_PAUSE_MS = 30_000;

/** Downloads: jobs whose task finished, fetched soonest-expiring first. */
export class PipelineDownloads extends PipelineState {
  // ---- downloads ----

  /**
   * Start downloads, soonest-expiring first. Jobs that were `downloading` when
   * the run started are read from the store once; jobs that finish during the
   * run are queued in memory as they arrive (no query per download).
   */
  protected fillDownloads(): number {
    if (!this.downloadsLoaded) {
      this.downloadsLoaded = true;
      for (const row of this.store.jobsIn('downloading')) this.downloadHeap.push({ at: row.expires_at ?? 0, id: row.id });
    }
    let next = Infinity;
    if (this.downloadAgain.size > 0) {
      const now = Date.now();
      for (const [id, at] of this.downloadAgain) {
        if (at > now) next = Math.min(next, at);
        else {
          this.downloadAgain.delete(id);
          const row = this.store.getJob(id);
          if (row?.state === 'downloading') this.downloadHeap.push({ at: row.expires_at ?? 0, id });
        }
      }
    }
    // Downloads wait on the disk (fsync) more than on the network: twice the submit slots.
    while (this.downloading.size < this.opts.concurrency * 2) {
      const next = this.downloadHeap.pop();
      if (!next) break;
      const row = this.store.getJob(next.id);
      if (!row || row.state !== 'downloading') continue;
      this.downloading.add(row.id);
      void this.downloadJob(row)
        .catch((err: unknown) => this.opts.emit({ type: 'warning', message: `job ${row.id}: ${errorText(err)}` }))
        .finally(() => {
          this.downloading.delete(row.id);
          this.wake();
        });
    }
    return next;
  }

  protected async downloadJob(row: JobRow): Promise<void> {
    try {
      const finished = await fetchJob(row, { store: this.store, download: this.download, outDir: this.opts.outDir, signal: this.opts.signal, emit: this.opts.emit });
      // The files are recorded in the same transaction as the state change (one per job).
      if (finished) {
        this.move(row.id, 'downloading', 'done', {}, finished);
        this.rescanPending(row.id);
      }
    } catch (err) {
      if (this.opts.signal.aborted) return;
      if (this.download.isGone(err)) {
        this.move(row.id, 'downloading', 'expired', { last_error: `results no longer available: ${errorText(err)}` });
      } else if (err instanceof UnsafeResultError) {
        this.move(row.id, 'downloading', 'failed', { last_error: err.message });
      } else if (decide(err, 'GET') === 'retry' && (this.downloadRetries.get(row.id) ?? 0) < DOWNLOAD_REQUEUES) {
        // The client's retries were used up on a transient error: tried again in this run after a pause.
        const round = (this.downloadRetries.get(row.id) ?? 0) + 1;
        this.downloadRetries.set(row.id, round);
        this.downloadAgain.set(row.id, Date.now() + this.scaled(DOWNLOAD_PAUSE_MS * round));
        this.store.noteError(row.id, `download failed, tried again in this run: ${errorText(err)}`);
      } else {
        // Not transient, or tried again often enough: the job stays `downloading` for the next run.
        this.store.noteError(row.id, `download failed: ${errorText(err)}`);
        this.opts.emit({ type: 'warning', message: `job ${row.id}: download failed (${errorText(err)}); left for the next run` });
      }
    }
  }
}
