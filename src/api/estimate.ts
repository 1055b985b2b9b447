import { ServiceClient, serviceConfigFromEnv, type ServiceConfig } from '../client/index.js';
import { ManifestError, type Problem } from '../errors.js';
import { localImageRefs, openManifest, type ManifestJob } from '../manifest/index.js';
import { DEFAULT_MAX_CHANGED } from '../engine/prepare/changed.js';
import type { StatePlan } from '../engine/prepare/plan-types.js';
import { invocationCap } from '../engine/prepare/prepare.js';
import { checkUserPrices, defaultBookPath, estimate as priceJobs, loadPriceFile, observedPrices, PriceBook, unknownPriceModels, type JobEstimate, type ModelTotal, type UserPrices } from '../pricing/index.js';

/**
 * The estimate of a manifest: credits per job, per model and in total (unknown prices listed apart, never
 * counted as 0), compared with the balance unless offline, and with the manifest's budget. The same object
 * `genbatch estimate --json` prints. User prices: the manifest's `pricing:` block, then the prices file (wins per model).
 */

export interface EstimateOptions {
  /** Do not read the balance (no key or base URL needed). Default false. */
  offline?: boolean;
  /** A prices file (YAML or JSON: model id -> credits), as `--prices`. */
  prices?: string;
  /** Service base URL; default $GENBATCH_BASE_URL. */
  baseUrl?: string;
  /** API key; default $GENBATCH_API_KEY. */
  apiKey?: string;
  /** The manifest may name only files inside its folder (`--confine`). */
  confine?: boolean;
  /** The cap a run would have (`--max-credits`): in the result's `cap`. */
  maxCredits?: number;
  /** The per-invocation cap a run would have (`--max-credits-per-invocation`): used by the plan against a state. */
  maxCreditsPerInvocation?: number;
  /** A SQLite state file of earlier runs of this manifest: the result's `state` says what the next run would do with it. */
  state?: string;
  /** The guard on mass re-sends a run would have (`--max-changed`, default 10). */
  maxChanged?: number;
}

export interface EstimateResult {
  /** Sum of the known prices. */
  total_credits: number;
  /** Valid jobs whose price is unknown (not counted in the total). */
  unknown_price_jobs: string[];
  /** for_each jobs whose children have a price but whose count is decided at run time. */
  unknown_count_jobs: string[];
  /** null when offline. */
  balance: number | null;
  /** null when offline. */
  affordable: boolean | null;
  /** The manifest's `budget:`, or null. */
  budget: number | null;
  within_budget: boolean | null;
  /**
   * The credit cap a run would have (the tighter of --max-credits and the budget): what the run is charged stays
   * within it plus one task per process; null: none.
   */
  cap: { credits: number; name: string } | null;
  /** Jobs whose price no charge on the account has confirmed (published, yours or unknown): under a cap the first job of each price class goes alone. */
  unconfirmed_price_jobs: number;
  /** Part of total_credits from user-supplied prices. */
  user_supplied_credits: number;
  /** Part of total_credits from prices observed on the account (`genbatch prices probe`). */
  observed_credits: number;
  /** User-supplied prices of models the service prices itself for every job (not used). */
  user_prices_unused: string[];
  /** User-supplied prices naming no known model and no job. */
  user_prices_unknown_models: string[];
  jobs_count: number;
  /** Per model; `source`: published, yours, observed, unknown, or mixed. */
  per_model: Record<string, ModelTotal & { source: string }>;
  /** Every job in manifest order (an empty list when `keepJobs` was false). */
  jobs: JobEstimate[];
  /** Distinct local image files the jobs name (each one upload at most: one uploaded earlier is reused). */
  local_images: number;
  /** Seconds the uploads alone take at most under the service's window of 5 uploads a minute (0 for up to 5). */
  upload_seconds: number;
  /** With a state of earlier runs: what the next run would keep, send again (the guard on re-sends) and send under the caps; null: no state. */
  state: StatePlan | null;
}

/** The service's upload window: 5 uploads per 60 s per key (the client keeps it as 61.2 s). */
const UPLOADS_PER_WINDOW = 5;
const UPLOAD_WINDOW_S = 61.2;

/** The estimate, or the problems when some job is invalid (the balance is then not read). */
export type EstimateOutcome = { estimate: EstimateResult; problems: [] } | { estimate: null; problems: Problem[] };

/**
 * Estimate a manifest with the service named by `config` (null: offline). `keepJobs` lists every job in the
 * result; `onJob` sees each priced job as it streams by. Manifest problems are returned, not thrown.
 */
export async function estimateManifest(
  manifestPath: string,
  config: ServiceConfig | null,
  opts: { prices?: string; keepJobs?: boolean; onJob?: (job: JobEstimate) => void; service?: string; confine?: boolean; maxCredits?: number; maxCreditsPerInvocation?: number; state?: string; maxChanged?: number } = {},
): Promise<EstimateOutcome> {
  const file = opts.prices ? await loadPriceFile(opts.prices) : { user: null, book: null };
  const fileP = file.user;
  // Prices observed on the account (genbatch prices probe): from a --prices book, else the user's price book.
  const service = config?.baseUrl ?? opts.service ?? null;
  const observed = service ? observedPrices(file.book ?? PriceBook.load(defaultBookPath()), service) : null;
  const manifest = await openManifest(manifestPath, { confine: opts.confine === true });
  checkUserPrices(manifest.pricing, `${manifestPath}: pricing`);
  const userPrices: UserPrices | null = manifest.pricing || fileP ? { ...(manifest.pricing ?? {}), ...(fileP ?? {}) } : null;
  const images = new Set<string>();
  const est = await priceJobs(counted(manifest.jobs(), images), userPrices, { keepJobs: opts.keepJobs === true, observed, ...(opts.onJob ? { onJob: opts.onJob } : {}) });
  const problems = [...manifest.problems, ...est.problems];
  if (problems.length > 0) return { estimate: null, problems };

  let balance: number | null = null;
  if (config) {
    const client = new ServiceClient({ ...config, policy: { baseMs: 500, maxMs: 5_000, maxAttempts: 4 } });
    try {
      balance = await client.balance();
    } finally {
      await client.close();
    }
  }
  const cap = capOf(opts.maxCredits ?? null, manifest.budget);
  const state =
    opts.state === undefined
      ? null
      : await (await import('../engine/prepare/plan.js')).planAgainstState(opts.state, manifest, {
          userPrices,
          observed,
          maxChanged: opts.maxChanged ?? DEFAULT_MAX_CHANGED,
          caps: { run: cap, invocation: invocationCap(opts.maxCreditsPerInvocation ?? null, manifest.budgetPerInvocation) },
          balance,
        });
  const unused = Object.keys(userPrices ?? {}).filter((m) => {
    const t = est.per_model[m];
    return t !== undefined && t.user_jobs === 0 && t.unknown_jobs === 0;
  });
  return {
    problems: [],
    estimate: {
      total_credits: est.total_credits,
      unknown_price_jobs: est.unknown_price_jobs,
      unknown_count_jobs: est.unknown_count_jobs,
      balance,
      affordable: balance === null ? null : est.total_credits <= balance,
      budget: manifest.budget,
      within_budget: manifest.budget === null ? null : est.total_credits <= manifest.budget,
      cap,
      unconfirmed_price_jobs: est.jobs_count - Object.values(est.per_model).reduce((a, t) => a + t.observed_jobs, 0),
      user_supplied_credits: est.user_supplied_credits,
      observed_credits: est.observed_credits,
      user_prices_unused: unused,
      user_prices_unknown_models: unknownPriceModels(userPrices, Object.keys(est.per_model)),
      jobs_count: est.jobs_count,
      per_model: Object.fromEntries(Object.entries(est.per_model).map(([m, t]) => [m, { ...t, source: modelSource(t) }])),
      jobs: (est.jobs ?? []).map((j) => ({ id: j.id, model: j.model, credits: j.credits, source: j.source, basis: j.basis, ...(j.children !== undefined ? { children: j.children } : {}) })),
      local_images: images.size,
      upload_seconds: Math.max(0, Math.ceil(images.size / UPLOADS_PER_WINDOW) - 1) * UPLOAD_WINDOW_S,
      state,
    },
  };
}

/** The jobs as they stream by, each one's local image files added to `files`. */
async function* counted(jobs: AsyncIterable<ManifestJob>, files: Set<string>): AsyncIterable<ManifestJob> {
  for await (const job of jobs) {
    for (const ref of localImageRefs(job)) files.add(ref.file);
    yield job;
  }
}

/** The tighter of --max-credits and the manifest's budget, named as run names it. */
function capOf(maxCredits: number | null, budget: number | null): { credits: number; name: string } | null {
  if (maxCredits !== null && (budget === null || maxCredits <= budget)) return { credits: maxCredits, name: `--max-credits ${maxCredits}` };
  return budget === null ? null : { credits: budget, name: `the manifest budget of ${budget}` };
}

/** One word for the prices of a model's jobs: the one source they share, or "mixed". */
function modelSource(t: ModelTotal): string {
  const published = t.known_jobs - t.user_jobs - t.observed_jobs;
  const sources = [published > 0 ? 'published' : '', t.user_jobs > 0 ? 'yours' : '', t.observed_jobs > 0 ? 'observed' : '', t.unknown_jobs > 0 ? 'unknown' : ''].filter(Boolean);
  return sources.length === 1 ? sources[0]! : 'mixed';
}

/**
 * Estimate a manifest (every job listed). Throws ManifestError (with every problem) when a job is invalid,
 * UsageError when the key or base URL is missing (unless offline) or the prices are unusable, ApiError or
 * NetworkError when the balance cannot be read.
 */
export async function estimate(manifestPath: string, opts: EstimateOptions = {}): Promise<EstimateResult> {
  const config = opts.offline ? null : serviceConfigFromEnv({ ...(opts.baseUrl !== undefined ? { baseUrl: opts.baseUrl } : {}), ...(opts.apiKey !== undefined ? { apiKey: opts.apiKey } : {}) });
  const service = opts.baseUrl ?? process.env.GENBATCH_BASE_URL;
  const out = await estimateManifest(manifestPath, config, { keepJobs: true, confine: opts.confine === true, ...(opts.maxCredits !== undefined ? { maxCredits: opts.maxCredits } : {}), ...(opts.maxCreditsPerInvocation !== undefined ? { maxCreditsPerInvocation: opts.maxCreditsPerInvocation } : {}), ...(opts.state !== undefined ? { state: opts.state } : {}), ...(opts.maxChanged !== undefined ? { maxChanged: opts.maxChanged } : {}), ...(opts.prices !== undefined ? { prices: opts.prices } : {}), ...(service ? { service } : {}) });
  if (out.estimate === null) throw new ManifestError(out.problems);
  return out.estimate;
}
