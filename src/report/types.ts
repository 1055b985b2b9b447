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
  task_id: string | null;
  /** One of the store's job states (done, failed, uncertain, expired, skipped, pending, ...). */
  state: string;
  attempts: number;
  error: string | null;
  /** Known estimate for this job, null when the price is unknown. */
  estimated_credits: number | null;
  files: ReportFile[];
  /** Text results (lyrics, style, persona id, chat text), by name. */
  texts: Record<string, string>;
  /** Token usage for chat jobs. */
  usage?: { input_tokens: number; output_tokens: number } | null;
  submitted_at: string | null;
  finished_at: string | null;
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
  credits: {
    estimated_known: number;
    unknown_price_jobs: number;
    balance_before: number | null;
    balance_after: number | null;
    /** balance_before - balance_after when both are known. */
    charged: number | null;
    /** True when any price came from the user (--prices or the manifest's pricing block). */
    user_prices: boolean;
  };
  /** Chat jobs (absent when the run has none): calls repeated (attempts beyond the first) and tokens used. */
  chat?: { jobs: number; done: number; repeated_calls: number; input_tokens: number; output_tokens: number };
}

export interface ReportData {
  summary: ReportSummary;
  /** Iterated once per writer; may be large: writers stream where they can. */
  jobs: () => Iterable<ReportJob>;
}
