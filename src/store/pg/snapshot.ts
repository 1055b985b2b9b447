import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Database from 'better-sqlite3';
import { StateError } from '../../errors.js';
import { openDatabase, SCHEMA_VERSION } from '../schema.js';
import type { RunRow } from '../types.js';
import { inTx, openPool, type Client, type Pool } from './db.js';
import { held } from './leases.js';
import { NOW_ISO } from './schema.js';
import { TABLES as RUN_TABLES } from './working-copy.js';

/**
 * The readers of a PostgreSQL state (status, report, view, export) run on a SQLite copy of the runs they
 * read: a temporary state file with the same schema (the PostgreSQL tables mirror SQLite's: schema.ts),
 * filled from one REPEATABLE READ READ ONLY transaction (every table seen at one moment), so the existing
 * readers work unchanged. A reader never writes to the database and never creates its tables.
 *
 * refresh() (genbatch view, every second or two) first reads a fingerprint of the runs (job count and
 * latest updated_at, marks, errors, done files, invocations, the run rows); when it moved, it copies the
 * jobs changed since the last copy (updated_at is written from the database clock) with their files, links
 * and errors, the files of jobs downloading, and the marks and errors made since; the job count differing
 * from the copy's (a job removed) makes a whole copy.
 */

/** One worker's share of a run (status --json `workers`, report.json `summary.workers`). */
export interface WorkerCount {
  /** hostname:pid:random, as the worker named itself. */
  id: string;
  /** The run's jobs this worker holds now (jobs.lease_owner: submitting, submitted, downloading), by state. */
  jobs: Record<string, number>;
  /** Result files this worker wrote (files.worker, done). */
  files: number;
  bytes: number;
  /** Its last heartbeat (database clock, ISO), null when it has no row in workers. */
  last_seen: string | null;
}

/** The tables copied (the working copy's, less meta: shared by every run), each with its primary key (keyset paging) and the column naming its run. */
const TABLES = RUN_TABLES.filter((t): t is typeof t & { run: string } => t.run !== null);
type Table = (typeof TABLES)[number];

const PAGE = 5000;
/** Rows changed this long before the latest change seen are copied again by the next refresh (see latest()). */
const SINCE_MARGIN_MS = 60_000;
const q = (name: string) => `"${name}"`;

/** The fingerprint of the runs: any change a reader shows moves it (a job's change, whatever its time, by the sum of hashes). */
const FINGERPRINT = `SELECT json_build_array(
  (SELECT json_build_array(count(*), max(updated_at), sum(hashtext(id || state || updated_at)::bigint)) FROM jobs WHERE run_id = ANY($1)),
  (SELECT json_build_array(count(*), max(at)) FROM marks WHERE run_id = ANY($1)),
  (SELECT json_build_array(count(*), max(at)) FROM job_errors WHERE run_id = ANY($1)),
  (SELECT count(*) FROM files WHERE run_id = ANY($1) AND state = 'done'),
  (SELECT json_agg(i ORDER BY i.run_id, i.n) FROM invocations i WHERE run_id = ANY($1)),
  (SELECT json_agg(r ORDER BY r.id) FROM runs r WHERE id = ANY($1)))::text AS f`;

interface Since {
  jobs: string;
  marks: string;
  errors: string;
}

/** A PostgreSQL state opened to read: its runs, a snapshot of some of them, per-worker counts. */
export class PgReader {
  private constructor(
    private readonly pool: Pool,
    /** The URL as it may be printed (password hidden). */
    readonly display: string,
  ) {}

  /** Connect and check that the database holds a genbatch state (nothing is created). */
  static async open(url: string, display: string): Promise<PgReader> {
    const pool = openPool(url, { max: 2 });
    const reader = new PgReader(pool, display);
    try {
      const r = await pool.query<{ t: string | null }>(`SELECT to_regclass('meta')::text AS t`);
      if (r.rows[0]?.t == null) throw new StateError(`the PostgreSQL database ${display} holds no genbatch state (no run has been made in it: genbatch run <manifest> --state URL makes one)`);
      const v = await pool.query<{ value: string }>(`SELECT value FROM meta WHERE key = 'schema_version'`);
      if (Number(v.rows[0]?.value) !== SCHEMA_VERSION) throw new StateError(`the PostgreSQL database ${display} has genbatch schema version ${v.rows[0]?.value ?? '(none)'}; this genbatch reads version ${SCHEMA_VERSION}`);
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw reader.failure(err);
    }
    return reader;
  }

  /** A StateError naming the database (password hidden). */
  failure(err: unknown): StateError {
    if (err instanceof StateError) return err;
    return new StateError(`PostgreSQL state ${this.display}: ${err instanceof Error ? err.message || String((err as NodeJS.ErrnoException).code) : String(err)}`);
  }

  async runs(): Promise<RunRow[]> {
    try {
      return (await this.pool.query<RunRow>('SELECT * FROM runs ORDER BY id')).rows;
    } catch (err) {
      throw this.failure(err);
    }
  }

  /** Copy these runs into a new temporary state file; `outDir`: the output folder recorded in the copy (one run). */
  async snapshot(runIds: number[], outDir?: string): Promise<Snapshot> {
    const dir = mkdtempSync(join(tmpdir(), 'genbatch-snapshot-'));
    const snap = new Snapshot(this, dir, runIds, outDir);
    try {
      await snap.refresh();
    } catch (err) {
      snap.close();
      throw this.failure(err);
    }
    return snap;
  }

  /** Each worker's share of the run: jobs by state (lease_owner), files written and their bytes, last heartbeat. */
  async workers(runId: number): Promise<WorkerCount[]> {
    try {
      const jobs = await this.pool.query<{ worker: string; state: string; n: number }>(
        'SELECT lease_owner AS worker, state, count(*)::int AS n FROM jobs WHERE run_id = $1 AND lease_owner IS NOT NULL GROUP BY 1, 2',
        [runId],
      );
      const files = await this.pool.query<{ worker: string; files: number; bytes: number }>(
        `SELECT worker, count(*)::int AS files, coalesce(sum(size), 0)::bigint AS bytes FROM files WHERE run_id = $1 AND state = 'done' AND worker IS NOT NULL GROUP BY 1`,
        [runId],
      );
      const byId = new Map<string, WorkerCount>();
      const of = (id: string) => byId.get(id) ?? byId.set(id, { id, jobs: {}, files: 0, bytes: 0, last_seen: null }).get(id)!;
      for (const r of jobs.rows) of(r.worker).jobs[r.state] = r.n;
      for (const r of files.rows) Object.assign(of(r.worker), { files: r.files, bytes: r.bytes });
      if (byId.size > 0) {
        const seen = await this.pool.query<{ id: string; last_seen: string }>(
          `SELECT id, to_char(last_seen AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS last_seen FROM workers WHERE id = ANY($1)`,
          [[...byId.keys()]],
        );
        for (const r of seen.rows) of(r.id).last_seen = r.last_seen;
      }
      return [...byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    } catch (err) {
      throw this.failure(err);
    }
  }

  /** fn on one client inside a REPEATABLE READ READ ONLY transaction: every query sees the same moment. */
  consistent<T>(fn: (c: Client) => Promise<T>): Promise<T> {
    return inTx(this.pool, async (c) => {
      await c.query('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY');
      return fn(c);
    });
  }

  /** Add marks to jobs' histories in the database: each one more row of its job (n after the last there), on the database clock. */
  async addMarks(rows: ReadonlyArray<{ run_id: number; job_id: string; mark: string | null; note: string | null }>): Promise<void> {
    if (rows.length === 0) return;
    try {
      await inTx(this.pool, async (c) => {
        for (const r of rows) {
          await c.query(
            `INSERT INTO marks (run_id, job_id, n, mark, note, at) SELECT $1, $2, coalesce(max(n), 0) + 1, $3, $4, ${NOW_ISO} FROM marks WHERE run_id = $1 AND job_id = $2`,
            [r.run_id, r.job_id, r.mark, r.note],
          );
        }
      });
    } catch (err) {
      throw this.failure(err);
    }
  }

  async close(): Promise<void> {
    await this.pool.end().catch(() => undefined);
  }
}

/** A temporary SQLite state file holding a copy of some runs of a PostgreSQL state. */
export class Snapshot {
  readonly path: string;
  private readonly db: Database.Database;
  private fingerprint: string | null = null;
  private since: Since | null = null;
  private readonly columns = new Map<string, string[]>();
  /** Per run and job (`run_id job_id`), the last mark row n that came from the database or went to it. */
  private readonly marksKnown = new Map<string, number>();

  constructor(
    private readonly reader: PgReader,
    private readonly dir: string,
    private readonly runIds: number[],
    /** The run's output folder as this machine sees it, in place of the one recorded (another machine's path). */
    private readonly outDir?: string,
  ) {
    this.path = join(dir, 'state.db');
    this.db = openDatabase(this.path);
    for (const t of TABLES) this.columns.set(t.name, (this.db.pragma(`table_info(${t.name})`) as Array<{ name: string }>).map((c) => c.name));
  }

  /** Copy what changed since the last copy (everything, the first time). True when something was copied. */
  async refresh(): Promise<boolean> {
    return this.reader.consistent(async (c) => {
      await this.noteWriter(c);
      const f = (await c.query<{ f: string }>(FINGERPRINT, [this.runIds])).rows[0]!.f;
      if (f === this.fingerprint) return false;
      const [[jobCount]] = JSON.parse(f) as [[number]];
      const latest = await this.latest(c);
      const incremental = this.since !== null && jobCount === this.jobCount();
      const rows = new Map<string, unknown[][]>();
      // Incremental: the jobs changed since (with their files, links; the files of jobs downloading), the marks and
      // errors made since; runs and invocations whole (a few rows).
      const s = this.since;
      const changed = `EXISTS (SELECT 1 FROM jobs j WHERE j.run_id = t.run_id AND j.id = t.job_id AND (j.updated_at >= $2 OR j.state = 'downloading'))`;
      const since: Record<string, [string, unknown[]]> = s === null ? {} : {
        jobs: ['updated_at >= $2', [s.jobs]],
        files: [changed, [s.jobs]],
        job_links: [changed, [s.jobs]],
        marks: ['at >= $2', [s.marks]],
        job_errors: ['at >= $2', [s.errors]],
      };
      for (const t of TABLES) {
        const w = incremental ? since[t.name] : undefined;
        rows.set(t.name, await this.read(c, t, w?.[0], w?.[1]));
      }
      this.write(rows, incremental);
      // The runs' credit caps as their workers noted them (meta `credit_cap:<run id>`, src/store/pg/budget.ts): status and reports show them.
      // And the jobs each run's last sync found no longer in the manifest (`removed:<run id>`): the readers leave them out.
      const removed = this.runIds.map((id) => `removed:${id}`);
      const caps = await c.query<{ key: string; value: string }>('SELECT key, value FROM meta WHERE key = ANY($1::text[])', [[...this.runIds.map((id) => `credit_cap:${id}`), ...removed]]);
      for (const key of removed) this.db.prepare('DELETE FROM meta WHERE key = ?').run(key);
      for (const r of caps.rows) this.db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)').run(r.key, r.value);
      this.fingerprint = f;
      this.since = latest;
      return true;
    });
  }

  /**
   * A live worker that holds a job of these runs stands in the copy's lease row, as a run holding a SQLite state
   * file's lease does: the readers (the view's header) then know the last invocation is running, not stopped
   * before its closing balance reading. Its heartbeat is the worker's last_seen (database clock, as an age);
   * on its own host a dead pid still reads as not running (src/store/lease.ts writerActive).
   */
  private async noteWriter(c: Client): Promise<void> {
    const r = await c.query<{ hostname: string; pid: number; age_ms: number }>(
      `SELECT w.hostname, w.pid, (extract(epoch FROM now() - w.last_seen) * 1000)::float8 AS age_ms FROM workers w
        WHERE EXISTS (SELECT 1 FROM jobs j WHERE j.run_id = ANY($1) AND j.lease_owner = w.id AND ${held('j')})
        ORDER BY w.last_seen DESC LIMIT 1`,
      [this.runIds],
    );
    const w = r.rows[0];
    this.db.prepare('DELETE FROM lease').run();
    if (w) this.db.prepare('INSERT INTO lease (id, pid, hostname, token, heartbeat) VALUES (1, ?, ?, ?, ?)').run(w.pid, w.hostname, 'postgres-worker', Math.round(Date.now() - w.age_ms));
  }

  private jobCount(): number {
    const ph = this.runIds.map(() => '?').join(',');
    return (this.db.prepare(`SELECT count(*) AS n FROM jobs WHERE run_id IN (${ph})`).get(...this.runIds) as { n: number }).n;
  }

  /**
   * The latest change times less a minute: the rows changed since are copied again next time. The *_at
   * columns are written from now(), the time a worker's transaction started: one committed after this
   * copy may carry a time a little before the latest one seen here. A row edited by hand may hold any text: a
   * time later than the database's clock counts as now (else a change made after it, at an earlier time, was
   * never copied), and one that is no time at all ('yesterday', which sorts after every ISO time) as none, so the
   * next copy is whole (new Date(NaN).toISOString() threw, and every reader of the run failed).
   */
  private async latest(c: Client): Promise<Since> {
    const r = await c.query<Since>(
      `SELECT coalesce(least((SELECT max(updated_at) FROM jobs WHERE run_id = ANY($1)), ${NOW_ISO}), '') AS jobs,
              coalesce(least((SELECT max(at) FROM marks WHERE run_id = ANY($1)), ${NOW_ISO}), '') AS marks,
              coalesce(least((SELECT max(at) FROM job_errors WHERE run_id = ANY($1)), ${NOW_ISO}), '') AS errors`,
      [this.runIds],
    );
    const back = (at: string) => {
      const ms = Date.parse(at);
      return Number.isNaN(ms) ? '' : new Date(ms - SINCE_MARGIN_MS).toISOString();
    };
    const l = r.rows[0]!;
    return { jobs: back(l.jobs), marks: back(l.marks), errors: back(l.errors) };
  }

  /** The table's rows of the runs (and `where`, on the row as `t`), page by page in key order, as value arrays in the SQLite column order. */
  private async read(c: Client, t: Table, where = 'TRUE', params: unknown[] = []): Promise<unknown[][]> {
    const cols = this.columns.get(t.name)!;
    const key = t.key.map((k) => `t.${q(k)}`).join(', ');
    const out: unknown[][] = [];
    let after: unknown[] | null = null;
    for (;;) {
      const args: unknown[] = [this.runIds, ...params];
      let page = '';
      if (after !== null) {
        const first = args.length + 1;
        args.push(...after);
        page = ` AND (${key}) > (${t.key.map((_, i) => `$${first + i}`).join(', ')})`;
      }
      const sql = `SELECT ${cols.map((col) => `t.${q(col)}`).join(', ')} FROM ${q(t.name)} t WHERE t.${q(t.run)} = ANY($1) AND (${where})${page} ORDER BY ${key} LIMIT ${PAGE}`;
      const r = await c.query({ text: sql, values: args, rowMode: 'array' });
      out.push(...(r.rows as unknown[][]));
      if (r.rows.length < PAGE) return out;
      const last = r.rows.at(-1) as unknown[];
      after = t.key.map((k) => last[cols.indexOf(k)]);
    }
  }

  /** Write the rows read in one SQLite transaction: the view's connection sees all of them or none. */
  private write(rows: Map<string, unknown[][]>, incremental: boolean): void {
    const ph = this.runIds.map(() => '?').join(',');
    this.db.transaction(() => {
      if (!incremental) {
        for (const t of [...TABLES].reverse()) this.db.prepare(`DELETE FROM ${t.name} WHERE ${t.run} IN (${ph})`).run(...this.runIds);
      } else {
        // The changed jobs' files and links are replaced as a whole (a redo may leave fewer of them).
        const jobs = rows.get('jobs')!;
        const cols = this.columns.get('jobs')!;
        const [runAt, idAt] = [cols.indexOf('run_id'), cols.indexOf('id')];
        const dropFiles = this.db.prepare('DELETE FROM files WHERE run_id = ? AND job_id = ?');
        const dropLinks = this.db.prepare('DELETE FROM job_links WHERE run_id = ? AND job_id = ?');
        for (const j of jobs) {
          dropFiles.run(j[runAt], j[idAt]);
          dropLinks.run(j[runAt], j[idAt]);
        }
      }
      for (const t of TABLES) {
        const cols = this.columns.get(t.name)!;
        const insert = this.db.prepare(`INSERT OR REPLACE INTO ${t.name} (${cols.map(q).join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`);
        for (const row of rows.get(t.name) ?? []) insert.run(...row);
      }
      if (!incremental) this.marksKnown.clear();
      const cols = this.columns.get('marks')!;
      const [runAt, jobAt, nAt] = [cols.indexOf('run_id'), cols.indexOf('job_id'), cols.indexOf('n')];
      for (const m of rows.get('marks') ?? []) this.knowMark(`${String(m[runAt])} ${String(m[jobAt])}`, m[nAt] as number);
      if (this.outDir !== undefined) this.db.prepare(`UPDATE runs SET out_dir = ? WHERE id IN (${ph})`).run(this.outDir, ...this.runIds);
    })();
  }

  private knowMark(key: string, n: number): void {
    if (n > (this.marksKnown.get(key) ?? 0)) this.marksKnown.set(key, n);
  }

  /**
   * Marks made in the copy (genbatch mark, the view's marks) and not yet in the database, written there. A
   * copy made meanwhile by refresh brings them back from the database as it numbered them.
   */
  async pushMarks(): Promise<number> {
    const ph = this.runIds.map(() => '?').join(',');
    const rows = (this.db.prepare(`SELECT run_id, job_id, n, mark, note FROM marks WHERE run_id IN (${ph}) ORDER BY run_id, job_id, n`).all(...this.runIds) as Array<{
      run_id: number;
      job_id: string;
      n: number;
      mark: string | null;
      note: string | null;
    }>).filter((r) => r.n > (this.marksKnown.get(`${r.run_id} ${r.job_id}`) ?? 0));
    await this.reader.addMarks(rows);
    for (const r of rows) this.knowMark(`${r.run_id} ${r.job_id}`, r.n);
    return rows.length;
  }

  close(): void {
    if (this.db.open) this.db.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
