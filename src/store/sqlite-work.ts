import { GroupCommit } from './group-commit.js';
import type { ChildInput } from './graph.js';
import type { Claim, FileGot, JobWithFiles, MoveOptions, Moved, ReleaseUploadSlot, SideMove, TakenOver, WorkStore } from './port.js';
import type { JobState } from './states.js';
import type { Store } from './store.js';
import type { FileRow, JobPatch, JobRow, TakenJob } from './types.js';

/** Rows read from the state file per query while claiming. */
const CLAIM_BATCH = 64;

const noSlot: ReleaseUploadSlot = () => Promise.resolve();

/**
 * WorkStore over the synchronous SQLite Store of one writer (the process holding the state
 * file's lease), for the work loop of `genbatch run`. Every call does its work at once, on the
 * caller's turn of the event loop, as Store does, and answers with a settled promise; durable
 * transitions go through GroupCommit (one transaction and one fsync for the changes of the same
 * moment). Claims are a cursor over the pending jobs in manifest order: the jobs handed out are
 * held until they leave `pending` or are released, so a later claim never returns them again; a
 * job becoming `done` moves the cursor back to the first pending job waiting for it. Leases
 * always hold (lost only with the file's: leaseLost). No budget is reserved: the run checks its
 * cap before it starts.
 */
export class SqliteWorkStore implements WorkStore {
  readonly worker = null;
  readonly heartbeatMs = null;
  readonly takeOverMs = null;
  private readonly group: GroupCommit;
  /** The seq of the last pending job claimPending handed out or passed over. */
  private cursor = 0;
  /** Pending jobs read after the cursor and not yet handed out (one query reads a batch). */
  private ahead: JobRow[] = [];
  /** Pending jobs handed out by claimPending and not yet moved from `pending` or released: id -> seq. */
  private readonly held = new Map<string, number>();
  /** `only` jobs handed out so far: once all were, claimPending reads no further. */
  private readonly givenOnly = new Set<string>();
  private tookOver = false;
  private graphOn: boolean | null = null;

  constructor(readonly store: Store) {
    this.group = new GroupCommit(store);
  }

  get leaseLost(): boolean {
    return this.store.leaseLost;
  }

  hasGraph(): Promise<boolean> {
    return attempt(() => this.graph());
  }

  private graph(): boolean {
    return (this.graphOn ??= this.store.graph.any());
  }

  claimPending(n: number, opts: { only?: ReadonlySet<string> | null; skip?: ReadonlySet<string> } = {}): Promise<Claim> {
    return attempt(() => {
      const only = opts.only ?? null;
      const jobs: JobRow[] = [];
      let short = false;
      while (jobs.length < n && !(only && this.givenOnly.size >= only.size)) {
        if (this.ahead.length === 0) {
          if (short) break;
          this.ahead = this.store.nextPending(this.cursor, CLAIM_BATCH);
          short = this.ahead.length < CLAIM_BATCH;
          if (this.ahead.length === 0) break;
        }
        const row = this.ahead.shift()!;
        this.cursor = row.seq;
        if (this.held.has(row.id) || (only && !only.has(row.id)) || opts.skip?.has(row.id)) continue;
        this.held.set(row.id, row.seq);
        if (only) this.givenOnly.add(row.id);
        jobs.push(row);
      }
      return { jobs, overBudget: false };
    });
  }

  release(ids: readonly string[]): Promise<void> {
    for (const id of ids) {
      const seq = this.held.get(id);
      if (seq === undefined) continue;
      this.held.delete(id);
      this.givenOnly.delete(id);
      // Claimable again: the cursor goes back to it.
      this.rewind(seq - 1);
    }
    return Promise.resolve();
  }

  /** Read pending jobs again from after `seq` (the rows read ahead are read again too). */
  private rewind(seq: number): void {
    if (seq >= this.cursor) return;
    this.cursor = seq;
    this.ahead = [];
  }

  dropLeases(): Promise<void> {
    return Promise.resolve();
  }

  adoptWaiting(): Promise<TakenJob | null> {
    return Promise.resolve(null);
  }

  takeOver(): Promise<TakenOver> {
    return attempt(() => {
      if (this.tookOver) return { submitted: [], downloading: [], moves: [] };
      this.tookOver = true;
      return { submitted: this.store.takenJobs('submitted'), downloading: this.store.takenJobs('downloading'), moves: [] };
    });
  }

  heartbeat(): Promise<void> {
    return Promise.resolve();
  }

  getJob(id: string): Promise<JobRow | undefined> {
    return attempt(() => this.store.getJob(id));
  }

  jobOfTask(taskId: string, except: string): Promise<string | null> {
    return attempt(() => this.store.jobOfTask(taskId, except));
  }

  transition(id: string, from: JobState, to: JobState, patch: JobPatch = {}, o: MoveOptions = {}): Promise<Moved> {
    const also =
      o.addFiles || o.filesDone
        ? () => {
            if (o.addFiles) this.store.addFiles(id, [...o.addFiles]);
            for (const f of o.filesDone ?? []) this.store.fileDone(id, f.idx, f);
          }
        : undefined;
    if (o.durable) return this.group.commit(() => this.store.transition(id, from, to, patch, also)).then(() => this.moved(id, from, to));
    return attempt(() => {
      this.store.transition(id, from, to, patch, also);
      return this.moved(id, from, to);
    });
  }

  /** After a move of this store: the claim and the cursor follow it; the job graph's moves are reported. */
  private moved(id: string, from: JobState, to: JobState): Moved {
    if (from === 'pending') this.held.delete(id);
    if (to === 'done' && this.graph()) {
      // Jobs waiting for it may be ready now: pending jobs are read again from the first of them.
      const first = this.store.graph.firstPendingChild(id);
      if (first !== null) this.rewind(first - 1);
    }
    return { moved: true, side: this.sideMoves() };
  }

  /** Descendants brought back (first: one brought back and skipped again ends skipped) and skipped by the job graph. */
  private sideMoves(): SideMove[] {
    const side: SideMove[] = [];
    for (const id of this.store.graph.drainRevived()) side.push({ id, from: 'skipped', to: 'pending', error: null });
    for (const s of this.store.graph.drainSkipped()) side.push({ id: s.id, from: 'pending', to: 'skipped', error: s.reason });
    return side;
  }

  noteError(id: string, message: string): Promise<void> {
    return attempt(() => this.store.noteError(id, message));
  }

  jobsWithFiles(ids: readonly string[]): Promise<Map<string, JobWithFiles>> {
    return attempt(() => {
      const got = new Map<string, JobWithFiles>();
      for (const id of ids) {
        const job = this.store.getJob(id);
        if (job) got.set(id, { job, files: this.store.filesOf(id) });
      }
      return got;
    });
  }

  filesOf(id: string): Promise<FileRow[]> {
    return attempt(() => this.store.filesOf(id));
  }

  recordFiles(id: string, got: readonly FileGot[]): Promise<boolean> {
    return attempt(() => {
      if (got.length === 0) return true;
      this.store.db.transaction(() => {
        for (const f of got) this.store.fileDone(id, f.idx, f);
      })();
      return true;
    });
  }

  parentsOf(id: string): Promise<string[]> {
    return attempt(() => this.store.graph.parentsOf(id));
  }

  expand(templateId: string, children: readonly ChildInput[], note: string): Promise<string[] | null> {
    return attempt(() => {
      const made = this.store.graph.expand(templateId, children, note);
      this.held.delete(templateId);
      return made;
    });
  }

  estimate(): Promise<{ known: number; unknown: number }> {
    return attempt(() => this.store.estimate());
  }

  getMeta(key: string): Promise<string | null> {
    return attempt(() => this.store.getMeta(key));
  }

  setMeta(key: string, value: string | null): Promise<void> {
    return attempt(() => this.store.setMeta(key, value));
  }

  findUpload(baseUrl: string, sha256: string, maxAgeMs: number): Promise<string | null> {
    return attempt(() => this.store.findUpload(baseUrl, sha256, maxAgeMs));
  }

  recordUpload(baseUrl: string, sha256: string, fileUrl: string): Promise<void> {
    return attempt(() => this.store.recordUpload(baseUrl, sha256, fileUrl));
  }

  acquireUploadSlot(signal?: AbortSignal): Promise<ReleaseUploadSlot> {
    return signal?.aborted ? Promise.reject(signal.reason) : Promise.resolve(noSlot);
  }

  acquireStatusRead(signal?: AbortSignal): Promise<void> {
    return signal?.aborted ? Promise.reject(signal.reason) : Promise.resolve();
  }
}

/** fn's value as a settled promise: run now, on the caller's turn (a throw becomes the rejection). */
function attempt<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err);
  }
}
