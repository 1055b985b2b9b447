/**
 * What the report writers need, independent of how the store keeps it.
 * The engine (or `genbatch report`) builds a ReportData from the state file;
 * src/report/ turns it into report.json, report.csv, report.md and report.html.
 */

export interface ReportFile {
  /** Path relative to the output folder, e.g. "c017/image-1.png". */
  path: string;
  size: number;
  sha256: string;
  /** file_type from the service (image, video, audio, lyrics, 3d, other) or "text"/"json" for saved text results. */
  type: string;
  contentType: string | null;
}

export interface ReportJob {
  id: string;
  model: string;
  /** Where the job was defined, e.g. "manifest.yaml:41" or "jobs.csv:row 7". */
  where: string;
  /**
   * The input as sent (uploaded URLs in place of local paths); for a job not sent yet, as the manifest gives it.
   * Null when the state holds neither (a state file written before inputs were kept).
   */
  input: Record<string, unknown> | null;
  /** What was asked, in one text (promptOf): the prompt, a chat job's last user message, or a music job's style or title. */
  prompt: string | null;
  /** The variables of a rows or matrix job, read from `where` (varsOf): `{ row: "17", mood: "rainy" }`; empty for others. */
  vars: Record<string, string>;
  task_id: string | null;
  /** One of the store's job states (done, failed, uncertain, expired, skipped, pending, ...). */
  state: string;
  attempts: number;
  error: string | null;
  /** Present (true) on a failed job that failed permanently: the service refused its input, a retry cannot help. */
  permanent?: true;
  /** Known estimate for this job, null when the price is unknown. */
  estimated_credits: number | null;
  files: ReportFile[];
  /** Text results (lyrics, style, persona id, chat text), by name. */
  texts: Record<string, string>;
  /** Token usage for chat jobs. */
  usage?: { input_tokens: number; output_tokens: number } | null;
  submitted_at: string | null;
  finished_at: string | null;
  /** The invocation (credits.invocations[].n) that last sent the job; null: not sent (or sent before genbatch recorded it). */
  sent_by?: number | null;
  /** The job's expected price when that invocation sent it (from the learned price of its class where known); null: unknown or not sent. */
  expected_credits?: number | null;
  /** Why a pending job was not sent: the refusal of the last invocation (cap, balance, unknown prices); absent otherwise. */
  pending_reason?: string;
  /** The current review mark (`genbatch mark`), null when none; absent: not read (treated as none). */
  mark?: { state: 'approved' | 'rejected'; note: string | null; at: string } | null;
}

/** One `genbatch run` of the run, with the balance read before and after its work. */
export interface ReportInvocation {
  /** 1, 2, ... within the run. */
  n: number;
  started_at: string;
  /** Null when it was stopped before its end (killed) or is still running. */
  finished_at: string | null;
  balance_before: number | null;
  balance_before_at: string | null;
  balance_after: number | null;
  balance_after_at: string | null;
  /** Submit requests it started (one a stop caught before it was sent counts too); null: not recorded by the genbatch that ran it. */
  submits: number | null;
  /** balance_before minus the closing reading (see charged_to); null when not measured. */
  charged: number | null;
  /**
   * The closing reading `charged` is measured to: "end" (balance_after), "next-start" (no closing reading,
   * e.g. killed: the next invocation's balance_before), null when `charged` is null.
   */
  charged_to: 'end' | 'next-start' | null;
  /** True while it is still running (a reader saw its run hold the state file's lease): no closing reading yet, as expected. */
  running?: boolean;
  /**
   * How `charged` was found: "measured" (its own closing reading), "reconstructed" (it has none, e.g. it was
   * killed: measured to the next invocation's opening reading), null when not measured (no reading exists).
   */
  charged_source: 'measured' | 'reconstructed' | null;
  /** The jobs this invocation was the last to send, and how many of them are done and failed now (absent: not recorded). */
  jobs?: { sent: number; done: number; failed: number };
}

export interface ReportSummary {
  manifest: string;
  out_dir: string;
  base_url: string;
  sandbox: boolean;
  started_at: string;
  finished_at: string;
  wall_seconds: number;
  counts: Record<string, number>;
  /** Of the failed jobs, those that failed permanently (the service refused their input; `permanent: true` on their entries). */
  failed_permanent?: number;
  /** Done jobs whose spec changed that kept their earlier results (`--keep-changed`); `run --redo changed` sends them. */
  changed_not_sent?: string[];
  credits: {
    /** The sum of the known prices of the run's jobs (jobs of unknown price are not in it: see unknown_price_jobs). */
    estimated_known: number;
    /** Jobs whose price is unknown, left out of estimated_known. */
    unknown_price_jobs: number;
    /** The balance read before the run's first invocation that read it (null: none did). */
    balance_before: number | null;
    /** The balance read after the run's last such invocation (null: not read, e.g. it was killed). */
    balance_after: number | null;
    /**
     * The run's charge over every invocation: the sum of the invocations' charges (`invocations[].charged`),
     * 0 when no invocation had work; null when one of them is not measured. A difference of balance
     * readings: any other use of the same key during an invocation moves it too.
     */
    charged: number | null;
    /** True when any price came from the user (--prices or the manifest's pricing block). */
    user_prices: boolean;
    /** Each `genbatch run` of the run that had work that can move the balance, in order. */
    invocations: ReportInvocation[];
    /**
     * The credit cap on what is charged (--max-credits, the manifest's budget) of the run's last invocation: its
     * credits, how it was given, and whether it stopped the run (jobs left pending); null: no cap.
     */
    cap?: { credits: number; name: string; stopped: boolean } | null;
  };
  /**
   * The last invocation was refused before it sent anything (cap, balance, unknown prices): why, its exit code and
   * when; the reports were rewritten then, with the jobs it left pending. Null: the last invocation was not refused.
   */
  refused?: { reason: string; code: string; exit_code: number; at: string } | null;
  /** Chat jobs (absent when the run has none): calls repeated (attempts beyond the first) and tokens used. */
  chat?: { jobs: number; done: number; repeated_calls: number; input_tokens: number; output_tokens: number };
  /**
   * A run on a PostgreSQL state (absent on a SQLite state file): each worker's share, by worker id
   * (hostname:pid:random): the jobs it holds now (their lease names it), by state; the result files it wrote and their bytes;
   * its last heartbeat.
   */
  workers?: Array<{ id: string; jobs: Record<string, number>; files: number; bytes: number; last_seen: string | null }>;
}

export interface ReportData {
  summary: ReportSummary;
  /** Iterated once per writer; may be large: writers stream where they can. */
  jobs: () => Iterable<ReportJob>;
}
