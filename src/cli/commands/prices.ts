import { ChatClient, ServiceClient, serviceConfigFromEnv } from '../../client/index.js';
import { planProbes, probeOne, recordProbe, type ProbePlanEntry } from '../../engine/index.js';
import { EXIT, UsageError } from '../../errors.js';
import { openManifest } from '../../manifest/index.js';
import { checkUserPrices, defaultBookPath, FreeClasses, loadPriceFile, NEVER_MOVED, observedLabel, observedPrices, PriceBook, serviceName } from '../../pricing/index.js';
import { write, writeProblems } from './validate.js';

/**
 * `genbatch prices probe|list|forget`: prices the service does not publish, measured on the account
 * (src/engine/tools/probe.ts, src/pricing/probe.ts) and kept in the price book (src/pricing/book.ts).
 */

interface BookFlags {
  /** A price book file instead of the default one (GENBATCH_PRICE_BOOK, ~/.config/genbatch/prices.json). */
  prices?: string;
  baseUrl?: string;
  json?: boolean;
}

interface ProbeFlags extends BookFlags {
  yes?: boolean;
  maxCredits?: number;
  timeScale?: number;
}

/** The book and where it is saved: a --prices file holding a book, else the default book. */
async function openBook(flags: BookFlags): Promise<PriceBook> {
  if (flags.prices === undefined) return PriceBook.load(defaultBookPath());
  const file = await loadPriceFile(flags.prices).catch(() => ({ user: null, book: PriceBook.load(flags.prices!) }));
  if (file.book === null) throw new UsageError(`--prices ${flags.prices}: holds user prices (model id -> credits), not a price book; prices probe keeps what it measures in a price book (leave --prices out for the default one, or name a new file)`);
  return file.book;
}

export async function probeCommand(manifestPath: string, flags: ProbeFlags): Promise<number> {
  const config = serviceConfigFromEnv(flags.baseUrl !== undefined ? { baseUrl: flags.baseUrl } : {});
  const book = await openBook(flags);
  const manifest = await openManifest(manifestPath);
  checkUserPrices(manifest.pricing, `${manifestPath}: pricing`);
  const plan = await planProbes(manifest, manifest.pricing, observedPrices(book, config.baseUrl));
  if (plan.problems.length > 0) {
    await writeProblems(plan.problems);
    return EXIT.usage;
  }
  const out: string[] = [];
  const n = plan.classes.length;
  out.push(`${manifestPath}: ${plan.jobs} jobs; ${n} price class${n === 1 ? '' : 'es'} of unknown price to probe at ${serviceName(config.baseUrl)}, one task each, run alone:`);
  for (const c of plan.classes) out.push(`  ${c.cls.label}: job ${c.job.id} (${c.jobs} job${c.jobs === 1 ? '' : 's'} of the manifest)`);
  for (const c of plan.notAlone) out.push(`  not probed: ${c.cls.label} (${c.jobs} job${c.jobs === 1 ? '' : 's'}): its input is made from other jobs' results, so no job of it runs alone`);
  const bound = flags.maxCredits !== undefined ? `at most about ${flags.maxCredits} credits (--max-credits: no probe starts once that much is spent)` : 'each probe costs what one job of its class costs, unknown until measured; --max-credits N bounds the total';
  out.push(`cost: ${bound}`);
  out.push(`price book: ${book.path}`);
  await write(process.stderr, out.join('\n') + '\n');
  if (n === 0) {
    await write(process.stderr, 'nothing to probe: every job has a known price\n');
    return EXIT.ok;
  }
  if (!flags.yes) {
    await write(process.stderr, 'nothing was sent: add --yes to run these probes\n');
    return EXIT.budget;
  }

  const timeScale = flags.timeScale ?? 1;
  const policy = { baseMs: 1000 * timeScale, maxMs: Math.max(50, 60_000 * timeScale), maxAttempts: 6, jitter: 'full' as const };
  const client = new ServiceClient({ ...config, policy });
  const chat = new ChatClient({ ...config, policy });
  const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
  const uploaded = new Map<string, string>();
  let spent = 0;
  let measured = 0;
  let unmeasured = 0;
  const results: ProbeResult[] = [];
  const free = new FreeClasses<{ entry: ProbePlanEntry; result: ProbeResult }>();
  const keep = async (entry: ProbePlanEntry, credits: number, refunded = 0): Promise<void> => {
    measured++;
    recordProbe(book, config.baseUrl, entry, credits, new Date().toISOString());
    const e = book.lookup(config.baseUrl, entry.cls.key)!;
    const refund = refunded > 0 ? `; ${refunded} refunded at its end for outputs it did not deliver, not taken off the price` : '';
    await write(process.stderr, `${line(entry)}: ${credits} credits (${observedLabel(e)}${refund})${credits === 0 ? '; a price of 0 is never taken as confirmed: its jobs still need --yes' : ''}\n`);
  };
  try {
    for (const entry of plan.classes) {
      if (flags.maxCredits !== undefined && spent >= flags.maxCredits) {
        await write(process.stderr, `stopped: ${spent} credits spent reaches --max-credits ${flags.maxCredits}; ${plan.classes.length - results.length} class(es) not probed\n`);
        break;
      }
      const r = await probeOne(entry, { client, chat, timeScale, sleep }, uploaded);
      const first = r.readings[0];
      const last = r.readings[r.readings.length - 1];
      const moved = first !== undefined && last !== undefined ? first - last : 0;
      spent += Number.isFinite(moved) ? Math.max(0, moved) : 0;
      const result: ProbeResult = { class: entry.cls.key, job: entry.job.id, outcome: r.kind, credits: r.kind === 'measured' ? r.credits : null, refunded: r.kind === 'measured' ? (r.refunded ?? 0) : null, why: r.kind === 'measured' ? null : r.why, task_id: r.taskId };
      results.push(result);
      if (r.kind !== 'measured') {
        unmeasured++;
        await write(process.stderr, `${line(entry)}: not recorded: ${r.why}\n`);
      } else if (free.measured({ entry, result }, r.credits)) {
        await write(process.stderr, `${line(entry)}: the balance did not move for it (0 credits): recorded as free only if it moves for another class of this probe\n`);
      } else await keep(entry, r.credits, r.refunded);
    }
    const { record, refuse } = free.settle();
    for (const f of record) await keep(f.entry, 0);
    for (const f of refuse) {
      unmeasured++;
      Object.assign(f.result, { outcome: 'unmoved', credits: null, why: NEVER_MOVED });
      await write(process.stderr, `${line(f.entry)}: not recorded: ${NEVER_MOVED}\n`);
    }
  } finally {
    await client.close();
    await chat.close();
  }
  if (flags.json) await write(process.stdout, JSON.stringify({ book: book.path, service: serviceName(config.baseUrl), measured, unmeasured, spent: Math.round(spent * 1e6) / 1e6, probes: results }) + '\n');
  await write(process.stderr, `probed ${measured + unmeasured} class(es): ${measured} measured and kept in ${book.path}${unmeasured > 0 ? `, ${unmeasured} not recorded` : ''}\n`);
  if (unmeasured > 0) return EXIT.jobsFailed;
  // Stopped by --max-credits with classes not probed: the cap's code.
  return results.length < plan.classes.length ? EXIT.capReached : EXIT.ok;
}

/** One probe in `--json`: outcome measured, failed, unreliable, refused (a reading or charge that cannot be true), or unmoved (0 credits, the balance never moved). */
interface ProbeResult {
  class: string;
  job: string;
  outcome: string;
  credits: number | null;
  /** Credits given back at the task's end (outputs not delivered): not taken off `credits`. */
  refunded: number | null;
  why: string | null;
  task_id: string | null;
}

function line(entry: ProbePlanEntry): string {
  return `${entry.cls.label} (job ${entry.job.id})`;
}

export async function listCommand(flags: BookFlags): Promise<number> {
  const book = await openBook(flags);
  const entries = book.entries(flags.baseUrl);
  if (flags.json) {
    await write(process.stdout, JSON.stringify({ book: book.path, prices: entries.map((e) => ({ service: e.service, class: e.key, ...e.entry })) }) + '\n');
    return EXIT.ok;
  }
  if (entries.length === 0) {
    await write(process.stdout, `no observed prices in ${book.path}${flags.baseUrl ? ` for ${serviceName(flags.baseUrl)}` : ''} (genbatch prices probe <manifest> measures them)\n`);
    return EXIT.ok;
  }
  const lines = [`observed prices in ${book.path}:`];
  let service = '';
  for (const e of entries) {
    if (e.service !== service) lines.push(`${(service = e.service)}`);
    const spread = e.entry.min === e.entry.max ? '' : `, seen ${e.entry.min} to ${e.entry.max}`;
    lines.push(`  ${e.entry.label}: ${e.entry.credits} credits (${observedLabel(e.entry)}, first ${e.entry.first.slice(0, 10)}${spread})`);
  }
  await write(process.stdout, lines.join('\n') + '\n');
  return EXIT.ok;
}

export async function forgetCommand(models: string[], flags: BookFlags & { all?: boolean }): Promise<number> {
  if (models.length === 0 && !flags.all && flags.baseUrl === undefined) throw new UsageError('prices forget: name the models to forget, --base-url URL (that service), or --all');
  const book = await openBook(flags);
  const n = book.forget(flags.baseUrl, models);
  book.save();
  await write(process.stdout, `forgot ${n} observed price${n === 1 ? '' : 's'} (${book.path})\n`);
  return EXIT.ok;
}
