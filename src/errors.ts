/**
 * One error hierarchy for genbatch. Every error carries a stable `code`
 * (callers branch on codes, never on message text) and the process exit code
 * the CLI uses when the error reaches it. Only src/cli/main.ts calls process.exit.
 *
 * Exit codes: 0 all done, 1 some jobs failed, 2 invalid manifest or usage,
 * 3 over budget or balance, 4 incomplete, 74 a file or folder could not be used (disk full,
 * read-only, not a folder, ...: the system's message is shown), 130 interrupted by SIGINT.
 */
/**
 * Exit codes, one table (README "Exit codes"): a scheduler acts on the code alone. When several apply, the first of
 * this order wins: interrupted (130, 143) > usage, io, internal > decision (4) > jobsFailed (1) > budget (3) >
 * capReached (5) > leftPending (7) > failedPermanent (6) > ok. The `--json` summary line names every reason.
 */
export const EXIT = {
  /** Every job done. */
  ok: 0,
  /** Jobs failed that a retry may fix (`--redo failed`). */
  jobsFailed: 1,
  /** Invalid manifest or usage; nothing sent. */
  usage: 2,
  /** Work left pending for the account's balance (refused before sending, or a 402 mid-run), or unknown prices without --yes. */
  budget: 3,
  /** Jobs that need a decision: uncertain (a task may exist) or expired (results lost; sending again charges again). */
  incomplete: 4,
  /** The credit cap (--max-credits, the manifest budget, --max-credits-per-invocation) left work pending. */
  capReached: 5,
  /** Every job done apart from jobs that failed permanently (the service refused their input; a retry cannot help). */
  failedPermanent: 6,
  /** Work left pending by --only/--limit, or by a lost lease (another worker goes on with it). */
  leftPending: 7,
  io: 74,
  internal: 70,
  sigint: 130,
  sigterm: 143,
} as const;

export class GenbatchError extends Error {
  readonly code: string;
  readonly exitCode: number;
  constructor(code: string, message: string, exitCode: number = EXIT.internal, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
    this.exitCode = exitCode;
  }
}

/** Bad command-line usage: unknown flag, missing argument, bad flag value. */
export class UsageError extends GenbatchError {
  constructor(message: string) {
    super('GB_USAGE', message, EXIT.usage);
  }
}

/** One problem found in a manifest: job, source position, field path, rule. */
export interface Problem {
  /** Job id, or null when the problem is not tied to one job (e.g. YAML syntax). */
  job: string | null;
  /** `file:line` for YAML, `file:row N` for CSV rows, or just the file. */
  where: string;
  /** Dotted field path, e.g. `input.size`, `input.image_urls[0]`; empty for whole-job problems. */
  path: string;
  /** The rule broken, in plain words. */
  message: string;
}

export function formatProblem(p: Problem): string {
  const head = p.job === null ? p.where : `job ${p.job} (${p.where})`;
  return visible(p.path ? `${head} ${p.path}: ${p.message}` : `${head}: ${p.message}`);
}

/**
 * Control characters (a newline, ESC, a tab, ...) and bidi overrides, e.g. in a job id, as \uXXXX: one problem is one
 * line, and a manifest cannot drive the terminal. Also for values printed from a state file (status), which may have
 * been edited by hand.
 */
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
export function visible(line: string): string {
  return line.replace(INVISIBLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Longest piece of a server's free text kept in a message (the raw text of an error answer was already cut at 300). */
export const SERVER_TEXT_MAX = 1000;

/**
 * A server's free text (an error answer's message, a failed task's error_message) as genbatch's messages carry
 * it: one visible line (control characters and bidi overrides as \uXXXX, as a manifest's), at most
 * SERVER_TEXT_MAX characters. It is printed (warnings, `status --jobs`), stored (last_error) and reported: a
 * server must not drive the terminal (ESC sequences), forge a line of genbatch's own (CR, LF) or fill them.
 */
export function serverText(text: string): string {
  const line = visible(text);
  return line.length > SERVER_TEXT_MAX ? `${line.slice(0, SERVER_TEXT_MAX)}... (${line.length} characters in all)` : line;
}

/** The manifest (or one of its jobs) is invalid. Carries every problem found, not just the first. */
export class ManifestError extends GenbatchError {
  readonly problems: Problem[];
  constructor(problems: Problem[]) {
    super('GB_MANIFEST', problems.map(formatProblem).join('\n'), EXIT.usage);
    this.problems = problems;
  }
}

/** A model id that the catalogue does not know. Never falls back to another model. */
export class UnknownModelError extends GenbatchError {
  readonly model: string;
  constructor(model: string) {
    super('GB_UNKNOWN_MODEL', `unknown model "${model}" (see \`genbatch models\`)`, EXIT.usage);
    this.model = model;
  }
}

/** The known estimate exceeds the balance (exit 3), --max-credits or the manifest budget (exit 5: EXIT.capReached). */
export class BudgetError extends GenbatchError {
  constructor(message: string, exitCode: number = EXIT.budget) {
    super('GB_BUDGET', message, exitCode);
  }
}

/**
 * An HTTP error answer from the service. `status` and `type` come from the
 * response; `retryAfterMs` from its Retry-After header when present.
 */
export class ApiError extends GenbatchError {
  readonly status: number;
  readonly type: string | null;
  readonly retryAfterMs: number | null;
  constructor(status: number, type: string | null, message: string, retryAfterMs: number | null = null) {
    super(apiCode(status), `HTTP ${status}${type ? ` ${type}` : ''}: ${message}`, EXIT.jobsFailed);
    this.status = status;
    this.type = type;
    this.retryAfterMs = retryAfterMs;
  }
}

function apiCode(status: number): string {
  if (status === 429) return 'GB_API_RATE_LIMITED';
  if (status === 402) return 'GB_API_INSUFFICIENT_CREDITS';
  if (status === 401) return 'GB_API_UNAUTHORIZED';
  if (status === 409) return 'GB_API_CONFLICT';
  if (status >= 500) return 'GB_API_SERVER';
  return 'GB_API_REJECTED';
}

/**
 * A transport failure. `sent` tells whether the request may have reached the
 * server: false for a refused connection or a failure before the body was
 * written (safe to retry any method); true for a reset or timeout after
 * sending (a POST may have taken effect).
 */
export class NetworkError extends GenbatchError {
  readonly sent: boolean;
  constructor(message: string, sent: boolean, options?: { cause?: unknown }) {
    super('GB_NETWORK', message, EXIT.jobsFailed, options);
    this.sent = sent;
  }
}

/**
 * A request cut at its total deadline (a server that keeps it open, dripping bytes or saying nothing):
 * retried like any network error, but a status read cut this way again and again is given up on for the
 * run (the job is left for the next one) instead of keeping a nightly run alive for hours.
 */
export class DeadlineError extends NetworkError {}

/**
 * A submit whose outcome is unknown: the request may have reached the service
 * (a 500/502/504, or a reset, timeout or abort after sending, or an unreadable
 * 200 answer), so a task may exist. Never resubmitted blindly: the job becomes `uncertain`.
 */
export class AmbiguousSubmitError extends GenbatchError {
  /** HTTP status when the service answered, null for a transport failure. */
  readonly status: number | null;
  constructor(cause: Error, status: number | null = null) {
    super('GB_SUBMIT_UNCERTAIN', `submit outcome unknown, a task may have been created: ${cause.message}`, EXIT.incomplete, { cause });
    this.status = status;
  }
}

/** A service answer whose body does not have the documented shape (not JSON, or a field missing or of the wrong type). */
export class BadResponseError extends GenbatchError {
  readonly status: number;
  constructor(status: number, message: string, code = 'GB_BAD_RESPONSE') {
    super(code, message, EXIT.jobsFailed);
    this.status = status;
  }
}

/**
 * An answer that was not read to its end because it broke a limit: over its endpoint's size limit, or
 * nested deeper than the reader allows. Reading stopped at the limit (the connection was dropped).
 * Retried a few times like a transient error (retry.ts); a submit's becomes uncertain.
 */
export class UnusableAnswerError extends BadResponseError {
  constructor(status: number, message: string) {
    super(status, message, 'GB_ANSWER_UNUSABLE');
  }
}

/** The state file cannot be used: held by a live writer, or failed its integrity check. */
export class StateError extends GenbatchError {
  constructor(message: string) {
    super('GB_STATE', message, EXIT.usage);
  }
}

/**
 * A job state change refused by the store: the job was not in the state the
 * caller expected (another actor moved it), or the change is not in the table.
 * Always a bug or a race, never user input.
 */
export class TransitionError extends GenbatchError {
  constructor(message: string) {
    super('GB_TRANSITION', message, EXIT.internal);
  }
}

/** A server-sent name, URL or size that fails our checks before touching the disk. */
export class UnsafeResultError extends GenbatchError {
  constructor(message: string) {
    super('GB_UNSAFE_RESULT', message, EXIT.jobsFailed);
  }
}

/** The run stopped early (signal): state is committed, work is left for a rerun. */
export class InterruptedError extends GenbatchError {
  constructor(signal: string) {
    super('GB_INTERRUPTED', `interrupted by ${signal}`, signal === 'SIGINT' ? EXIT.sigint : EXIT.incomplete);
  }
}

/**
 * A folder genbatch would write into is not a real folder inside the output folder (a symbolic
 * link, or a file): nothing is written through it. Exit 74, naming the path.
 */
export class UnsafePathError extends GenbatchError {
  /** `flag`: the option that chose the folder (--out, export's --to). */
  constructor(readonly path: string, readonly what: string, flag = '--out') {
    super('GB_UNSAFE_PATH', `${path} ${what}; genbatch writes only into real folders inside the ${flag === '--out' ? 'output' : flag} folder (remove it or choose another ${flag})`, EXIT.io);
  }
}

/**
 * The bucket of `--out s3://...` could not be used (wrong credentials, a missing bucket, no permission,
 * an endpoint that does not answer): exit 74 like a folder that cannot be written, naming the bucket.
 */
export class StorageError extends GenbatchError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('GB_STORAGE', message, EXIT.io, options);
  }
}

/** System error codes of a file or folder the machine refused (not a bug of ours): exit 74 with the system's message. */
const FILE_SYSTEM_CODES = new Set(['ENOSPC', 'EDQUOT', 'EROFS', 'EACCES', 'EPERM', 'EIO', 'EMFILE', 'ENFILE', 'ENOTDIR', 'EISDIR', 'EEXIST', 'ENAMETOOLONG', 'ELOOP', 'EFBIG']);

/** True for a Node system error from a file or folder operation whose cause is the machine (see FILE_SYSTEM_CODES). */
export function isFileSystemError(err: unknown): err is NodeJS.ErrnoException {
  return err instanceof Error && typeof (err as NodeJS.ErrnoException).syscall === 'string' && FILE_SYSTEM_CODES.has(String((err as NodeJS.ErrnoException).code));
}

/**
 * A manifest change would send more finished (done) jobs again than the guard allows (`--max-changed`, default
 * 10): nothing was recorded or sent. Exit 4 (a decision is needed): `--redo changed` (or `--yes`) sends them,
 * `--keep-changed` keeps their results.
 */
/** What the guard on mass re-sends found: the changed done jobs, their estimate, three examples of the change. */
export interface ChangedFacts {
  count: number;
  /** Known estimate of sending them again. */
  credits: number;
  /** How many of them have no known price. */
  unknown: number;
  examples: Array<{ id: string; diff: string }>;
  max: number;
}

export class ChangedGuardError extends GenbatchError {
  constructor(
    message: string,
    readonly facts: ChangedFacts,
  ) {
    super('GB_CHANGED_GUARD', message, EXIT.incomplete);
  }
}
