import { createHash } from 'node:crypto';
import { throwIfAborted } from '../../client/retry.js';
import { TransitionError } from '../../errors.js';
import type { ChildInput } from '../graph.js';
import type { Claim, FileGot, JobWithFiles, MoveOptions, Moved, ReleaseUploadSlot, SideMove, TakenOver, WorkStore } from '../port.js';
import { ACTIVE_STATES, PARENT_FAILED_STATES, type JobState } from '../states.js';
import type { FileRow, JobPatch, JobRow, TakenJob } from '../types.js';
import { releaseReservation, setBudgetCap } from './budget.js';
import { inTx, named, type Client, type Pool, type Queryable } from './db.js';
import { afterMove, insertChildren } from './graph.js';
import { adoptMove, adoptWaiting, assertAllowed, claimPending, free, guardedMove, held, ROW_COLUMNS, takeOver, writeWith, type WithMove } from './leases.js';
import { addFiles, clearMark, filesDone } from './move-writes.js';
import { NOW_ISO, NOW_MS } from './schema.js';
import { coolDownUploads, endUploadSlot, takeUploadSlot } from './upload-slots.js';
import { heartbeat, newWorkerId, registerWorker, type WorkerIdentity } from './workers.js';
import { liveWorkers, ReadShare } from './read-share.js';
import { MoveGroup } from './move-group.js';

/**
 * WorkStore over a PostgreSQL state (src/store/port.ts): one worker of any number working on one run.
 * Jobs are claimed and taken over under leases (src/store/pg/leases.ts); this object remembers the epoch
 * of each lease it holds and every write about a job is guarded by it, so a write after the lease was
 * lost answers `{ moved: false }` / false / null and changes nothing. Each transition is one transaction
 * with its file rows, error history, mark and job-graph effects and budget release; PostgreSQL commits
 * are durable, so `durable` needs nothing more. Upload slots and status-read permits are rows shared by
 * every worker of the API key (by its fingerprint: the key itself is never stored).
 */
export interface PgWorkStoreOptions {
  pool: Pool;
  runId: number;
  /** The API key: only its fingerprint is kept (keyFingerprint). */
  apiKey: string;
  worker?: WorkerIdentity;
  /** Lease of a claimed job (default 30 s). */
  leaseMs?: number;
  /** Default leaseMs / 3. */
  heartbeatMs?: number;
  /** How often the pipeline looks for dead workers' jobs (default 5 s). */
  takeOverMs?: number;
  /** The run's credit cap shared by its workers (--max-credits / the manifest budget); undefined leaves the row as it is. */
  creditCap?: number | null;
  /** Status reads per second of the key, evenly spaced (default 10, as the client's; the caller divides by --time-scale). */
  statusRatePerSec?: number;
  /**
   * Uploads per window of the key (default 5 per 61.2 s: the service's 5 a minute with the client's 2%
   * margin for clock skew and latency); the caller scales windowMs with --time-scale.
   */
  uploads?: { limit: number; windowMs: number };
  /** How often a worker waiting for an upload slot asks again (default 1 s). */
  slotPollMs?: number;
}

/** The API key's fingerprint: sha256, first 16 hex digits. */
export function keyFingerprint(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 16);
}

/** The moves from which a job's reserved credits go back to the run (nothing was charged). */
function uncharged(from: JobState, to: JobState): boolean {
  if (to === 'pending') return true;
  if (from === 'pending') return to === 'failed' || to === 'skipped' || to === 'done';
  return from === 'submitting' && (to === 'failed' || to === 'exists');
}

const TAKE_OVER_BATCH = 1000;

const FILE_COLUMNS = 'job_id, idx, name, url, type, content_type, expected_size, path, size, sha256, expires_at, state';

export class PgWorkStore implements WorkStore {
  readonly worker: string;
  /** How often this worker beats. */
  readonly beatEveryMs: number;
  readonly takeOverMs: number;
  private readonly pool: Pool;
  private readonly runId: number;
  private readonly leaseMs: number;
  private readonly key: string;
  private readonly o: PgWorkStoreOptions;
  /** The jobs this worker holds: id -> lease epoch. */
  private readonly held = new Map<string, number>();
  /** When a heartbeat last got through (or the store opened), and whether the latest one failed. */
  private lastBeat = Date.now();
  private beatFailing = false;
  private generation = 0;
  private graphOn: boolean | null = null;
  /** The timer of beatInBackground while it runs. */
  private beatTimer: NodeJS.Timeout | null = null;
  /** Upload slots this worker holds now: the heartbeat renews slots only while there are some (a run without uploads costs nothing). */
  private slotsHeld = 0;
  /** This worker's share of the key's status-read rate, spent locally (read-share.ts). */
  private readonly reads: ReadShare;
  /** This worker's job moves, grouped into shared transactions (move-group.ts). */
  private readonly moves: MoveGroup;

  private constructor(o: PgWorkStoreOptions, worker: WorkerIdentity) {
    this.o = o;
    this.pool = o.pool;
    this.runId = o.runId;
    this.worker = worker.id;
    this.leaseMs = o.leaseMs ?? 30_000;
    this.beatEveryMs = o.heartbeatMs ?? Math.max(1, Math.floor(this.leaseMs / 3));
    this.takeOverMs = o.takeOverMs ?? 5_000;
    this.key = keyFingerprint(o.apiKey);
    this.reads = new ReadShare(o.statusRatePerSec ?? 10);
    this.moves = new MoveGroup(o.pool);
  }

  /** Register this worker and, when given, set the run's credit cap. */
  static async open(o: PgWorkStoreOptions): Promise<PgWorkStore> {
    const worker = o.worker ?? newWorkerId();
    const s = new PgWorkStore(o, worker);
    await registerWorker(o.pool, worker, s.leaseMs);
    s.reads.setWorkers(await liveWorkers(o.pool, s.leaseMs));
    if (o.creditCap !== undefined) await setBudgetCap(o.pool, o.runId, o.creditCap);
    const r = await o.pool.query<{ generation: number }>('SELECT generation FROM runs WHERE id = $1', [o.runId]);
    s.generation = r.rows[0]?.generation ?? 0;
    return s;
  }

  /** Heartbeats have failed for a whole lease (the database unreachable): every lease this worker had may be another's now. */
  get leaseLost(): boolean {
    return this.beatFailing && Date.now() - this.lastBeat > this.leaseMs;
  }

  async hasGraph(): Promise<boolean> {
    if (this.graphOn === null) {
      const r = await this.pool.query('SELECT 1 FROM job_links WHERE run_id = $1 LIMIT 1', [this.runId]);
      this.graphOn = (r.rowCount ?? 0) > 0;
    }
    return this.graphOn;
  }

  async claimPending(n: number, opts: { only?: ReadonlySet<string> | null; skip?: ReadonlySet<string> } = {}): Promise<Claim> {
    if (n <= 0) return { jobs: [], overBudget: false };
    const only = opts.only ? [...opts.only] : null;
    const skip = opts.skip && opts.skip.size > 0 ? [...opts.skip] : null;
    // A claim need not survive a server crash (its job would be pending and free again).
    const c = await inTx(this.pool, (tx) => claimPending(tx, this.runId, this.worker, this.leaseMs, n, only, skip), { durable: false });
    return { jobs: c.jobs.map((j) => this.hold(j)), overBudget: c.heldByBudget };
  }

  /** Remember the lease of a job just claimed or taken over; the row without its epoch. */
  private hold<T extends { id: string; lease_epoch: number }>(j: T): Omit<T, 'lease_epoch'> {
    const { lease_epoch, ...row } = j;
    this.held.set(j.id, lease_epoch);
    return row;
  }

  async release(ids: readonly string[]): Promise<void> {
    for (const id of ids) {
      const epoch = this.held.get(id);
      if (epoch === undefined) continue;
      this.held.delete(id);
      await inTx(this.pool, async (tx) => {
        const r = await tx.query(
          `UPDATE jobs SET lease_owner = NULL, lease_expires = NULL WHERE run_id = $1 AND id = $2 AND state = 'pending' AND lease_owner = $3 AND lease_epoch = $4`,
          [this.runId, id, this.worker, epoch],
        );
        if (r.rowCount === 1) await releaseReservation(tx, this.runId, id);
      });
    }
  }

  async takeOver(skip: readonly string[] = []): Promise<TakenOver> {
    return inTx(this.pool, async (tx) => {
      const t = await takeOver(tx, this.runId, this.worker, this.leaseMs, TAKE_OVER_BATCH, skip);
      const moves: SideMove[] = [];
      for (const [ids, to] of [
        [t.uncertain, 'uncertain'],
        [t.pending, 'pending'],
      ] as const) {
        for (const id of ids) {
          const err = await tx.query<{ e: string }>('SELECT last_error AS e FROM jobs WHERE run_id = $1 AND id = $2', [this.runId, id]);
          const error = err.rows[0]?.e ?? null;
          if (error !== null) await this.recordError(tx, id, error);
          if (to === 'pending') await releaseReservation(tx, this.runId, id);
          moves.push({ id, from: 'submitting', to, error });
          moves.push(...(await afterMove(tx, this.runId, id, 'submitting', to, error)));
        }
      }
      const adopted = t.adopted.map((j) => this.hold(j));
      return { submitted: adopted.filter((j) => j.state === 'submitted'), downloading: adopted.filter((j) => j.state === 'downloading'), moves };
    });
  }

  async dropLeases(ids?: readonly string[]): Promise<void> {
    // Owner cleared too: this worker's row holds every job whose owner it is (leases.ts held).
    await this.pool.query(`UPDATE jobs SET lease_owner = NULL, lease_expires = NULL WHERE run_id = $1 AND lease_owner = $2 AND ($3::text[] IS NULL OR id = ANY($3::text[]))`, [
      this.runId,
      this.worker,
      ids === undefined ? null : [...ids],
    ]);
    if (ids === undefined) this.held.clear();
    else for (const id of ids) this.held.delete(id);
  }

  async adoptWaiting(id: string, taskId: string): Promise<TakenJob | null> {
    const row = await adoptWaiting(this.pool, this.runId, this.worker, this.leaseMs, id, taskId);
    if (row === null) return null;
    const { seq: _seq, ...job } = this.hold(row);
    return job;
  }

  /**
   * What the run still has for some worker (genbatch work --until-empty decides from it): pending jobs
   * (ready or waiting for parents) and jobs in flight (submitting, submitted, downloading; held by any
   * worker or left by a dead one); never the `exclude` ids (the jobs this worker gave up on).
   */
  async workLeft(exclude: readonly string[] = []): Promise<{ pending: number; inFlight: number }> {
    const r = await this.pool.query<{ pending: number; in_flight: number }>(
      `SELECT (SELECT count(*) FROM jobs WHERE run_id = $1 AND state = 'pending' AND NOT (id = ANY($2::text[])))::int AS pending,
              (SELECT count(*) FROM jobs WHERE run_id = $1 AND state IN ('submitting', 'submitted', 'downloading') AND NOT (id = ANY($2::text[])))::int AS in_flight`,
      [this.runId, [...exclude]],
    );
    const row = r.rows[0];
    return { pending: row?.pending ?? 0, inFlight: row?.in_flight ?? 0 };
  }

  /** The pipeline's beat: none while the store beats on its own timer. */
  get heartbeatMs(): number | null {
    return this.beatTimer === null ? this.beatEveryMs : null;
  }

  beatInBackground(): () => Promise<void> {
    let client: Client | null = null;
    let running: Promise<void> | null = null;
    const beat = async () => {
      try {
        client ??= await this.pool.connect();
        await this.heartbeat(client);
      } catch (err) {
        // The next beat takes a new connection; leaseLost says when beats failed for a whole lease.
        client?.release(err instanceof Error ? err : true);
        client = null;
      }
    };
    this.beatTimer = setInterval(() => {
      running ??= beat().finally(() => (running = null));
    }, this.beatEveryMs);
    return async () => {
      if (this.beatTimer) clearInterval(this.beatTimer);
      this.beatTimer = null;
      await running;
      client?.release();
      client = null;
    };
  }

  async heartbeat(q: Queryable = this.pool): Promise<void> {
    try {
      await heartbeat(q, this.worker, this.leaseMs, this.slotsHeld > 0);
    } catch (err) {
      this.beatFailing = true;
      throw err;
    }
    this.beatFailing = false;
    this.lastBeat = Date.now();
    // The share of the status-read rate follows the live workers; a failed count keeps the last one (the beat went through).
    this.reads.setWorkers(await liveWorkers(q, this.leaseMs).catch(() => this.reads.workersNow));
  }

  async jobOfTask(taskId: string, except: string): Promise<string | null> {
    const r = await this.pool.query<{ id: string }>('SELECT id FROM jobs WHERE run_id = $1 AND task_id = $2 AND id <> $3 LIMIT 1', [this.runId, taskId, except]);
    return r.rows[0]?.id ?? null;
  }

  async getJob(id: string): Promise<JobRow | undefined> {
    const r = await this.pool.query<JobRow>(`SELECT ${ROW_COLUMNS} FROM jobs j WHERE j.run_id = $1 AND j.id = $2`, [this.runId, id]);
    return r.rows[0];
  }

  async transition(id: string, from: JobState, to: JobState, patch: JobPatch = {}, o: MoveOptions = {}): Promise<Moved> {
    const epoch = this.held.get(id);
    if (epoch === undefined && from !== 'uncertain') return this.notHeld(id, from, to);
    // A move that is one statement (the submit intent, the task id) runs without BEGIN and COMMIT when its group is itself alone.
    // A move whose statements touch its own job alone: its guarded move (and, when that moved nothing, a read of the job and at most one more try).
    const own = epoch !== undefined && from !== 'uncertain' && typeof patch.last_error !== 'string' && !uncharged(from, to) && !PARENT_FAILED_STATES.includes(to);
    const alone = own && o.durable === true && !o.addFiles && !o.filesDone && to !== 'done';
    // The file rows and the mark cleared by a new result: written by the move's own statement.
    const also: WithMove[] = [];
    if (o.addFiles && o.addFiles.length > 0) also.push(addFiles(o.addFiles, this.worker));
    if (o.filesDone && o.filesDone.length > 0) also.push(filesDone(o.filesDone, this.worker));
    if (to === 'done') also.push(clearMark);
    let newEpoch: number | undefined;
    const move = async (tx: Queryable): Promise<Moved> => {
      if (epoch === undefined) {
        newEpoch = await adoptMove(tx, this.runId, id, this.worker, from, to, patch, this.leaseMs);
        await writeWith(tx, this.runId, id, also);
      } else if ((await guardedMove(tx, this.runId, id, { owner: this.worker, epoch }, from, to, patch, this.leaseMs, also)) === 'lost') return { moved: false };
      if (alone) return { moved: true, side: [] };
      if (typeof patch.last_error === 'string') await this.recordError(tx, id, patch.last_error);
      if (uncharged(from, to)) await releaseReservation(tx, this.runId, id);
      return { moved: true, side: await afterMove(tx, this.runId, id, from, to, patch.last_error) };
    };
    const out = await this.moves.run(move, { durable: o.durable === true, alone, own });
    if (!out.moved || !ACTIVE_STATES.includes(to)) this.held.delete(id);
    else if (newEpoch !== undefined) this.held.set(id, newEpoch);
    return out;
  }

  /** A move of a job this worker does not hold: refused as Store.transition would, or not ours to make. */
  private async notHeld(id: string, from: JobState, to: JobState): Promise<Moved> {
    assertAllowed(id, from, to);
    const cur = await this.getJob(id);
    if (!cur || cur.state !== from) {
      throw new TransitionError(`job ${id}: expected state ${from} for ${from} -> ${to}, found ${cur ? cur.state : 'no such job'}`);
    }
    return { moved: false };
  }

  /** One more entry of the job's error history (latest 50 kept), as SQLite's addJobError. */
  private async recordError(q: Queryable, id: string, message: string): Promise<void> {
    await q.query(
      `INSERT INTO job_errors (run_id, job_id, n, attempt, state, error, at)
       SELECT $1, $2, (SELECT COALESCE(MAX(n), 0) + 1 FROM job_errors WHERE run_id = $1 AND job_id = $2), attempts, state, $3, ${NOW_ISO} FROM jobs WHERE run_id = $1 AND id = $2`,
      [this.runId, id, message],
    );
    await q.query('DELETE FROM job_errors WHERE run_id = $1 AND job_id = $2 AND n <= (SELECT MAX(n) FROM job_errors WHERE run_id = $1 AND job_id = $2) - 50', [this.runId, id]);
  }

  /** Writes about a job outside a state change, guarded by this worker's lease on it (or by no live lease at all). */
  private leaseGuard(id: string): { sql: string; values: unknown[] } {
    const epoch = this.held.get(id);
    return {
      sql: `(lease_owner IS NULL OR ${free('jobs')} OR (lease_owner = $3 AND lease_epoch = $4))`,
      values: [this.runId, id, this.worker, epoch ?? -1],
    };
  }

  async noteError(id: string, message: string): Promise<void> {
    const g = this.leaseGuard(id);
    await inTx(this.pool, async (tx) => {
      const r = await tx.query(`UPDATE jobs SET last_error = $5, updated_at = ${NOW_ISO} WHERE run_id = $1 AND id = $2 AND ${g.sql}`, [...g.values, message]);
      if (r.rowCount === 1) await this.recordError(tx, id, message);
    });
  }

  async filesOf(id: string): Promise<FileRow[]> {
    const r = await this.pool.query<FileRow>(named(`SELECT ${FILE_COLUMNS} FROM files WHERE run_id = $1 AND job_id = $2 ORDER BY idx`, [this.runId, id]));
    return r.rows;
  }

  async jobsWithFiles(ids: readonly string[]): Promise<Map<string, JobWithFiles>> {
    const got = new Map<string, JobWithFiles>();
    if (ids.length === 0) return got;
    // The file rows as JSON beside the job's columns: their numbers (sizes, expires_at in ms) are exact in a double.
    const r = await this.pool.query<JobRow & { files_json: FileRow[] }>(
      named(
        `SELECT ${ROW_COLUMNS}, COALESCE((SELECT json_agg(f ORDER BY f.idx) FROM (SELECT ${FILE_COLUMNS} FROM files WHERE run_id = j.run_id AND job_id = j.id) f), '[]') AS files_json
           FROM jobs j WHERE j.run_id = $1 AND j.id = ANY($2::text[])`,
        [this.runId, [...new Set(ids)]],
      ),
    );
    for (const { files_json, ...job } of r.rows) got.set(job.id, { job, files: files_json });
    return got;
  }

  async recordFiles(id: string, got: readonly FileGot[]): Promise<boolean> {
    const epoch = this.held.get(id);
    if (epoch === undefined) return false;
    if (got.length === 0) return true;
    return inTx(this.pool, async (tx) => {
      const mine = await tx.query(`SELECT 1 FROM jobs WHERE run_id = $1 AND id = $2 AND lease_owner = $3 AND lease_epoch = $4 AND ${held('jobs')} FOR UPDATE OF jobs`, [
        this.runId,
        id,
        this.worker,
        epoch,
      ]);
      if (mine.rowCount !== 1) return false;
      await writeWith(tx, this.runId, id, [filesDone(got, this.worker)]);
      return true;
    });
  }

  async parentsOf(id: string): Promise<string[]> {
    const r = await this.pool.query<{ parent_id: string }>(`SELECT parent_id FROM job_links WHERE run_id = $1 AND job_id = $2 AND kind <> 'child' ORDER BY parent_id`, [this.runId, id]);
    return r.rows.map((x) => x.parent_id);
  }

  async expand(templateId: string, children: readonly ChildInput[], note: string): Promise<string[] | null> {
    const epoch = this.held.get(templateId);
    if (epoch === undefined) return null;
    const made = await inTx(this.pool, async (tx: Client) => {
      const patch = { last_error: null, result: JSON.stringify({ children: children.map((c) => c.id), note }) };
      if ((await guardedMove(tx, this.runId, templateId, { owner: this.worker, epoch }, 'pending', 'done', patch, this.leaseMs)) === 'lost') return null;
      await releaseReservation(tx, this.runId, templateId);
      return insertChildren(tx, this.runId, templateId, children, this.generation);
    });
    this.held.delete(templateId);
    if (made && made.length > 0) this.graphOn = true;
    return made;
  }

  async estimate(): Promise<{ known: number; unknown: number }> {
    const r = await this.pool.query<{ known: number; unknown: number }>(
      `SELECT COALESCE(SUM(estimated_credits), 0)::float8 AS known, COUNT(*) FILTER (WHERE estimated_credits IS NULL)::int AS unknown
         FROM jobs WHERE run_id = $1 AND state <> 'skipped' AND NOT (kind = 'fanout' AND state = 'done')`,
      [this.runId],
    );
    return r.rows[0] ?? { known: 0, unknown: 0 };
  }

  async getMeta(key: string): Promise<string | null> {
    const r = await this.pool.query<{ value: string }>('SELECT value FROM meta WHERE key = $1', [key]);
    return r.rows[0]?.value ?? null;
  }

  async setMeta(key: string, value: string | null): Promise<void> {
    if (value === null) await this.pool.query('DELETE FROM meta WHERE key = $1', [key]);
    else await this.pool.query('INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value', [key, value]);
  }

  async findUpload(baseUrl: string, sha256: string, maxAgeMs: number): Promise<string | null> {
    const r = await this.pool.query<{ file_url: string }>(`SELECT file_url FROM uploads WHERE base_url = $1 AND sha256 = $2 AND ${NOW_MS} - uploaded_at <= $3`, [baseUrl, sha256, maxAgeMs]);
    return r.rows[0]?.file_url ?? null;
  }

  async recordUpload(baseUrl: string, sha256: string, fileUrl: string): Promise<void> {
    await this.pool.query(
      `INSERT INTO uploads (base_url, sha256, file_url, uploaded_at) VALUES ($1, $2, $3, ${NOW_MS})
       ON CONFLICT (base_url, sha256) DO UPDATE SET file_url = EXCLUDED.file_url, uploaded_at = EXCLUDED.uploaded_at`,
      [baseUrl, sha256, fileUrl],
    );
  }

  async acquireUploadSlot(signal?: AbortSignal): Promise<ReleaseUploadSlot> {
    throwIfAborted(signal);
    const limit = this.o.uploads ?? { limit: 5, windowMs: 61_200 };
    const opts = { key: this.key, worker: this.worker, limit: limit.limit, windowMs: limit.windowMs, holdMs: this.leaseMs };
    // Counted before the slot is asked for: a heartbeat while the claim is in flight renews it.
    this.slotsHeld++;
    let held: Awaited<ReturnType<typeof takeUploadSlot>>;
    try {
      held = await takeUploadSlot(this.pool, opts, signal, this.o.slotPollMs ?? 1000);
    } catch (err) {
      this.slotsHeld--;
      throw err;
    }
    let ended = false;
    return async (outcome) => {
      if (ended) return;
      ended = true;
      this.slotsHeld--;
      await endUploadSlot(this.pool, this.key, held.slot, this.worker);
      if (outcome.rateLimited) await coolDownUploads(this.pool, this.key, Math.max(outcome.retryAfterMs ?? 0, limit.windowMs));
    };
  }

  async acquireStatusRead(signal?: AbortSignal): Promise<void> {
    await this.reads.take(signal);
  }

}
