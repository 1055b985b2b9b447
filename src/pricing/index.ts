import { readFile } from 'node:fs/promises';
import * as z from 'zod';
import { UsageError, type Problem } from '../errors.js';
import { findChatModel, findModel } from '../models/index.js';
import { BOOK_MARK, observedLabel, PriceBook, type BookEntry } from './book.js';
import { priceClass } from './classes.js';

export { defaultBookPath, isBook, observedLabel, PriceBook, serviceName, type BookEntry } from './book.js';
export { priceClass, type PriceClass } from './classes.js';
export { balanceProblem, chargeProblem, FreeClasses, MAX_PROBE_BALANCE, NEVER_MOVED, probe, type BalanceAnswer, type ProbeOutcome, type ProbePort } from './probe.js';

/**
 * Credits per job, per model and in total.
 *
 * A job is priced from the service when its model's price function gives a
 * number. Otherwise a user-supplied price (`--prices FILE` or the manifest's
 * `pricing:` block) is used when one names the model: for image models it is
 * credits per image, times the images one request makes (`n`, from the
 * catalogue's outputCount); for every other model (video, music, chat) it is
 * credits per request. A service price is never
 * replaced by a user price (choice: the service's tables are exact for the
 * inputs they cover; user prices fill the gaps). With neither, the price is
 * unknown: listed apart, never counted as 0.
 */

export type PriceSource = 'service' | 'user' | 'observed' | 'unknown';

/** Prices observed on the account (the price book for one service): looked up by the job's price class. */
export interface ObservedPrices {
  lookup(job: { model: string; kind: 'submit' | 'chat'; input: Record<string, unknown> }): BookEntry | undefined;
  /** Changes when any price of this service changes (a run's sync key includes it). */
  digest: string;
}

/** The observed prices of `book` for the service at `baseUrl`. */
export function observedPrices(book: PriceBook, baseUrl: string): ObservedPrices {
  const entries = book.entries(baseUrl).map((e) => `${e.key}=${e.entry.credits}`).sort();
  return { lookup: (job) => book.lookup(baseUrl, priceClass(job).key), digest: entries.join('\n') };
}

/** A --prices file: user prices (model id -> credits), or a price book (observed prices). */
export async function loadPriceFile(file: string): Promise<{ user: UserPrices | null; book: PriceBook | null }> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new UsageError(`--prices: cannot read ${file}`);
  }
  if (/^\s*\{/.test(text) && text.includes(BOOK_MARK)) return { user: null, book: PriceBook.fromJson(file, text) };
  return { user: await loadPrices(file), book: null };
}

export interface JobPrice {
  /** Credits of the job, or null when unknown. */
  credits: number | null;
  /** How the number was reached, or why it is unknown. */
  basis: string;
  source: PriceSource;
  /** A for_each job whose children have a price but whose count is decided at run time (credits null). */
  unknownCount?: boolean;
  /**
   * The price book holds 0 credits for the job's class (learned: the balance did not move for it). Never a
   * confirmed price: credits stays null (source 'unknown'), so the job needs --yes and counts as unpriced.
   */
  observedFree?: boolean;
}

/** Model id -> credits. */
export type UserPrices = Record<string, number>;

/**
 * Largest user-supplied price, credits per unit (per image, or per request). Choice: no real price comes
 * near it, so a bigger value is a typo (or 1e308, whose products overflow to Infinity); rejected at load.
 */
export const MAX_USER_PRICE = 1e9;

/**
 * The schema of a prices file, built on first use: its message calls toLocaleString, whose first call
 * loads the ICU number formats (~20 ms of every start-up when built at import).
 */
let pricesFileSchema: z.ZodType<UserPrices> | null = null;
function pricesFile(): z.ZodType<UserPrices> {
  if (pricesFileSchema) return pricesFileSchema;
  const priceValue = z
    .number({ error: 'must be a number of credits' })
    .finite({ error: 'must be a finite number of credits' })
    .min(0, { error: 'must be at least 0' })
    .max(MAX_USER_PRICE, { error: `must be at most ${MAX_USER_PRICE.toLocaleString('en-US')} credits per unit` });
  pricesFileSchema = z.record(z.string().min(1), priceValue, {
    error: 'must be a mapping of model id -> credits',
  });
  return pricesFileSchema;
}

/** Why a user-supplied price is unusable (not a finite number from 0 to MAX_USER_PRICE), or null when it is fine. */
function priceProblem(value: unknown): string | null {
  if (typeof value !== 'number' || !Number.isFinite(value)) return `must be a finite number of credits (got ${String(value)})`;
  if (value < 0) return `must be at least 0 (got ${value})`;
  if (value > MAX_USER_PRICE) return `must be at most ${MAX_USER_PRICE.toLocaleString('en-US')} credits per unit (got ${value})`;
  return null;
}

/**
 * Check user-supplied prices from any source (a prices file, a manifest's pricing: block, both merged):
 * a usage error naming every bad model. estimate() runs it; callers may run it earlier with their own label.
 */
export function checkUserPrices(prices: UserPrices | null, label = 'user-supplied prices'): void {
  if (prices === null) return;
  const bad = Object.entries(prices).flatMap(([model, value]) => {
    const problem = priceProblem(value);
    return problem === null ? [] : [`${model}: ${problem}`];
  });
  if (bad.length > 0) throw new UsageError(`${label}: ${bad.join('; ')}`);
}

/** Read a prices file (YAML or JSON): `model id: credits`. A bad file is a usage error naming the entry. */
export async function loadPrices(file: string): Promise<UserPrices> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new UsageError(`--prices: cannot read ${file}`);
  }
  // Loaded on first use: CSV manifests without --prices never load the yaml package.
  const { parse: parseYaml } = await import('yaml');
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch (err) {
    throw new UsageError(`--prices ${file}: not valid YAML or JSON: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
  const parsed = pricesFile().safeParse(raw ?? {});
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.map(String).join('.') || '(file)'}: ${i.message}`);
    throw new UsageError(`--prices ${file}: ${lines.join('; ')}`);
  }
  return parsed.data;
}

/**
 * User-price entries that name no known model: not in the catalogue (submit models, music workflows,
 * catalogued chat models) and not the model of any job priced (`usedModels`, e.g. Object.keys(per_model),
 * which covers uncatalogued `<vendor>/<model>` chat ids). Such an entry is never used: likely a typo.
 */
export function unknownPriceModels(prices: UserPrices | null, usedModels: Iterable<string>): string[] {
  if (prices === null) return [];
  const used = new Set(usedModels);
  return Object.keys(prices).filter((m) => !used.has(m) && findModel(m) === undefined && findChatModel(m) === undefined);
}

/** The stderr warning for an entry unknownPriceModels returns. */
export function unknownPriceWarning(model: string): string {
  return `warning: the user-supplied price for "${model}" names no known model (not in the catalogue, and no job uses it): it is ignored; check the spelling (genbatch models lists the ids)`;
}

/**
 * What pricing reads of a manifest's job (a ManifestJob, src/manifest/job.ts, has all of it). Declared here,
 * not imported: the manifest's schema takes MAX_USER_PRICE from this module, so pricing sits below it.
 */
export interface PricedJob {
  id: string;
  model: string;
  /** `submit` for models and music workflows, `chat` for chat models. */
  kind: 'submit' | 'chat';
  input: Record<string, unknown>;
  /** A for_each job: how many children it makes when that is documented before the parent runs. */
  fanout?: { count: number | null; basis: string };
  /** Empty when the job is valid; an invalid job is not priced. */
  problems: Problem[];
}

/** The price of one (valid) job. */
export function priceJob(job: Pick<PricedJob, 'model' | 'kind' | 'input' | 'fanout'>, userPrices: UserPrices | null, observed: ObservedPrices | null = null): JobPrice {
  // A for_each job: the price of one child times the documented count, or unknown when the count is not known before its parent runs.
  if (job.fanout) {
    const one = priceJob({ model: job.model, kind: job.kind, input: job.input }, userPrices, observed);
    if (one.credits === null) return { ...one, basis: `${one.basis}; for_each: ${job.fanout.basis}` };
    if (job.fanout.count === null) return { credits: null, basis: `for_each: ${job.fanout.basis} (${one.credits} credits each)`, source: 'unknown', unknownCount: true };
    return { credits: round(one.credits * job.fanout.count), basis: `for_each: ${job.fanout.basis}, ${one.basis} each`, source: one.source };
  }
  const spec = job.kind === 'submit' ? findModel(job.model) : undefined;
  let why = job.kind === 'chat' ? 'the service gives no chat prices' : `unknown model ${job.model}`;
  if (spec) {
    const quote = spec.price(job.input);
    if (quote.credits !== null) return { credits: quote.credits, basis: quote.basis, source: 'service' };
    why = quote.basis;
  }
  const user = userPrices && Object.hasOwn(userPrices, job.model) ? userPrices[job.model] : undefined;
  if (user !== undefined) {
    const problem = priceProblem(user);
    if (problem !== null) throw new UsageError(`user-supplied price for ${job.model} ${problem}`);
    const count = spec?.kind === 'image' ? (spec.outputCount?.(job.input) ?? null) : null;
    if (count !== null) {
      return { credits: round(user * count), basis: `user-supplied: ${user} credits per image x ${count}`, source: 'user' };
    }
    return { credits: user, basis: `user-supplied: ${user} credits per request`, source: 'user' };
  }
  const seen = observed?.lookup(job);
  // A learned 0 is free as far as the balance showed, never a confirmed price: the job stays of unknown price
  // (the run asks for --yes, and a cap sends the class's first job alone), marked observedFree.
  if (seen !== undefined && seen.credits === 0) {
    return { credits: null, basis: `${observedLabel(seen)}: 0 credits, not taken as a confirmed price (${why})`, source: 'unknown', observedFree: true };
  }
  if (seen !== undefined) {
    const spread = seen.min === seen.max ? '' : ` (seen ${seen.min} to ${seen.max})`;
    return { credits: seen.credits, basis: `${observedLabel(seen)}: ${seen.credits} credits${spread}`, source: 'observed' };
  }
  return { credits: null, basis: why, source: 'unknown' };
}

export interface ModelTotal {
  jobs: number;
  /** Sum of the known credits; null when no job of the model has a known price (never 0 for unknown). */
  credits: number | null;
  /** Jobs of this model whose price is known (counted in credits). */
  known_jobs: number;
  /** Jobs of this model whose price is unknown (not in credits). */
  unknown_jobs: number;
  /** Of unknown_jobs: for_each jobs whose children have a price but an unknown count. */
  unknown_count_jobs: number;
  /** Jobs priced from user-supplied prices. */
  user_jobs: number;
  /** Jobs priced from prices observed on the account (the price book). */
  observed_jobs: number;
}

export interface JobEstimate {
  id: string;
  model: string;
  credits: number | null;
  source: PriceSource;
  basis: string;
  /** for_each jobs only: the number of children when documented before the parent runs, null when decided at run time. */
  children?: number | null;
}

export interface Estimate {
  jobs_count: number;
  /** Sum of the known prices; unknown prices are not in it. */
  total_credits: number;
  /** Part of total_credits that comes from user-supplied prices. */
  user_supplied_credits: number;
  /** Part of total_credits that comes from prices observed on the account. */
  observed_credits: number;
  /** Ids of the valid jobs whose price is unknown (not for_each jobs of unknown count). */
  unknown_price_jobs: string[];
  /** Ids of for_each jobs whose children have a price but an unknown count (fan-out decided at run time). */
  unknown_count_jobs: string[];
  per_model: Record<string, ModelTotal>;
  /** Per-job prices in order when `keepJobs` is set (else null; memory stays bounded by the model count). */
  jobs: JobEstimate[] | null;
  /** Problems of invalid jobs (not priced). */
  problems: Problem[];
  invalid_jobs: number;
}

export interface EstimateOptions {
  /** Keep the per-job list (needed for --json and the table); default false. */
  keepJobs?: boolean;
  /** Prices observed on the account, used where neither the service nor the user gives one. */
  observed?: ObservedPrices | null;
  /** Called with each priced job, in order (e.g. to print a table as it streams). */
  onJob?: (job: JobEstimate) => void;
}

/** Price every job of a stream, one at a time. Invalid jobs are not priced: their problems are returned. */
export async function estimate(jobs: AsyncIterable<PricedJob> | Iterable<PricedJob>, userPrices: UserPrices | null, opts: EstimateOptions = {}): Promise<Estimate> {
  const out: Estimate = {
    jobs_count: 0,
    total_credits: 0,
    user_supplied_credits: 0,
    observed_credits: 0,
    unknown_price_jobs: [],
    unknown_count_jobs: [],
    per_model: {},
    jobs: opts.keepJobs ? [] : null,
    problems: [],
    invalid_jobs: 0,
  };
  checkUserPrices(userPrices);
  for await (const job of jobs) {
    out.jobs_count++;
    if (job.problems.length > 0) {
      out.invalid_jobs++;
      for (const p of job.problems) out.problems.push(p);
      continue;
    }
    const price = priceJob(job, userPrices, opts.observed ?? null);
    const m = (out.per_model[job.model] ??= { jobs: 0, credits: null, known_jobs: 0, unknown_jobs: 0, unknown_count_jobs: 0, user_jobs: 0, observed_jobs: 0 });
    m.jobs++;
    if (price.credits === null) {
      m.unknown_jobs++;
      (price.unknownCount ? out.unknown_count_jobs : out.unknown_price_jobs).push(job.id);
      if (price.unknownCount) m.unknown_count_jobs++;
    } else {
      m.known_jobs++;
      m.credits = (m.credits ?? 0) + price.credits;
      out.total_credits += price.credits;
      if (price.source === 'user') {
        m.user_jobs++;
        out.user_supplied_credits += price.credits;
      }
      if (price.source === 'observed') {
        m.observed_jobs++;
        out.observed_credits += price.credits;
      }
    }
    const row: JobEstimate = { id: job.id, model: job.model, credits: price.credits, source: price.source, basis: price.basis };
    if (job.fanout) row.children = job.fanout.count;
    out.jobs?.push(row);
    opts.onJob?.(row);
  }
  out.total_credits = round(out.total_credits);
  out.user_supplied_credits = round(out.user_supplied_credits);
  out.observed_credits = round(out.observed_credits);
  for (const m of Object.values(out.per_model)) if (m.credits !== null) m.credits = round(m.credits);
  return out;
}

/** Round away binary noise (14.5 x 3 + ...), keeping up to 6 decimals. */
function round(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
