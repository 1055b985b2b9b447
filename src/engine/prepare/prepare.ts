import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { BudgetError, EXIT, ManifestError, type Problem } from '../../errors.js';
import { localImageRefs, type Manifest, type ManifestJob } from '../../manifest/index.js';
import { valuesAt } from '../../manifest/job.js';
import { findModel } from '../../models/index.js';
import { priceJob, type ObservedPrices } from '../../pricing/index.js';
import type { JobInput, Store } from '../../store/index.js';
import { changedKey, changedRefusal, keptChanged, type ChangedGuard, type ChangedJob } from './changed.js';
import type { EngineEvent } from '../events.js';
import type { Room, Selection } from './select.js';
import { canonicalJson, sha256Hex } from '../results.js';
import { clearKey, manifestPrint, matchingKey, pricesHash, saveKey } from './sync-key.js';
import type { StoredSpec } from '../spec.js';

/**
 * Phase one of a run: read the whole manifest (streamed), check every job,
 * and record the valid ones in the store inside ONE transaction that is
 * committed only when no job has a problem. So an invalid manifest leaves the
 * store as it was, and nothing is uploaded or submitted.
 */
export interface PrepareResult {
  jobs: number;
  new: number;
  changed: number;
  unchanged: number;
  skipped: number;
  recoveredUncertain: string[];
  /** Jobs made from a changed job's results that were in flight (or had for_each children in flight): made again by the next run. */
  rerunLater?: number;
  /** Changed done jobs this sync kept (--keep-changed): their results stay, marked changed-not-sent. */
  keptChanged?: number;
}

/** sha256 of local files, cached per path while size and mtime stay the same. */
class FileHashes {
  private readonly cache = new Map<string, { size: number; mtimeMs: number; sha: string }>();
  get(file: string): string {
    const st = statSync(file);
    const hit = this.cache.get(file);
    if (hit && hit.size === st.size && hit.mtimeMs === st.mtimeMs) return hit.sha;
    const sha = createHash('sha256').update(readFileSync(file)).digest('hex');
    this.cache.set(file, { size: st.size, mtimeMs: st.mtimeMs, sha });
    return sha;
  }
  /** Every file hashed so far, with its sha256. */
  files(): Array<{ file: string; sha256: string }> {
    return [...this.cache].map(([file, h]) => ({ file, sha256: h.sha }));
  }
}

/**
 * `fullSync`: read and check the manifest even when it matches the last sync (the caller needs to know which
 * jobs it names: store.removedInFlight()). `resubmitUncertain`: see Store.beginSync.
 */
export async function prepare(store: Store, manifest: Manifest, userPrices: Record<string, number> | null, emit: (e: EngineEvent) => void, fullSync = false, resubmitUncertain = false, observed: ObservedPrices | null = null, guard: ChangedGuard | null = null): Promise<PrepareResult> {
  const out: PrepareResult = { jobs: 0, new: 0, changed: 0, unchanged: 0, skipped: 0, recoveredUncertain: [] };
  // Read (and hashed) before the jobs are: see sync-key.ts.
  const print = await manifestPrint(manifest.path);
  const prices = pricesHash(userPrices, observed?.digest);
  const known = fullSync ? null : matchingKey(store, print, prices);
  if (known) {
    // Same manifest bytes, local files, prices and genbatch as the last committed sync: every job is unchanged.
    out.jobs = known.jobs;
    out.unchanged = known.jobs;
  } else {
    const hashes = new FileHashes();
    const deferred = await syncAll(store, manifest, userPrices, out, hashes, resubmitUncertain, observed, guard);
    // A job in flight whose spec changed is rerun by a later sync once it is finished: no shortcut until then.
    if (deferred === 0) saveKey(store, print, prices, hashes.files(), out.jobs);
  }
  // State changes the sync made (spec changed, back in the manifest, removed): as job events, before the counts.
  for (const m of store.drainSyncMoves()) emit({ type: 'job', id: m.id, from: m.from, to: m.to, error: m.error });
  out.recoveredUncertain = store.recoverSubmitting();
  if (out.keptChanged)
    emit({ type: 'warning', message: `${out.keptChanged} done job(s) whose spec changed keep their earlier results (--keep-changed: changed-not-sent); --redo changed sends them` });
  if (out.rerunLater)
    emit({ type: 'warning', message: `${out.rerunLater} job(s) made from the results of a changed job are in flight (or their for_each jobs are): they finish what they were sent with, and the next run makes them again` });
  emit({ type: 'synced', jobs: out.jobs, new: out.new, changed: out.changed, unchanged: out.unchanged, skipped: out.skipped, counts: store.counts(), files: store.filesDone(), removed: store.removedIds().size });
  if (out.recoveredUncertain.length > 0) emit({ type: 'recovered', uncertain: out.recoveredUncertain });
  return out;
}

/**
 * Check every job of the manifest and record the valid ones (one transaction), then skip removed jobs.
 * Returns how many jobs in flight have another spec in the manifest (SyncResult `deferred`).
 */
async function syncAll(store: Store, manifest: Manifest, userPrices: Record<string, number> | null, out: PrepareResult, hashes: FileHashes, resubmitUncertain: boolean, observed: ObservedPrices | null, guard: ChangedGuard | null): Promise<number> {
  let deferred = 0;
  // The guard on re-sends (changed.ts): done jobs whose spec changed wait here until their count is known.
  const kept = guard ? keptChanged(store) : {};
  const keptNow: Record<string, string> = {};
  const changedDone: Array<ChangedJob & { input: JobInput }> = [];
  // A job id used twice is a problem of the second job (JobBuilder.takeId): no set of the ids here too.
  const problems: Problem[] = [];
  store.beginSync({ resubmitUncertain });
  // Inside the sync's transaction: a sync that commits never leaves the previous key behind.
  clearKey(store);
  try {
    for await (const job of manifest.jobs()) {
      out.jobs++;
      if (job.problems.length > 0) {
        for (const p of job.problems) problems.push(p);
        continue;
      }
      if (problems.length > 0) continue; // keep checking, stop writing: the transaction is rolled back anyway
      const refs: StoredSpec['refs'] = [];
      let refProblem = false;
      for (const ref of localImageRefs(job)) {
        try {
          refs.push({ path: ref.path, file: ref.file, sha256: hashes.get(ref.file) });
        } catch (err) {
          refProblem = true;
          problems.push({ job: job.id, where: job.where, path: ref.path, message: `cannot read ${ref.file}: ${(err as Error).message}` });
        }
      }
      if (refProblem) continue;
      for (const ref of dataUrlRefs(job)) refs.push(ref);
      if (job.rehost === true) for (const ref of remoteUrlRefs(job)) refs.push(ref);
      const spec: StoredSpec = { model: job.model, input: job.input, refs };
      if (job.callback_url !== undefined) spec.callback_url = job.callback_url;
      if (job.kind === 'chat' && job.protocol !== undefined) spec.protocol = job.protocol;
      // A for_each job is stored as kind `fanout`: its children are made when its list is known.
      if (job.for_each !== undefined) spec.forEach = { expr: job.for_each, childKind: job.kind, childCredits: priceJob({ ...job, fanout: undefined }, userPrices, observed).credits };
      const specJson = canonicalJson(spec);
      const price = priceJob(job, userPrices, observed);
      const kind = job.for_each !== undefined ? 'fanout' : job.kind;
      const input: JobInput = { id: job.id, model: job.model, kind, where: job.where, specHash: sha256Hex(specJson), spec: specJson, estimatedCredits: price.credits };
      const known = guard ? store.stateAndHash(job.id) : undefined;
      if (guard && known?.state === 'done' && known.spec_hash !== input.specHash) {
        if (guard.mode !== 'send' && kept[job.id] === input.specHash) {
          // Kept earlier (--keep-changed) and the manifest still says the same: kept (the sync key is not saved).
          keptNow[job.id] = input.specHash;
          store.keepJob(job.id);
          out.unchanged++;
          deferred++;
        } else changedDone.push({ id: job.id, oldSpec: store.getJob(job.id)?.spec ?? '{}', newSpec: specJson, credits: price.credits, input });
        continue;
      }
      const r = store.syncJob(input);
      if (r === 'new') out.new++;
      else if (r === 'unchanged') out.unchanged++;
      else if (r === 'deferred') {
        out.unchanged++;
        deferred++;
      } else out.changed++;
    }
    if (problems.length > 0 || manifest.problems.length > 0) throw new ManifestError([...manifest.problems, ...problems]);
    if (out.jobs === 0) throw new ManifestError([{ job: null, where: manifest.path, path: 'jobs', message: 'the manifest has no jobs' }]);
    if (guard && changedDone.length > 0) {
      const send = guard.mode === 'send' || (guard.mode === 'ask' && (guard.yes || changedDone.length <= guard.max));
      if (!send && guard.mode === 'ask') throw changedRefusal(changedDone, guard.max);
      for (const c of changedDone) {
        if (send) {
          const r = store.syncJob(c.input);
          if (r === 'unchanged' || r === 'deferred') out.unchanged++;
          else out.changed++;
        } else {
          keptNow[c.id] = c.input.specHash;
          store.keepJob(c.id);
          out.unchanged++;
          deferred++;
        }
      }
    }
    out.keptChanged = Object.keys(keptNow).length;
    if (guard) store.setMeta(changedKey(store.currentRunId), Object.keys(keptNow).length > 0 ? JSON.stringify(keptNow) : null);
    store.graph.setManifestLinks(manifest.links);
    // Jobs made from a changed job's results that are in flight: made again by a later sync (which must read the manifest).
    out.rerunLater = store.graph.drainDeferred();
    deferred += out.rerunLater;
    store.commitSync();
  } catch (err) {
    store.rollbackSync();
    store.graph.drainDeferred();
    throw err;
  }
  out.skipped = store.skipRemoved();
  return deferred;
}

/** Data URLs written in a job's image fields: uploaded through the base64 endpoint before the submit. */
function dataUrlRefs(job: ManifestJob): StoredSpec['refs'] {
  const spec = findModel(job.model);
  const out: StoredSpec['refs'] = [];
  for (const field of spec?.imageFields ?? []) {
    for (const [path, value] of valuesAt(job.input, field, 'input')) {
      if (typeof value === 'string' && /^data:/i.test(value)) out.push({ path, file: '', sha256: sha256Hex(value), data: true });
    }
  }
  return out;
}

/** Remote http(s) URLs in a job's image fields, for a job with `rehost: true`: re-hosted through the URL upload endpoint. */
function remoteUrlRefs(job: ManifestJob): StoredSpec['refs'] {
  const spec = findModel(job.model);
  const out: StoredSpec['refs'] = [];
  for (const field of spec?.imageFields ?? []) {
    for (const [path, value] of valuesAt(job.input, field, 'input')) {
      if (typeof value === 'string' && /^https?:\/\//i.test(value)) out.push({ path, file: '', sha256: sha256Hex(value), remote: true });
    }
  }
  return out;
}

export interface BudgetLimits {
  maxCredits: number | null;
  budget: number | null;
  yes: boolean;
}

/** The caps of one invocation, each with the name the messages give it. */
export interface InvocationCaps {
  /** The run's cap (the tighter of --max-credits and the manifest budget), or null. */
  run: { credits: number; name: string } | null;
  /** --max-credits-per-invocation (or the manifest's budget_per_invocation), or null. */
  invocation: { credits: number; name: string } | null;
}

/** --max-credits-per-invocation, else the manifest's budget_per_invocation (the flag wins, as --max-credits over budget when tighter or not). */
export function invocationCap(flag: number | null, manifest: number | null): { credits: number; name: string } | null {
  if (flag !== null && (manifest === null || flag <= manifest)) return { credits: flag, name: `--max-credits-per-invocation ${flag}` };
  return manifest !== null ? { credits: manifest, name: `the manifest budget_per_invocation of ${manifest}` } : null;
}

/**
 * The rooms the jobs this invocation sends must fit in, by their known estimate (selectPending): the run's cap
 * less the estimate of the manifest's jobs not pending (done, in flight: the run's total stays under it), the
 * per-invocation cap (only the jobs sent now count), and the balance. Emits a `held` event naming each bound
 * the whole of tonight's work breaks, in the words of the old refusal plus what is sent instead.
 */
export function invocationRooms(store: Store, caps: InvocationCaps, balance: number | null, sel: Selection | null): Room[] {
  const { pending, total } = toSend(store, sel);
  const rooms: Room[] = [];
  if (caps.run) rooms.push({ credits: round6(caps.run.credits - (total - pending.known)), kind: 'cap', reason: `over ${caps.run.name}` });
  if (caps.invocation) rooms.push({ credits: caps.invocation.credits, kind: 'cap', reason: `over ${caps.invocation.name}` });
  if (balance !== null) rooms.push({ credits: balance, kind: 'balance', reason: `over the balance of ${fmt(balance)} credits` });
  return rooms;
}

/** Why tonight's work does not fit, in the words the refusal used: `the known estimate of 160 credits exceeds --max-credits 100`. */
export function overText(store: Store, caps: InvocationCaps, balance: number | null, sel: Selection | null): string[] {
  const { pending, total } = toSend(store, sel);
  const out: string[] = [];
  if (caps.run && total > caps.run.credits + 1e-9) out.push(`the known estimate of ${fmt(round6(total))} credits exceeds ${caps.run.name}`);
  if (caps.invocation && pending.known > caps.invocation.credits + 1e-9) out.push(`the known estimate of ${fmt(round6(pending.known))} credits for the jobs of this invocation exceeds ${caps.invocation.name}`);
  if (balance !== null && pending.known > balance + 1e-9) out.push(`the known estimate of ${fmt(round6(pending.known))} credits for the jobs left to run exceeds the balance of ${fmt(balance)} credits`);
  return out;
}

/** The unknown-price part of checkLimits alone: jobs to send with no known price need --yes (BudgetError, exit 3). */
export function checkPrices(store: Store, yes: boolean, sel: Selection | null = null): void {
  checkLimits(store, { maxCredits: null, budget: null, yes }, sel);
}

/**
 * The known estimate of the jobs this run sends (pending: all of them, or those --only/--limit chose),
 * and of the manifest without the pending jobs this run leaves for a later one.
 */
function toSend(store: Store, sel: Selection | null): { jobs: number; pending: { known: number; unknown: number }; total: number } {
  if (sel === null) return { jobs: store.counts().pending, pending: store.pendingEstimate(), total: store.estimate().known };
  return { jobs: sel.ids.size, pending: sel.estimate, total: store.estimate().known - sel.leftOut.known };
}

/**
 * Refuse (BudgetError: exit 5 over a cap, 3 for unknown prices) before anything is spent when the known
 * estimate of the manifest exceeds --max-credits or the manifest budget, or
 * when jobs left to run have no known price and --yes was not given. With a
 * selection (--only, --limit), the pending jobs it leaves for a later run are
 * not counted. Needs no
 * network; the balance is checked after (checkBalance).
 */
export function checkLimits(store: Store, c: BudgetLimits, sel: Selection | null = null): void {
  const { jobs, pending, total: known } = toSend(store, sel);
  if (jobs === 0) return; // nothing will be spent
  const total = { known };
  if (c.maxCredits !== null && total.known > c.maxCredits) {
    throw new BudgetError(`the known estimate of ${fmt(total.known)} credits exceeds --max-credits ${fmt(c.maxCredits)}`, EXIT.capReached);
  }
  if (c.budget !== null && total.known > c.budget) {
    throw new BudgetError(`the known estimate of ${fmt(total.known)} credits exceeds the manifest budget of ${fmt(c.budget)}`, EXIT.capReached);
  }
  if (pending.unknown > 0 && !c.yes) {
    const u = unknownJobs(store, 10, sel);
    const list = (ids: string[], n: number) => ids.join(', ') + (n > ids.length ? `, and ${n - ids.length} more` : '');
    const parts: string[] = [];
    if (u.priceCount > 0) parts.push(`${u.priceCount} job(s) have no known price (${list(u.price, u.priceCount)}); the service gives no price for their model: give prices with --prices`);
    if (u.countCount > 0) parts.push(`${u.countCount} for_each job(s) have an unknown count (fan-out decided at run time: ${list(u.count, u.countCount)}); their children are checked against --max-credits and the budget when they are made`);
    throw new BudgetError(`${parts.join('; ')}. Pass --yes to run them anyway`);
  }
}

/** Refuse when the known estimate of the jobs left to run exceeds the balance; emits the estimate event. */
export function checkBalance(store: Store, balance: number | null, emit: (e: EngineEvent) => void, sel: Selection | null = null): void {
  const { pending } = emitEstimate(store, balance, emit, sel);
  if (balance !== null && pending.known > balance) {
    throw new BudgetError(`the known estimate of ${fmt(pending.known)} credits for the jobs left to run exceeds the balance of ${fmt(balance)} credits`);
  }
}

/** The estimate event of the jobs this invocation sends (all pending jobs, or the selection). */
export function emitEstimate(store: Store, balance: number | null, emit: (e: EngineEvent) => void, sel: Selection | null = null): ReturnType<typeof toSend> {
  const t = toSend(store, sel);
  // The pending rows are read only when some have no estimate (pendingEstimate counts exactly those).
  const u = t.pending.unknown > 0 ? unknownJobs(store, 1000, sel) : { price: [], count: [] };
  emit({ type: 'estimate', pending_credits: round6(t.pending.known), total_credits: round6(t.total), unknown_price_jobs: u.price, unknown_count_jobs: u.count, balance });
  return t;
}

/**
 * Pending jobs without a known estimate, apart: `price` (no price for the model)
 * and `count` (for_each jobs whose children are priced but counted only at run time).
 * At most `max` ids of each; the counts are complete. With a selection (--only, --limit): only the jobs chosen.
 */
function unknownJobs(store: Store, max: number, sel: Selection | null): { price: string[]; count: string[]; priceCount: number; countCount: number } {
  const out = { price: [] as string[], count: [] as string[], priceCount: 0, countCount: 0 };
  for (const row of store.jobsIn('pending')) {
    if (row.estimated_credits !== null || (sel !== null && !sel.ids.has(row.id))) continue;
    const fe = row.kind === 'fanout' ? (JSON.parse(row.spec) as StoredSpec).forEach : undefined;
    if (fe && fe.childCredits !== null) {
      out.countCount++;
      if (out.count.length < max) out.count.push(row.id);
    } else {
      out.priceCount++;
      if (out.price.length < max) out.price.push(row.id);
    }
  }
  return out;
}

/** Sums of stored estimates without binary noise (0.2 x 3 is 0.6, not 0.6000000000000001). */
function round6(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}

const fmt = (n: number): string => (Number.isInteger(n) ? String(n) : n.toFixed(2));
