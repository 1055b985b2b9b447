import type { JobState } from '../store/states.js';
import type { NotDone } from './summary.js';

/**
 * Everything the engine reports, as one union. Progress bars, plain progress
 * lines, NDJSON (`--json`) and logs subscribe to these; the engine never
 * prints and never imports a progress library.
 */
export type EngineEvent =
  | { type: 'start'; manifest: string; out_dir: string; state: string; base_url: string; sandbox: boolean }
  | { type: 'lease-takeover'; from: string }
  /** counts: jobs by state over the whole run (earlier invocations included); files: result files already on disk. */
  /** `joined`: a worker joining a run kept in PostgreSQL (nothing synced: the counts are the run's as found). */
  | { type: 'synced'; jobs: number; new: number; changed: number; unchanged: number; skipped: number; counts: Record<JobState, number>; files: number; joined?: boolean; /** Jobs of the run no longer in the manifest (any state): kept in the state, left out of the reports. */ removed?: number }
  | { type: 'recovered'; uncertain: string[] }
  | { type: 'listening'; address: string; public_url: string }
  | {
      type: 'estimate';
      /** Known credits of the jobs this run will submit. */
      pending_credits: number;
      /** Known credits of every job of the manifest. */
      total_credits: number;
      unknown_price_jobs: string[];
      /** for_each jobs whose children have a price but whose count is decided at run time. */
      unknown_count_jobs?: string[];
      balance: number | null;
    }
  /**
   * --only / --limit: this run sends `selected` of the pending jobs (`needed` of them only because a chosen
   * job needs them) and leaves `left_pending` for a later run.
   */
  | { type: 'selection'; selected: number; needed: number; left_pending: number; only: string[] | null; limit: number | null }
  /**
   * Tonight's work did not fit a credit cap or the balance by its known estimate (`over`: each bound broken, in the
   * words of the old refusal): `sent` jobs that fit go (`sent_credits` by their estimate); `held`: jobs left pending, by reason.
   */
  | { type: 'held'; over: string[]; sent: number; sent_credits: number; held: Record<string, number> }
  /** --redo: jobs that had ended in these states went back to pending to be sent again. */
  | { type: 'redo'; states: string[]; jobs: number }
  | { type: 'upload'; file: string; sha256: string; url: string; reused: boolean }
  /** A job sent again: the files of its earlier result were moved to `dir` (relative to the output folder). */
  | { type: 'previous'; id: string; dir: string }
  | { type: 'job'; id: string; from: JobState; to: JobState; task_id?: string | null; error?: string | null }
  /** A worker on PostgreSQL, every COUNTS_EVERY_MS: the run's jobs by state and its result files now, every worker's (what its progress shows). */
  | { type: 'counts'; counts: Record<JobState, number>; files: number }
  /** A submit POST is about to be sent (its intent is committed); the job's estimated price (null: unknown). */
  | { type: 'sending'; id: string; estimated_credits: number | null }
  /** A for_each job made its children (new pending jobs `<id>.<index>`). */
  | { type: 'children'; id: string; ids: string[] }
  | { type: 'progress'; id: string; task_id: string; status: string; progress: number | null }
  /** A result file is on disk: downloaded, or a text result (lyrics, a chat answer) written. */
  | { type: 'file'; id: string; path: string; size: number; sha256: string }
  | { type: 'retry'; what: string; attempt: number; delay_ms: number; error: string }
  | { type: 'warning'; message: string }
  /**
   * What holds the run: `queued` requests wait for the upload window (`rule`: its limit, `5 a minute`); the
   * next slot frees in `next_in_ms` (null: when a request in flight ends). queued 0: the wait is over.
   */
  /**
   * What holds the run: the upload window (`rule`: 5 a minute; `queued` uploads wait), the credit cap (`rule`: why;
   * `queued` 1 while it holds the next submit), or the status-read rate (`rule`: `10 a second`; `queued` due tasks
   * have waited for a read more than 2 s). `queued` 0: that wait is over.
   */
  | { type: 'wait'; what: 'upload-window' | 'credit-cap' | 'status-rate'; rule: string; queued: number; next_in_ms: number | null }
  /** run --learn-prices: the charge of a job of a price class sent alone (credits null: not learned, and why). */
  | { type: 'price-learned'; id: string; class: string; credits: number | null; why: string | null }
  | { type: 'stopping'; reason: StopReason }
  /** Under a credit cap: the first job of a price class, sent alone, was charged `charged`; the class's jobs are expected at `price` from now on. */
  | { type: 'cap-price'; id: string; class: string; charged: number; expected: number | null; price: number }
  /** written: false when the run changed nothing and the four reports already exist (`genbatch report` rewrites them). */
  | { type: 'reports'; out_dir: string; written: boolean }
  /**
   * balance_after: read after this invocation's work (null: not read). charged: this invocation's balance before
   * minus after (null: either not read). run_charged: the run's charge over all its invocations, as in report.json's
   * summary.credits.charged (null: one of them not measured). failed_ids, expired_ids: the first 20 jobs in that
   * state at the end (`run --redo` sends them again). callbacks_ignored: completion callbacks (--listen) ignored
   * because they named another task than the job's recorded one, an earlier attempt, or no job of the run.
   */
  | {
      type: 'finish';
      counts: Record<JobState, number>;
      exit_code: number;
      wall_seconds: number;
      status_requests: number;
      balance_after: number | null;
      charged: number | null;
      run_charged: number | null;
      failed_ids?: string[];
      expired_ids?: string[];
      /** The failed jobs that failed permanently (the service refused their input): how many, the first 20 ids. */
      permanent?: { count: number; ids: string[] };
      /** The first 20 uncertain jobs at the end (`--uncertain resubmit` sends them again). */
      uncertain_ids?: string[];
      /** Completion callbacks ignored: another task than the job's, an earlier attempt, or no job of this run. */
      callbacks_ignored?: number;
      /** Under a credit cap: the cap, what the run was charged, whether the cap stopped the sending, and the jobs left (their credits at the prices seen). */
      cap?: { credits: number; name: string; stopped: boolean; charged: number; left_pending: number; left_credits: { credits: number; unknown: number } | null };
      /** The caps this invocation ran under (null: none): the run's (--max-credits or the budget) and the per-invocation one. */
      caps?: { max_credits: { credits: number; name: string } | null; per_invocation: { credits: number; name: string } | null };
      /** Every job not done, grouped by reason (src/engine/summary.ts). */
      not_done?: Record<string, NotDone>;
    }
  /**
   * `run --json`'s last line, whichever way the run ended (README "The --json summary"): the outcome and exit code,
   * the jobs by state (null: refused before the sync), every job not done grouped by reason, what was charged over
   * the run and in this invocation, the caps, and the error that ended it early (null: none).
   */
  | {
      type: 'summary';
      outcome: string;
      exit_code: number;
      counts: Record<JobState, number> | null;
      not_done: Record<string, NotDone> | null;
      charged: number | null;
      charged_now: number | null;
      caps: { max_credits: { credits: number; name: string } | null; per_invocation: { credits: number; name: string } | null } | null;
      error: string | null;
    }
  /**
   * Under a credit cap (before the pipeline): the cap, what the run's earlier invocations were charged, the expected
   * credits of the pending jobs, and how many jobs have no price confirmed in this process yet (each class's first job goes alone).
   */
  | { type: 'cap'; credits: number; name: string; charged: number; pending_credits: number; unconfirmed_jobs: number };

/** Why new submissions stopped early. */
export type StopReason = 'signal' | 'insufficient-credits' | 'lease-lost' | 'credit-cap';

export type EventListener = (event: EngineEvent) => void;

/** A tiny typed fan-out. A listener that throws is reported once and removed. */
export class EventBus {
  /** Replaced, never changed in place: an emit in progress keeps the list it started with (no copy per event). */
  private listeners: readonly EventListener[] = [];
  on(listener: EventListener): () => void {
    this.listeners = [...this.listeners, listener];
    return () => {
      const i = this.listeners.indexOf(listener);
      if (i >= 0) this.listeners = this.listeners.filter((_, k) => k !== i);
    };
  }
  emit = (event: EngineEvent): void => {
    const list = this.listeners;
    for (let i = 0; i < list.length; i++) list[i]!(event);
  };
}
