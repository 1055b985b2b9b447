import { estimateManifest, type EstimateResult } from '../../api/estimate.js';
import { serviceConfigFromEnv, type ServiceConfig } from '../../client/index.js';
import { EXIT, UsageError } from '../../errors.js';
import { unknownPriceWarning, type JobEstimate } from '../../pricing/index.js';
import { write, writeProblems } from './validate.js';
import { confineWanted } from '../confine.js';
import { formatDuration } from '../../report/format.js';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defaultOutDir, defaultStateBeside } from '../../api/paths.js';
import { changedCost } from '../../engine/prepare/changed.js';
import type { StatePlan } from '../../engine/prepare/plan-types.js';
import { isPostgresUrl, stateOption } from '../../store/location.js';
import { isS3Url } from '../../storage/url.js';

/**
 * `genbatch estimate <manifest> [--json] [--offline] [--prices FILE] [--base-url URL] [--max-credits N]`.
 * Credits per job, per model and in total; unknown prices listed apart, never
 * counted as 0; user-supplied prices labelled. Online, compares with the
 * balance. Exit 2 for an invalid manifest (problems on stderr, as validate),
 * 3 when the known total exceeds the balance, 5 when it exceeds the manifest's budget or --max-credits, else 0.
 * With a state of earlier runs (--state, --out, or the run's default state): what the next run keeps, sends
 * again and sends (src/engine/prepare/plan.ts), and the run's code: 4 when the guard on re-sends would stop it, 3 or 5
 * when jobs would be held for the balance or a cap.
 * The work is src/api/estimate.ts (the library's estimate()); this prints it.
 */

interface Options {
  json?: boolean;
  offline?: boolean;
  prices?: string;
  baseUrl?: string;
  confine?: boolean;
  maxCredits?: number;
  maxCreditsPerInvocation?: number;
  state?: string;
  out?: string;
  maxChanged?: number;
}

/** Per-job rows shown in the human table; --json lists every job. */
const TABLE_ROWS = 100;
const UNKNOWN_IDS_SHOWN = 20;

export default async function estimateCommand(manifestPath: string, opts: Options): Promise<number> {
  const config: ServiceConfig | null = opts.offline ? null : configOrHint(opts.baseUrl);
  const service = opts.baseUrl ?? process.env.GENBATCH_BASE_URL;
  const shown: JobEstimate[] = [];
  const statePath = stateToCompare(manifestPath, opts);
  const out = await estimateManifest(manifestPath, config, {
    ...(opts.prices !== undefined ? { prices: opts.prices } : {}),
    keepJobs: opts.json === true,
    ...(service ? { service } : {}),
    confine: confineWanted(opts.confine),
    ...(opts.maxCredits !== undefined ? { maxCredits: opts.maxCredits } : {}),
    ...(opts.maxCreditsPerInvocation !== undefined ? { maxCreditsPerInvocation: opts.maxCreditsPerInvocation } : {}),
    ...(opts.maxChanged !== undefined ? { maxChanged: opts.maxChanged } : {}),
    ...(statePath !== null ? { state: statePath } : {}),
    onJob: (j) => {
      if (!opts.json && shown.length < TABLE_ROWS) shown.push(j);
    },
  });
  if (out.estimate === null) {
    await writeProblems(out.problems);
    return EXIT.usage;
  }
  const est = out.estimate;
  for (const m of est.user_prices_unknown_models) await write(process.stderr, `genbatch: ${unknownPriceWarning(m)}\n`);
  if (opts.json) await write(process.stdout, JSON.stringify(est) + '\n');
  else await write(process.stdout, humanReport(manifestPath, est, shown));
  const overCap = est.cap !== null && est.total_credits > est.cap.credits;
  // The run's codes (README "Exit codes"): stopped by the guard on re-sends 4 (a run stops there first), over
  // the balance 3, else over a cap (--max-credits, the budget) 5.
  // With a state, the plan says what the next run sends: jobs held for the balance 3, for a cap 5.
  if (est.state?.changed?.stops) return EXIT.incomplete;
  if (est.state) return est.state.sends.held_by.balance > 0 ? EXIT.budget : est.state.sends.held_by.cap > 0 ? EXIT.capReached : EXIT.ok;
  if (est.affordable === false) return EXIT.budget;
  return est.within_budget === false || overCap ? EXIT.capReached : EXIT.ok;
}

function humanReport(path: string, est: EstimateResult, shown: JobEstimate[]): string {
  const { balance, budget, user_prices_unused: unusedUserPrices } = est;
  const out: string[] = [];
  const plural = (n: number, w: string) => `${n} ${w}${n === 1 ? '' : 's'}`;
  out.push(`${path}: ${plural(est.jobs_count, 'job')}`, '');
  const idW = Math.max(3, ...shown.map((j) => j.id.length));
  const modelW = Math.max(5, ...shown.map((j) => j.model.length));
  out.push(`${'job'.padEnd(idW)}  ${'model'.padEnd(modelW)}  ${'credits'.padStart(8)}  ${'source'.padEnd(9)}  basis`);
  for (const j of shown) {
    out.push(`${j.id.padEnd(idW)}  ${j.model.padEnd(modelW)}  ${(j.credits === null ? 'unknown' : String(j.credits)).padStart(8)}  ${SOURCE_WORD[j.source].padEnd(9)}  ${j.basis}`);
  }
  if (est.jobs_count > shown.length) out.push(`... ${plural(est.jobs_count - shown.length, 'more job')} (estimate --json lists every job)`);
  out.push('');

  const models = Object.entries(est.per_model);
  const mW = Math.max(9, ...models.map(([m]) => m.length));
  out.push(`${'per model'.padEnd(mW)}  ${'jobs'.padStart(7)}  ${'credits'.padStart(10)}`);
  for (const [m, t] of models) {
    const notes: string[] = [];
    if (t.user_jobs > 0) notes.push(`${t.user_jobs === t.jobs ? 'all' : t.user_jobs} at user-supplied prices`);
    if (t.observed_jobs > 0) notes.push(`${t.observed_jobs === t.jobs ? 'all' : t.observed_jobs} at prices observed on the account`);
    if (t.unknown_jobs > t.unknown_count_jobs) notes.push(`${t.unknown_jobs - t.unknown_count_jobs} with unknown price, not counted`);
    if (t.unknown_count_jobs > 0) notes.push(`${t.unknown_count_jobs} for_each with unknown count, not counted`);
    const credits = t.unknown_jobs === t.jobs ? 'unknown' : String(t.credits);
    out.push(`${m.padEnd(mW)}  ${String(t.jobs).padStart(7)}  ${credits.padStart(10)}${notes.length > 0 ? `  (${notes.join('; ')})` : ''}`);
  }
  out.push('');

  if (est.unknown_price_jobs.length > 0) {
    const ids = est.unknown_price_jobs.slice(0, UNKNOWN_IDS_SHOWN).join(', ');
    const more = est.unknown_price_jobs.length > UNKNOWN_IDS_SHOWN ? `, and ${est.unknown_price_jobs.length - UNKNOWN_IDS_SHOWN} more` : '';
    out.push(`unknown price (not counted in the total; give prices with --prices FILE or a pricing: block): ${plural(est.unknown_price_jobs.length, 'job')}: ${ids}${more}`);
  }
  if (est.unknown_count_jobs.length > 0) {
    const ids = est.unknown_count_jobs.slice(0, UNKNOWN_IDS_SHOWN).join(', ');
    const more = est.unknown_count_jobs.length > UNKNOWN_IDS_SHOWN ? `, and ${est.unknown_count_jobs.length - UNKNOWN_IDS_SHOWN} more` : '';
    out.push(`unknown count (fan-out decided at run time; each child has a price, not counted in the total; run checks the children against --max-credits and the budget when they are made): ${plural(est.unknown_count_jobs.length, 'for_each job')}: ${ids}${more}`);
  }
  for (const m of unusedUserPrices) out.push(`note: the user-supplied price for ${m} is not used: the service prices these jobs`);
  const parts = [est.user_supplied_credits > 0 ? `${est.user_supplied_credits} of them from user-supplied prices` : '', est.observed_credits > 0 ? `${est.observed_credits} from prices observed on the account` : ''].filter(Boolean);
  const userPart = parts.length > 0 ? ` (${parts.join(', ')})` : '';
  const known = est.jobs_count - est.unknown_price_jobs.length - est.unknown_count_jobs.length;
  out.push(`total: ${est.total_credits} credits${userPart} for ${plural(known, 'job')} with a known price`);
  if (balance === null) out.push('balance: not checked (--offline)');
  else {
    const caveat = est.unknown_price_jobs.length + est.unknown_count_jobs.length > 0 ? ' for the known part' : '';
    out.push(est.total_credits > balance ? `balance: ${balance} credits: NOT affordable, ${round(est.total_credits - balance)} credits short` : `balance: ${balance} credits: affordable${caveat}`);
  }
  if (budget !== null) {
    out.push(est.total_credits > budget ? `budget: ${budget} credits: OVER budget by ${round(est.total_credits - budget)} credits` : `budget: ${budget} credits: within budget`);
  }
  if (est.local_images > 5) {
    out.push(`uploads: ${est.local_images} local images: the uploads alone take up to ${formatDuration(est.upload_seconds)} (the service takes 5 a minute; an image uploaded in the last 66 hours is reused)`);
  }
  if (est.cap !== null) {
    const over = est.total_credits > est.cap.credits ? `: the estimate is OVER it by ${round(est.total_credits - est.cap.credits)} credits (run refuses)` : '';
    out.push(`cap: ${est.cap.credits} credits (${est.cap.name}): a run is charged at most that plus one task per process, measured by the balance${over}`);
  }
  const u = est.unconfirmed_price_jobs;
  out.push(`${plural(u, 'job')} ${u === 1 ? 'has' : 'have'} no price confirmed by a charge on this account${u > 0 ? ' (under a cap the first job of each price class is sent alone and its charge read)' : ''}`);
  if (est.state !== null) out.push('', ...stateLines(est.state, plural));
  return out.join('\n') + '\n';
}

/** What the next run would do with the state of the earlier ones (see src/engine/prepare/plan.ts). */
function stateLines(p: StatePlan, plural: (n: number, w: string) => string): string[] {
  const out = [`against the state ${p.state}:`, `  kept: ${plural(p.done, 'done job')} (not sent again)`];
  const c = p.changed;
  if (c !== null) {
    const cost = changedCost(c);
    if (c.stops) {
      out.push(`  changed: ${plural(c.count, 'done job')} whose spec changed would be sent again, ${cost}; more than --max-changed ${c.max}: a run stops before sending anything (exit 4); --redo changed (or --yes) sends them, --keep-changed keeps their results`);
    } else out.push(`  changed: ${plural(c.count, 'done job')} whose spec changed ${c.count === 1 ? 'is' : 'are'} sent again, ${cost} (within --max-changed ${c.max})`);
    for (const e of c.examples) out.push(`    ${e.id}: ${e.diff}`);
    if (c.count > c.examples.length) out.push(`    and ${c.count - c.examples.length} more`);
  }
  const unknown = p.pending.unknown > 0 ? ` (+${p.pending.unknown} of unknown price)` : '';
  out.push(`  pending: ${plural(p.pending.jobs, 'job')}, ${p.pending.credits} credits${unknown}${c?.stops ? ' (with --keep-changed)' : ''}`);
  const held = Object.entries(p.sends.held).map(([why, n]) => `${n} held ${why}`);
  out.push(`  ${c?.stops ? 'with --keep-changed, ' : ''}the next run sends ${plural(p.sends.jobs, 'job')}, ${p.sends.credits} credits${held.length > 0 ? `; ${held.join('; ')}` : ''}`);
  const other = Object.entries(p.other).map(([s, n]) => `${n} ${s}`);
  if (other.length > 0) out.push(`  not sent by a plain run: ${other.join(', ')}`);
  return out;
}

/**
 * The state to compare with: --state (else $GENBATCH_STATE), --out's state.db, else the run's default state when
 * it exists (not a --sandbox run's: an estimate is for a run against the service). Named but missing: a usage error.
 */
function stateToCompare(manifest: string, opts: Options): string | null {
  const named = stateOption(opts.state);
  if (named !== undefined) {
    if (isPostgresUrl(named)) throw new UsageError('estimate compares with a SQLite state file only; a PostgreSQL state is not read here (genbatch status --state URL shows its jobs)');
    if (!existsSync(named)) throw new UsageError(`no state file at ${resolve(named)} (${opts.state !== undefined ? '--state' : 'GENBATCH_STATE'})`);
    return resolve(named);
  }
  if (opts.out !== undefined) {
    const p = isS3Url(opts.out) ? defaultStateBeside(manifest) : join(opts.out, 'state.db');
    if (!existsSync(p)) throw new UsageError(`no state file at ${resolve(p)} (--out ${opts.out})`);
    return resolve(p);
  }
  return [join(defaultOutDir(manifest), 'state.db'), defaultStateBeside(manifest)].find((p) => existsSync(p)) ?? null;
}

/** How a job's price source is shown in the table. */
const SOURCE_WORD: Readonly<Record<JobEstimate['source'], string>> = { service: 'published', user: 'yours', observed: 'observed', unknown: 'unknown' };


function configOrHint(baseUrl: string | undefined): ServiceConfig {
  try {
    return serviceConfigFromEnv(baseUrl === undefined ? {} : { baseUrl });
  } catch (err) {
    if (err instanceof UsageError) throw new UsageError(`${err.message} (estimate reads the balance; --offline skips it)`);
    throw err;
  }
}

function round(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}
