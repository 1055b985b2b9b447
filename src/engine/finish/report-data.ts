import type Database from 'better-sqlite3';
import type { ReportData, ReportFile, ReportInvocation, ReportJob } from '../../report/types.js';
import { promptOf, varsOf } from '../../report/prompt.js';
import { findModel } from '../../models/index.js';
import type { InvocationRow, Mark, Store, SummaryRow } from '../../store/index.js';
import { nestingWithin } from '../../client/limits.js'; // not the barrel: it loads the whole client
import { hasJobSendColumns } from '../../store/schema.js';
import { summaryRowsWith } from '../../store/reads.js';
import type { TaskView } from '../ports.js';
import { extractResults } from '../results.js';
import { keptChanged } from '../prepare/changed.js';
import { chatReportFields, chatSummary } from '../submit/chat.js';

/**
 * Build the report writers' input from the state file (run() and `genbatch report`).
 * `keepRows`: up to this many jobs, the rows read by a first pass over data.jobs() are kept for later passes.
 * Default 0: writeReports() makes one pass (every row read once), so keeping them would only cost memory.
 * `counts`: store.counts() when the caller has just read it (a GROUP BY over every job of the run: ~30 ms at 100,000 jobs).
 */
export function buildReportData(store: Store, wallSeconds: number | null = null, keepRows = 0, counts: Readonly<Record<string, number>> = store.counts()): ReportData {
  const run = store.run();
  const est = store.estimate();
  const started = run.started_at ?? new Date().toISOString();
  const finished = run.finished_at ?? new Date().toISOString();
  const credits = runCredits(store);
  const byInvocation = store.jobsByInvocation();
  for (const inv of credits.invocations) inv.jobs = byInvocation.get(inv.n) ?? { sent: 0, done: 0, failed: 0 };
  const chat = chatSummary(store);
  const refused = refusalNote(store);
  return {
    summary: {
      manifest: run.manifest,
      out_dir: run.out_dir,
      base_url: run.base_url ?? '',
      sandbox: run.sandbox === 1,
      started_at: started,
      finished_at: finished,
      wall_seconds: wallSeconds ?? Math.max(0, (Date.parse(finished) - Date.parse(started)) / 1000),
      counts: { ...counts },
      failed_permanent: store.permanentFailedIds().length,
      changed_not_sent: Object.keys(keptChanged(store)),
      credits: {
        estimated_known: round6(est.known),
        unknown_price_jobs: est.unknown,
        balance_before: credits.invocations[0]?.balance_before ?? null,
        balance_after: credits.invocations.at(-1)?.balance_after ?? null,
        charged: credits.charged,
        user_prices: run.user_prices === 1,
        invocations: credits.invocations,
        cap: capOf(store),
      },
      refused,
      ...(chat ? { chat } : {}),
    },
    jobs: keptJobs(store, keepRows, store.marks(), refused?.reason ?? null),
  };
}

/**
 * The run's charge over every invocation that read the balance: each invocation's balance before its work
 * minus the one after it, added up. An invocation without a closing reading (killed, or the read failed) is
 * measured to the next invocation's opening reading; when there is none, it is not measured and the run's
 * total is null. No invocation at all: 0 (nothing was sent or waited for).
 */
/** The credit cap of a run as the reports show it (meta `credit_cap:<run id>`, written by runEngine). */
export interface CapNote {
  credits: number;
  name: string;
  stopped: boolean;
  /** PostgreSQL: the run's charge as the budget row records it (every worker's readings), at the last worker's end. */
  charged?: number;
}

/** Meta key of a run's refusal note (runEngine): set when an invocation is refused before sending, cleared by one that is not. */
export function refusalMetaKey(runId: number): string {
  return `refused:${runId}`;
}

export type RefusalNote = NonNullable<ReportData['summary']['refused']>;

export function refusalNote(store: Store): RefusalNote | null {
  const raw = store.getMeta(refusalMetaKey(store.run().id));
  if (raw === null) return null;
  try {
    const v = JSON.parse(raw) as Partial<RefusalNote>;
    if (typeof v.reason !== 'string' || typeof v.code !== 'string' || typeof v.exit_code !== 'number' || typeof v.at !== 'string') return null;
    return { reason: v.reason, code: v.code, exit_code: v.exit_code, at: v.at };
  } catch {
    return null;
  }
}

export function capMetaKey(runId: number): string {
  return `credit_cap:${runId}`;
}

export function capNote(store: Store): CapNote | null {
  const raw = store.getMeta(capMetaKey(store.run().id));
  if (raw === null) return null;
  try {
    const v = JSON.parse(raw) as Partial<CapNote>;
    if (typeof v.credits !== 'number' || typeof v.name !== 'string') return null;
    return { credits: v.credits, name: v.name, stopped: v.stopped === true, ...(typeof v.charged === 'number' ? { charged: v.charged } : {}) };
  } catch {
    return null;
  }
}

function capOf(store: Store): { credits: number; name: string; stopped: boolean } | null {
  const c = capNote(store);
  return c && { credits: c.credits, name: c.name, stopped: c.stopped };
}

export function runCredits(store: Store): { charged: number | null; invocations: ReportInvocation[] } {
  return chargesOf(store.invocations());
}

export function chargesOf(rows: readonly InvocationRow[]): { charged: number | null; invocations: ReportInvocation[] } {
  let total: number | null = 0;
  const invocations = rows.map((r, i): ReportInvocation => {
    const next = rows[i + 1]?.balance_before ?? null;
    const to = r.balance_before === null ? null : r.balance_after !== null ? 'end' : next !== null ? 'next-start' : null;
    const closing = to === 'end' ? r.balance_after : next;
    // Rounded to 6 decimals: a difference of two balances carries binary noise (0.013999999966472387).
    const charged = to === null || r.balance_before === null || closing === null ? null : round6(r.balance_before - closing);
    total = total === null || charged === null ? null : total + charged;
    return {
      n: r.n,
      started_at: r.started_at,
      finished_at: r.finished_at,
      balance_before: r.balance_before,
      balance_before_at: r.balance_before_at,
      balance_after: r.balance_after,
      balance_after_at: r.balance_after_at,
      submits: r.submits,
      charged,
      charged_to: to,
      charged_source: to === 'end' ? 'measured' : to === 'next-start' ? 'reconstructed' : null,
    };
  });
  return { charged: total === null ? null : round6(total), invocations };
}

/**
 * A reader that iterates data.jobs() several times (the single-report functions one after another) may keep
 * up to this many rows after the first full pass (buildReportData's keepRows); bigger runs stream every pass.
 */
export const REPORT_ROWS_KEPT = 10_000;

function keptJobs(store: Store, limit: number, marks: ReadonlyMap<string, Mark>, refused: string | null): () => Iterable<ReportJob> {
  if (limit <= 0) return () => streamed(store, marks, refused);
  let kept: ReportJob[] | null = null;
  return () => kept ?? collect();
  function* collect(): Iterable<ReportJob> {
    let list: ReportJob[] | null = [];
    for (const row of store.summaryRows()) {
      const job = reportJob(store, row, marks, refused);
      if (list) {
        if (list.length < limit) list.push(job);
        else list = null;
      }
      yield job;
    }
    // Kept only after a pass that read every row (a writer that stops early leaves nothing behind).
    if (list) kept = list;
  }
}

/**
 * The files of the run's jobs that are done and on disk, job after job in the order of store.summaryRows()
 * (seq; ties by id, the order of the jobs_by_seq index): read beside the rows by one query instead of a
 * files query per job (~1.6 us each: 160 ms for 100,000 jobs, most of them without files).
 */
const filesInJobOrder = (stretch: boolean): string => `SELECT f.job_id, f.name, f.url, f.type, f.content_type, f.path, f.size, f.sha256
  FROM jobs j INDEXED BY jobs_by_seq JOIN files f ON f.run_id = j.run_id AND f.job_id = j.id
  WHERE j.run_id = ?${stretch ? ' AND j.seq > ? AND j.seq <= ?' : ''} AND f.state = 'done' AND f.path IS NOT NULL ORDER BY j.seq, j.id, f.idx`;

type FileTuple = [string, string, string | null, string, string | null, string, number | null, string | null];

/**
 * Each job's input as sent (submitted_input), else as the manifest gives it (the spec's input), and its send columns
 * (JobExtra), read beside the summary rows in the same order, so the summary rows stay without the large columns.
 */
const INPUT_COLUMNS = (has: boolean): string[] => [
  // json_valid first: json_extract throws on a spec that is not JSON (or nests past SQLite's limit), which a row edited by hand may hold.
  `COALESCE(submitted_input, CASE WHEN json_valid(spec) THEN json_extract(spec, '$.input') END)`,
  ...(has ? ['sent_by', 'expected_credits'] : ['NULL', 'NULL']),
];
/** The inputs of a stretch of jobs (seq in (after, upto]), in the order of its rows. */
const inputsInStretch = (has: boolean): string => `SELECT id, ${INPUT_COLUMNS(has).join(', ')} FROM jobs INDEXED BY jobs_by_seq WHERE run_id = ? AND seq > ? AND seq <= ? ORDER BY seq`;
const inputOf = (has: boolean): string => `SELECT ${INPUT_COLUMNS(has).join(', ')} FROM jobs WHERE run_id = ? AND id = ?`;

/** id, input, sent_by, expected_credits. */
type InputTuple = [string, string | null, number | null, number | null];
/** input, sent_by, expected_credits. */
type JobExtra = [string | null, number | null, number | null];

/** A stretch of the run's jobs: their summary rows, those with seq in (after, upto]. */
interface Stretch {
  rows: readonly SummaryRow[];
  after: number;
  upto: number;
}

function* streamed(store: Store, marks: ReadonlyMap<string, Mark>, refused: string | null, stretch?: Stretch): Iterable<ReportJob> {
  const runId = store.run().id;
  const args = stretch ? [runId, stretch.after, stretch.upto] : [runId];
  const files = store.db.prepare(filesInJobOrder(stretch !== undefined)).raw(true).iterate(...args) as IterableIterator<FileTuple>;
  // Jobs no longer in the manifest, when left out: their files (and rows) are passed over with them.
  const out = store.leftOutIds();
  try {
    let head = files.next();
    for (const [row, extra] of stretch ? withInputs(store, stretch, args, out) : rowsWithInputs(store, out)) {
      const list: FileTuple[] = [];
      while (!head.done && head.value[0] !== row.id && out.has(head.value[0])) head = files.next();
      while (!head.done && head.value[0] === row.id) {
        list.push(head.value);
        head = files.next();
      }
      yield reportJob(store, row, marks, refused, list, extra);
    }
    while (!head.done && out.has(head.value[0])) head = files.next();
    // Every file belongs to a row of the run, met in the same order: one left over means the two orders differ.
    if (!head.done) throw new Error(`report: the files of job ${head.value[0]} were not met in job order`);
  } finally {
    files.return?.();
  }
}

/** The whole run: each summary row with its input and send columns, read by the same statement (one walk of the table). */
function* rowsWithInputs(store: Store, out: ReadonlySet<string>): Iterable<[SummaryRow, JobExtra]> {
  for (const [row, extra] of summaryRowsWith(store.db, store.run().id, INPUT_COLUMNS(hasJobSendColumns(store.db)))) {
    if (!out.has(row.id)) yield [row, extra as JobExtra];
  }
}

/** A stretch (the view): its rows were read already; their inputs are read beside them by the same bound. */
function* withInputs(store: Store, stretch: Stretch, args: number[], out: ReadonlySet<string>): Iterable<[SummaryRow, JobExtra]> {
  const inputs = store.db.prepare(inputsInStretch(hasJobSendColumns(store.db))).raw(true).iterate(...args) as IterableIterator<InputTuple>;
  try {
    for (const row of stretch.rows) {
      let input = inputs.next();
      while (!input.done && input.value[0] !== row.id && out.has(input.value[0])) input = inputs.next();
      // Same query order as the rows; should it ever differ, the job's input is read on its own.
      yield [row, !input.done && input.value[0] === row.id ? [input.value[1], input.value[2], input.value[3]] : jobExtra(store, row.id)];
    }
  } finally {
    inputs.return?.();
  }
}

/** The statement reading one job's input, prepared once per store (a reader keeping rows reads up to REPORT_ROWS_KEPT of them). */
const inputStatements = new WeakMap<Store, Database.Statement<[number, string]>>();

function jobExtra(store: Store, id: string): JobExtra {
  let stmt = inputStatements.get(store);
  if (!stmt) inputStatements.set(store, (stmt = store.db.prepare(inputOf(hasJobSendColumns(store.db))).raw(true)));
  const r = stmt.get(store.run().id, id) as JobExtra | undefined;
  return r ?? [null, null, null];
}

function parseInput(text: string | null): Record<string, unknown> | null {
  // An input nested deeper than the service's answers may be (a row edited by hand) is left out: the reports write
  // the input out again, and JSON.stringify overflows the stack on such a value.
  if (text === null || !nestingWithin(text)) return null;
  try {
    const v = JSON.parse(text) as unknown;
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function reportJob(store: Store, row: SummaryRow, marks: ReadonlyMap<string, Mark>, refused: string | null, tuples?: readonly FileTuple[], extra: JobExtra = jobExtra(store, row.id)): ReportJob {
  const [inputJson, sentBy, expected] = extra;
  const files: ReportFile[] = [];
  let texts: Record<string, string> = {};
  if (tuples) {
    for (const f of tuples) {
      files.push({ path: f[5], size: f[6] ?? 0, sha256: f[7] ?? '', type: f[3], contentType: f[4] });
      if (f[2] === null) texts[f[1]] = '';
    }
  } else {
    for (const f of store.filesOf(row.id)) {
      if (f.state !== 'done' || f.path === null) continue;
      files.push({ path: f.path, size: f.size ?? 0, sha256: f.sha256 ?? '', type: f.type, contentType: f.content_type });
      if (f.url === null) texts[f.name] = '';
    }
  }
  let usage: ReportJob['usage'] = null;
  if (row.kind === 'chat') ({ texts, usage } = chatReportFields(store.resultOf(row.id)));
  else if (Object.keys(texts).length > 0) fillTexts(row, store.resultOf(row.id), texts);
  const input = parseInput(inputJson);
  return {
    id: row.id,
    model: row.model,
    where: row.where,
    input,
    prompt: promptOf(input),
    vars: varsOf(row.where),
    task_id: row.task_id,
    state: row.state,
    attempts: row.attempts,
    error: row.last_error,
    ...(row.state === 'failed' && row.permanent === 1 ? { permanent: true as const } : {}),
    estimated_credits: row.estimated_credits,
    files,
    texts,
    ...(row.kind === 'chat' ? { usage } : {}),
    submitted_at: row.submitted_at,
    finished_at: row.finished_at,
    sent_by: sentBy,
    expected_credits: expected,
    ...(refused !== null && row.state === 'pending' ? { pending_reason: refused } : {}),
    mark: marks.get(row.id) ?? null,
  };
}

/** Text results are small: read them back from the task result kept in the store. */
function fillTexts(row: SummaryRow, result: string | null, texts: Record<string, string>): void {
  try {
    const task = JSON.parse(result ?? '{}') as TaskView;
    for (const t of extractResults(task, findModel(row.model)?.resultEndpoint ?? 'status', row.model).texts) if (t.name in texts) texts[t.name] = t.text;
  } catch {
    // A result that no longer parses leaves the text out; the file on disk still holds it.
  }
  for (const k of Object.keys(texts)) if (texts[k] === '') delete texts[k];
}

export function round6(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}

/** The report jobs of these summary rows (each job's files and input read on its own): the view's live updates. */
export function reportJobsOf(store: Store, rows: readonly SummaryRow[]): ReportJob[] {
  const marks = store.marks();
  const refused = refusalNote(store)?.reason ?? null;
  return rows.map((row) => reportJob(store, row, marks, refused));
}

/**
 * The report jobs after seq `after`, about `limit` of them, in manifest order (files and inputs read beside them as
 * for a whole report, by the same bound), and the seq they end at (null: the run's end as this read saw it): the
 * view's rows, a stretch at a time.
 */
export function reportJobsAfter(store: Store, after: number, limit: number): { jobs: ReportJob[]; upto: number | null } {
  const { rows, upto, end } = store.summaryRowsAfter(after, limit);
  return { jobs: [...streamed(store, store.marks(), refusalNote(store)?.reason ?? null, { rows, after, upto })], upto: end ? null : upto };
}
