import { existsSync, rmdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { BudgetError, EXIT, ManifestError } from '../errors.js';
import { openManifest } from '../manifest/index.js';
import type { ObservedPrices } from '../pricing/index.js';
import type { ReportData } from '../report/types.js';
import { SqliteWorkStore, Store, nowIso, type JobState } from '../store/index.js';
import type { EngineEvent, EventBus } from './events.js';
import type { CallbackNote, CallbackReceiver } from './pipeline/receiver.js';
import { CreditCap, LocalLedger } from './pipeline/cap.js';
import type { CreditLimit } from './submit/graph.js';
import { Pipeline, callbackDeadline, errorText } from './pipeline/pipeline.js';
import { checkSameOutput } from './prepare/same-output.js';
import { checkSameService, parseServiceMark, serviceMetaKey, type ServiceMark } from './prepare/same-service.js';
import { moveAsidePrevious, ownResultRecord } from './prepare/previous.js';
import { RESULT_FILE } from './results.js';
import { checkJobFolders } from './files.js';
import { bucketJournal } from './fetch/fetch-bucket.js';
import type { DownloadPort, ServicePort, UploadJournal } from './ports.js';
import { checkPrices, emitEstimate, invocationCap, invocationRooms, overText, prepare, type InvocationCaps } from './prepare/prepare.js';
import { notDone } from './summary.js';
import { buildReportData, capMetaKey, refusalMetaKey, round6, runCredits, type CapNote, type RefusalNote } from './finish/report-data.js';
import { DEFAULT_MAX_CHANGED, type ChangedGuard } from './prepare/changed.js';
import { resubmitAged } from './prepare/uncertain.js';
import { exitCodeFor } from './finish/exit-code.js';
import { onlyMatcher, redoJobs, selectPending, type RedoState, type Selection } from './prepare/select.js';

/**
 * A whole run: lease the state file, check and record the manifest, refuse
 * over budget, then submit, wait and download (Pipeline), then write the
 * reports. Returns the exit code; throws GenbatchError before anything is
 * spent (invalid manifest: 2, budget: 3, state file busy: 2).
 */
export interface RunOptions {
  manifestPath: string;
  outDir: string;
  statePath: string;
  service: ServicePort;
  download: DownloadPort;
  baseUrl: string;
  sandbox: boolean;
  /** The service and key fingerprint this run is against (src/engine/prepare/same-service.ts): a state made against another is refused. */
  serviceMark?: ServiceMark;
  /** Submits in flight at once (downloads: twice as many). */
  concurrency: number;
  /** Tasks waited on at once (default 50 x concurrency, at least 500). */
  maxActive?: number;
  yes: boolean;
  maxCredits: number | null;
  /** --max-credits-per-invocation: what this invocation may be charged (beside the run's cap); null or absent: no such cap. */
  maxCreditsPerInvocation?: number | null;
  uncertain: 'skip' | 'resubmit';
  /** --uncertain resubmit-after=DURATION: an uncertain job is sent again once uncertain this long (ms); null or absent: never by age. */
  uncertainAfterMs?: number | null;
  /** Multiplies every wait (1 against the real service). */
  timeScale: number;
  /** Status reads per second of the service's time, at most (default 10); the runner reads up to statusRate / timeScale per second. */
  statusRate?: number;
  /**
   * Completion callbacks: start a receiver on `listen`; the service is given
   * `publicUrl` (or, when null, http://<listen address>) plus this run's token
   * and the job id. Null: polling only.
   */
  callbacks: { publicUrl: string | null; listen: string; redact?: (value: unknown) => unknown } | null;
  userPrices: Record<string, number> | null;
  /** Prices observed on the account (the price book), used where neither the service nor the user gives one. */
  observedPrices?: ObservedPrices | null;
  /** --redo: jobs that ended in these states are sent again (src/engine/prepare/select.ts). */
  redo?: readonly RedoState[];
  /** The guard on mass re-sends (src/engine/prepare/changed.ts): --max-changed (null: 10) and --keep-changed. */
  changed?: { max: number | null; keep: boolean };
  /** --only: id patterns (globs) of the jobs to send; null or absent: every pending job. */
  only?: readonly string[] | null;
  /** --limit: send at most this many pending jobs; null or absent: no limit. */
  limit?: number | null;
  /** `--confine`: the manifest may name only files inside its folder (see openManifest). */
  confine?: boolean;
  signal: AbortSignal;
  events: EventBus;
  /** `journal`: with results in a bucket, where a large report's multipart upload is recorded (the state file). */
  writeReports: (outDir: string, data: ReportData, journal?: UploadJournal) => Promise<unknown> | unknown;
}

export interface RunOutcome {
  exitCode: number;
  counts: Record<JobState, number>;
  statusRequests: number;
}

/** Meta key of the callback path token (secret: never printed, logged or reported; only inside callback URLs). */
const CALLBACK_TOKEN_KEY = 'callback_token';

/** Meta key prefix (one key per run): set while the run's reports may not show its state (see runEngine). */
const REPORTS_STALE_KEY = 'reports_stale';

/** Status reads per second (of the service's time) when --status-rate is not given. */
export const DEFAULT_STATUS_RATE = 10;

/** Uploaded files live 72 h at the service; reuse them while younger than 66 h. */
export const UPLOAD_REUSE_MS = 66 * 3600 * 1000;

export async function runEngine(o: RunOptions): Promise<RunOutcome> {
  const t0 = Date.now();
  const emit = o.events.emit;
  if (!existsSync(o.manifestPath)) throw new ManifestError([{ job: null, where: o.manifestPath, path: '', message: 'manifest file not found' }]);
  const manifest = await openManifest(o.manifestPath, { confine: o.confine === true });
  // An invalid manifest (exit 2) leaves no state file behind when this run is the one that made it.
  const madeDirs: string[] = [];
  for (let d = dirname(resolve(o.statePath)); !existsSync(d) && dirname(d) !== d; d = dirname(d)) madeDirs.push(d);
  const madeState = !existsSync(o.statePath);
  const store = Store.openForWrite(o.statePath);
  let invalid = false;
  let reportsKey: string | null = null;
  let reportsStale = false;
  let receiver: CallbackReceiver | null = null;
  let callbackUrlFor: ((jobId: string, attempt: number) => string) | null = null;
  let pipeline: Pipeline | null = null;
  const early: CallbackNote[] = [];
  try {
    emit({ type: 'start', manifest: o.manifestPath, out_dir: o.outDir, state: o.statePath, base_url: o.baseUrl, sandbox: o.sandbox });
    if (store.leaseTakenOverFrom) emit({ type: 'lease-takeover', from: store.leaseTakenOverFrom });
    const userPrices = { ...(manifest.pricing ?? {}), ...(o.userPrices ?? {}) };
    const hasUserPrices = Object.keys(userPrices).length > 0;
    const previous = store.findRun(o.manifestPath);
    checkSameOutput({ manifest: resolve(o.manifestPath), recorded: previous?.out_dir, given: o.outDir, state: o.statePath, stateFile: resolve(o.statePath) });
    if (o.serviceMark && previous) checkSameService(parseServiceMark(store.getMeta(serviceMetaKey(previous.id))), o.serviceMark, o.statePath);
    store.openRun(o.manifestPath, o.outDir, o.baseUrl, o.sandbox, hasUserPrices);
    // Recorded (or adopted, by a state made before services were) once the run is open.
    if (o.serviceMark) store.setMeta(serviceMetaKey(store.currentRunId), JSON.stringify(o.serviceMark));
    // Marked before anything can change and cleared once the reports are written (or found current): a run that
    // ended without writing them (SIGKILL, a failed write) leaves the mark, and the next run writes them even if
    // it changes nothing itself.
    reportsKey = `${REPORTS_STALE_KEY}:${store.currentRunId}`;
    reportsStale = store.getMeta(reportsKey) !== null;
    if (!reportsStale) store.setMeta(reportsKey, '1');
    if (o.callbacks) {
      // The receiver listens first thing: the service retries a callback only for a few seconds, so a run that
      // restarts after a crash must be reachable before its sync and balance read (long for a large manifest).
      // Notes that come before the pipeline exists are kept and handed to it once it does.
      // Loaded only with --listen (an HTTP server and its zod schemas: start-up cost every other run skips).
      const { CallbackReceiver, newCallbackToken, parseListen } = await import('./pipeline/receiver.js');
      const { host, port } = parseListen(o.callbacks.listen);
      // One token per state file, reused by every run: a task sent before a crash keeps a URL a later run answers.
      let token = store.getMeta(CALLBACK_TOKEN_KEY);
      if (token === null) {
        token = newCallbackToken();
        store.setMeta(CALLBACK_TOKEN_KEY, token);
      }
      const r = new CallbackReceiver((note) => (pipeline ? pipeline.onCallback(note) : early.push(note)), token, o.callbacks.redact);
      receiver = r;
      const addr = await r.listen(host, port);
      const base = o.callbacks.publicUrl ?? `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}/`;
      callbackUrlFor = (jobId, attempt) => r.urlFor(base, jobId, attempt);
      emit({ type: 'listening', address: `${addr.address}:${addr.port}`, public_url: base });
    }
    // --sandbox starts a new in-process sandbox each time: tasks of the earlier one (another base URL) are gone
    // with it, so jobs waiting on them are sent again (its credits were not real).
    // Only when the earlier run was on an in-process sandbox too: tasks at a real service are never forgotten.
    const sandboxGone = o.sandbox && previous?.sandbox === 1 && !!previous.base_url && previous.base_url !== o.baseUrl;
    // Uncertain jobs resubmitted, or in-flight ones sent again to a new sandbox: only those the manifest still
    // names, so the sync must say which (no sync-key shortcut).
    const before = store.counts();
    // Which jobs are no longer in the manifest, before the sync: a change of it is a change of the reports.
    const removedBefore = [...store.removedIds()].join('\n');
    const fullSync =
      (o.uncertain === 'resubmit' && before.uncertain + before.submitting > 0) ||
      (sandboxGone && before.submitting + before.submitted + before.downloading + before.uncertain > 0);
    const guard: ChangedGuard = { mode: o.redo?.includes('changed') ? 'send' : o.changed?.keep ? 'keep' : 'ask', max: o.changed?.max ?? DEFAULT_MAX_CHANGED, yes: o.yes };
    const prep = await prepare(store, manifest, hasUserPrices ? userPrices : null, emit, fullSync, o.uncertain === 'resubmit', o.observedPrices ?? null, guard);
    if (sandboxGone) {
      const moved = store.returnInFlight('sent to an earlier in-process sandbox that is gone; sent again');
      const removed = store.removedInFlight();
      let sentAgain = 0;
      for (const m of moved) {
        emit({ type: 'job', id: m.id, from: m.from, to: 'pending', error: null });
        // Temporary files of its interrupted download (cleaned below only for jobs still downloading).
        if (m.from === 'downloading' && !o.download.bucket) await o.download.cleanupPartials(join(o.outDir, o.download.sanitizeName(m.id)));
        // No longer in the manifest: not sent again (its task went with the earlier sandbox).
        if (removed?.has(m.id)) {
          const reason = 'removed from the manifest; its task was in an earlier in-process sandbox that is gone';
          store.transition(m.id, 'pending', 'skipped', { last_error: reason });
          emit({ type: 'job', id: m.id, from: 'pending', to: 'skipped', error: reason });
        } else sentAgain++;
      }
      if (sentAgain > 0) emit({ type: 'warning', message: `${sentAgain} job(s) were in flight in the sandbox of an earlier run, which stopped with it; they are sent again to this sandbox (sandbox credits are not real)` });
    }
    if (sandboxGone) {
      // Job graph: the results that pending jobs would reference (task ids, audio ids, file URLs) went with the earlier
      // sandbox too: the finished jobs they come from are made again, with what was made from them.
      const remade = store.remakeAncestors('its result was in an earlier in-process sandbox that is gone; made again for the jobs that use it');
      for (const id of remade) emit({ type: 'job', id, from: 'done', to: 'pending', error: null });
      for (const m of store.drainSyncMoves()) emit({ type: 'job', id: m.id, from: m.from, to: m.to, error: m.error });
      if (remade.length > 0) emit({ type: 'warning', message: `${remade.length} finished job(s) whose results pending jobs use were made in the sandbox of an earlier run, which stopped with it; they are made again in this sandbox, with what was made from them (sandbox credits are not real)` });
    }
    // A job folder replaced by a symbolic link (out/cat -> ../victim) or a file: refused before anything is sent
    // or moved (exit 74), since writes and moves into it would leave the output folder.
    if (!o.download.bucket) {
      checkJobFolders(o.outDir, function* () {
        for (const id of store.jobIds()) yield o.download.sanitizeName(id);
      });
    }
    // --only names jobs of the manifest: a pattern that matches none is a usage error, before anything changes.
    const match = o.only && o.only.length > 0 ? onlyMatcher(store, o.only) : null;
    // --redo: jobs that ended failed or expired go back to pending (with --only: those it names).
    const redone = o.redo && o.redo.length > 0 ? redoJobs(store, o.redo, match, emit, (o.only ?? []).flatMap((v) => v.split(',').map((p) => p.trim())).filter((p) => !/[*?]/.test(p))) : [];
    if (o.redo && o.redo.length > 0) emit({ type: 'redo', states: [...o.redo], jobs: redone.length });
    // Jobs sent again whose earlier result is on disk: its files go to out/<id>/previous-<n>/ (never deleted).
    // A job sent again by --redo: whatever its folder holds (a failed or expired job may have some files) goes too.
    const replaced = new Set([...store.drainReplacedResults(), ...redone]);
    for (const id of replaced) {
      try {
        const folder = o.download.sanitizeName(id);
        const dir = o.download.bucket
          ? await o.download.bucket.moveAside(folder)
          : await moveAsidePrevious(o.outDir, folder, (target, names, root) =>
              store.keepPrevious(id, folder, target, names, names.includes(RESULT_FILE) ? ownResultRecord(root, `${target}/${RESULT_FILE}`, id) : null),
            );
        if (dir) emit({ type: 'previous', id, dir });
      } catch (err) {
        emit({ type: 'warning', message: `job ${id}: could not move the files of its earlier result aside: ${errorText(err)}` });
      }
    }
    // Count state changes made by this run: a run that changed nothing leaves the reports as they are.
    let changes = prep.new + prep.changed + prep.skipped + prep.recoveredUncertain.length + redone.length + (prep.keptChanged ?? 0);
    if ([...store.removedIds()].join('\n') !== removedBefore) changes++;
    const offChanges = o.events.on((e) => {
      if (e.type === 'job') changes++;
    });
    if (o.uncertain === 'resubmit') {
      // Jobs brought back by the sync's resubmits (uncertain with a changed spec) of what they had skipped.
      for (const id of store.graph.drainRevived()) emit({ type: 'job', id, from: 'skipped', to: 'pending' });
      const removed = store.removedInFlight();
      let kept = 0;
      for (const row of [...store.jobsIn('uncertain')]) {
        // Removed from the manifest: never sent again (it keeps its state: its first task may exist).
        if (removed?.has(row.id)) {
          kept++;
          continue;
        }
        store.transition(row.id, 'uncertain', 'pending', { last_error: `resubmitted (--uncertain=resubmit) after: ${row.last_error ?? 'unknown outcome'}` });
        emit({ type: 'job', id: row.id, from: 'uncertain', to: 'pending' });
        for (const id of store.graph.drainRevived()) emit({ type: 'job', id, from: 'skipped', to: 'pending' });
      }
      if (kept > 0) emit({ type: 'warning', message: `${kept} uncertain job(s) are no longer in the manifest: not resubmitted (they stay uncertain)` });
    }
    if (o.uncertainAfterMs !== undefined && o.uncertainAfterMs !== null) resubmitAged(store, o.uncertainAfterMs, emit);
    // Job graph: pending jobs whose parent ended without results become skipped, naming why.
    store.graph.settle();
    for (const s of store.graph.drainSkipped()) emit({ type: 'job', id: s.id, from: 'pending', to: 'skipped', error: s.reason });
    // --only / --limit: the pending jobs this run sends; the estimate and the checks cover only those.
    let selection: Selection | null = null;
    if (match !== null || (o.limit !== undefined && o.limit !== null)) {
      selection = selectPending(store, match, o.limit ?? null);
      emit({ type: 'selection', selected: selection.ids.size, needed: selection.needed, left_pending: selection.leftOut.jobs, only: o.only ? [...o.only] : null, limit: o.limit ?? null });
    }
    const refusalKey = refusalMetaKey(store.currentRunId);
    const wasRefused = store.getMeta(refusalKey) !== null;
    try {
      checkPrices(store, o.yes, selection);
    } catch (err) {
      // Refused before sending (unknown prices without --yes): the reports show the jobs left pending and why,
      // not what an earlier invocation left (issue #26 item 6). Caps and the balance no longer refuse: the jobs
      // that fit are sent and the rest are held, pending with the reason.
      if (err instanceof BudgetError) {
        store.setMeta(refusalKey, JSON.stringify({ reason: err.message, code: err.code, exit_code: err.exitCode, at: nowIso() } satisfies RefusalNote));
        await writeReportsOrWarn(o, store, t0, reportsKey);
      }
      throw err;
    }
    if (wasRefused) {
      store.setMeta(refusalKey, null);
      changes++;
    }
    // The balance is read only when this invocation has work that can move it: jobs to submit (then a failed read
    // stops the run: the balance check needs it), or tasks to wait for (charged on completion by some models,
    // refunded on failure; a failed read is a warning). Each such invocation keeps its readings in the state
    // file: the run's charge is the sum over its invocations (finish/report-data.ts).
    const left = store.counts();
    let toSend = selection ? selection.ids.size : left.pending;
    const balance = toSend > 0 ? await o.service.balance() : left.submitted > 0 ? await balanceOrWarn(o.service, 'before the run', emit) : null;
    const balanceAt = balance === null ? null : nowIso();
    // The caps and the balance, by the known estimate of the jobs this invocation sends: when tonight's work does
    // not fit, the jobs that fit are sent (in manifest order) and the rest stay pending with the reason (exit 3 for
    // the balance, 5 for a cap), instead of refusing the whole night.
    const limit = creditLimit(o.maxCredits, manifest.budget, null);
    const caps: InvocationCaps = { run: limit, invocation: invocationCap(o.maxCreditsPerInvocation ?? null, manifest.budgetPerInvocation) };
    const held = new Map<string, string>();
    const heldBy = { balance: 0, cap: 0 };
    const over = toSend > 0 ? overText(store, caps, balance, selection) : [];
    if (over.length > 0) {
      const fitted = selectPending(store, match, o.limit ?? null, invocationRooms(store, caps, balance, selection));
      for (const [reason, ids] of fitted.held) for (const id of ids) held.set(id, reason);
      Object.assign(heldBy, fitted.heldBy);
      selection = fitted;
      toSend = fitted.ids.size;
      emit({ type: 'held', over, sent: toSend, sent_credits: round6(fitted.estimate.known), held: Object.fromEntries([...fitted.held].map(([r, ids]) => [r, ids.length])) });
      // Nothing fits: the invocation sends nothing, which the reports say as for a refusal (each pending job gets the reason).
      if (toSend === 0) {
        store.setMeta(refusalKey, JSON.stringify({ reason: over.join('; '), code: 'GB_HELD', exit_code: heldBy.balance > 0 ? EXIT.budget : EXIT.capReached, at: nowIso() } satisfies RefusalNote));
        changes++;
      }
    }
    emitEstimate(store, balance, emit, selection);
    const invocation = toSend + left.submitted > 0 ? store.startInvocation(balance, balanceAt) : null;
    // The credit cap on what is charged (src/engine/pipeline/cap.ts): it starts from what the run's earlier invocations were
    // charged. With a per-invocation cap too, the tighter of the two measures this invocation (both move with the
    // same readings, so the tighter at the start stays the tighter).
    let cap: CreditCap | null = null;
    let capIsRun = false;
    if ((limit !== null || caps.invocation !== null) && toSend > 0 && balance !== null) {
      const earlier = runCredits(store).invocations.slice(0, -1);
      const spent = round6(earlier.reduce((a, inv) => a + (inv.charged ?? 0), 0));
      capIsRun = limit !== null && (caps.invocation === null || limit.credits - spent < caps.invocation.credits);
      const c = capIsRun ? { ...limit!, spent } : { ...caps.invocation!, spent: 0 };
      if (capIsRun && earlier.some((inv) => inv.charged === null)) emit({ type: 'warning', message: `an earlier invocation of this run has no measured charge: the credit cap counts it as 0` });
      cap = new CreditCap({ credits: c.credits, name: c.name, ledger: new LocalLedger(c.credits, c.spent, balance), balance: () => o.service.balance(), timeScale: o.timeScale, emit });
      emit({ type: 'cap', credits: c.credits, name: c.name, charged: c.spent, pending_credits: cap.expected(store.jobsIn('pending')).credits, unconfirmed_jobs: toSend });
    }
    if (limit !== null) store.setMeta(capMetaKey(store.currentRunId), JSON.stringify({ credits: limit.credits, name: limit.name, stopped: false } satisfies CapNote));

    // Leftover temporary files of interrupted downloads.
    if (o.download.bucket) {
      // Multipart uploads a killed run left in the bucket (recorded in the state file before their parts were sent).
      const journal = bucketJournal(store);
      const cleared = await o.download.bucket.abortStale(await journal.pending(), journal);
      if (cleared > 0) emit({ type: 'warning', message: `${cleared} unfinished upload(s) of an earlier run were aborted in ${o.download.bucket.where}` });
    } else for (const row of store.jobsIn('downloading')) await o.download.cleanupPartials(join(o.outDir, o.download.sanitizeName(row.id)));

    if (o.callbacks) {
      // Choice: with --listen every submit carries this run's receiver URL (it is how tasks are adopted and
      // polled less); a job's own callback_url from the manifest is not sent, and the user is told.
      const own = store.pendingWithOwnCallback();
      if (own > 0) emit({ type: 'warning', message: `${own} job(s) name their own callback_url in the manifest; with --listen the service is given this run's receiver URL instead, so those URLs are not called` });
    }
    pipeline = new Pipeline(new SqliteWorkStore(store), o.service, o.download, {
      outDir: o.outDir,
      concurrency: Math.max(1, o.concurrency),
      maxActive: o.maxActive ?? Math.max(500, o.concurrency * 50),
      timeScale: o.timeScale,
      signal: o.signal,
      emit,
      callbackUrlFor,
      baseUrl: o.baseUrl,
      // Scaled like every other duration: against a time-scaled sandbox, uploads are re-sent sooner, never later.
      uploadMaxAgeMs: UPLOAD_REUSE_MS * Math.min(1, o.timeScale),
      recoveredUncertain: mayCallBack(store, prep.recoveredUncertain, o.timeScale),
      creditLimit: creditLimit(o.maxCredits, manifest.budget, selection),
      cap,
      selected: selection?.ids ?? null,
      statusRate: (o.statusRate ?? DEFAULT_STATUS_RATE) / o.timeScale,
    });
    // The callbacks that came while the run was getting ready (sync, balance) are handed over in order of
    // arrival; the pipeline handles them once it has taken over the tasks it resumes.
    const running = pipeline.run();
    for (const note of early.splice(0)) pipeline.onCallback(note);
    await running;
    await receiver?.close();
    receiver = null;

    // Read after a stop (SIGINT, SIGTERM, 402) too: the submits it waited for are charged by now.
    const balanceAfter = invocation === null ? null : await balanceOrWarn(o.service, 'after the run', emit);
    if (invocation !== null) {
      store.finishInvocation(invocation, balanceAfter, balanceAfter === null ? null : nowIso(), pipeline.submitsSent);
      // Its readings are part of the reports (the run's charge), also when no job changed.
      changes++;
    }
    store.setRunFields({ finished_at: nowIso() });
    const credits = runCredits(store);
    const counts = store.counts();
    // for_each jobs whose children would go over the run's cap stay pending for it, as jobs held before sending.
    const fanLimit = creditLimit(o.maxCredits, manifest.budget, selection);
    for (const id of pipeline.heldByLimit) held.set(id, `over ${fanLimit?.name ?? 'the credit limit'} (its for_each children)`);
    const permanentIds = store.permanentFailedIds();
    const exitCode = exitCodeFor(counts, o.signal, pipeline.stopReason, { held: { balance: heldBy.balance, cap: heldBy.cap + pipeline.heldByLimit.size }, permanentFailed: permanentIds.length });
    const capStop = cap !== null && pipeline.stopReason === 'credit-cap' && !o.signal.aborted;
    const runCapStopped = (capStop && capIsRun) || (limit !== null && held.size > 0 && [...held.values()].includes(`over ${limit.name}`));
    if (limit !== null) store.setMeta(capMetaKey(store.currentRunId), JSON.stringify({ credits: limit.credits, name: limit.name, stopped: runCapStopped } satisfies CapNote));
    offChanges();
    const reportFiles = ['report.json', 'report.csv', 'report.md', 'report.html'].map((f) => join(o.outDir, f));
    if (changes === 0 && !reportsStale && !o.download.bucket && reportFiles.every((f) => existsSync(f))) {
      store.setMeta(reportsKey, null);
      emit({ type: 'reports', out_dir: o.outDir, written: false });
    } else {
      try {
        // The reports leave out the jobs no longer in the manifest (the exit code above counted every job).
        store.leaveOutRemoved();
        const data = buildReportData(store, (Date.now() - t0) / 1000, 0, store.removedIds().size > 0 ? store.counts() : counts);
        await o.writeReports(o.outDir, data, o.download.bucket ? bucketJournal(store) : undefined);
        store.setMeta(reportsKey, null);
        emit({ type: 'reports', out_dir: o.outDir, written: true });
      } catch (err) {
        emit({ type: 'warning', message: `could not write the reports: ${errorText(err)}` });
      }
    }
    const charged = balance !== null && balanceAfter !== null ? round6(balance - balanceAfter) : null;
    emit({
      type: 'finish',
      counts,
      exit_code: exitCode,
      wall_seconds: (Date.now() - t0) / 1000,
      status_requests: pipeline.statusRequests,
      balance_after: balanceAfter,
      charged,
      run_charged: credits.charged,
      ...(cap !== null
        ? { cap: { credits: cap.credits, name: cap.name, stopped: capStop, charged: capIsRun ? (credits.charged ?? cap.totals.spent) : cap.totals.spent, left_pending: counts.pending, left_credits: capStop ? cap.expected(store.jobsIn('pending')) : null } }
        : {}),
      caps: { max_credits: limit ? { credits: limit.credits, name: limit.name } : null, per_invocation: caps.invocation },
      // Every job done: none to list (and no read of every row).
      not_done: counts.done === Object.values(counts).reduce((a, n) => a + n, 0) ? {} : notDone(store.summaryRows(), held, pipeline.stopReason, o.signal.aborted, selection?.ids ?? null),
      failed_ids: firstIds(store, 'failed', SUMMARY_IDS),
      expired_ids: firstIds(store, 'expired', SUMMARY_IDS),
      permanent: { count: permanentIds.length, ids: permanentIds.slice(0, SUMMARY_IDS) },
      uncertain_ids: firstIds(store, 'uncertain', SUMMARY_IDS),
      ...(callbackUrlFor ? { callbacks_ignored: pipeline.callbacksIgnored } : {}),
    });
    return { exitCode, counts, statusRequests: pipeline.statusRequests };
  } catch (err) {
    invalid = err instanceof ManifestError;
    // An invalid manifest changed nothing (the sync is rolled back): the reports are as current as before.
    if (invalid && reportsKey !== null && !reportsStale) store.setMeta(reportsKey, null);
    throw err;
  } finally {
    await receiver?.close();
    store.close();
    if (invalid && madeState) {
      removeState(o.statePath);
      try {
        for (const d of madeDirs) rmdirSync(d); // deepest first, only when empty
      } catch {
        // something else is in it: left as is
      }
    }
  }
}

/**
 * The uncertain jobs whose task may still call back: those recovered at this start, and those an earlier
 * run (killed, say) left uncertain whose task may still be running (sent less than their model's typical
 * maximum time ago, see callbackDeadline). Older ones are not waited for: their callbacks are over.
 */
function mayCallBack(store: Store, recovered: readonly string[], timeScale: number): string[] {
  const now = Date.now();
  const ids = new Set(recovered.filter((id) => store.getJob(id)?.state === 'uncertain'));
  for (const row of store.jobsIn('uncertain')) {
    const deadline = callbackDeadline(row.submitted_at, row.model, timeScale);
    if (deadline !== null && deadline > now) ids.add(row.id);
  }
  return [...ids];
}

/** The account balance, or null with a warning naming `when` (a reading that only measures the charge). */
async function balanceOrWarn(service: ServicePort, when: string, emit: (e: EngineEvent) => void): Promise<number | null> {
  try {
    return await service.balance();
  } catch (err) {
    emit({ type: 'warning', message: `could not read the balance ${when}: ${errorText(err)}` });
    return null;
  }
}

/** The tighter of --max-credits and the manifest budget, or null; the pending jobs a selection leaves out are not counted. */
function creditLimit(maxCredits: number | null, budget: number | null, sel: Selection | null): CreditLimit | null {
  const leftOut = sel ? { leftOut: sel.leftOut.known } : {};
  if (maxCredits !== null && (budget === null || maxCredits <= budget)) return { credits: maxCredits, name: `--max-credits ${maxCredits}`, ...leftOut };
  return budget !== null ? { credits: budget, name: `the manifest budget of ${budget}`, ...leftOut } : null;
}

/** Failed and expired jobs named by the end-of-run line (then how many more). */
export const SUMMARY_IDS = 20;
export { exitCodeFor, type ExitFacts } from './finish/exit-code.js';

/** The first `max` ids of the jobs in `state`, in manifest order. */
function firstIds(store: Store, state: JobState, max: number): string[] {
  const out: string[] = [];
  for (const row of store.jobsIn(state)) {
    if (out.length >= max) break;
    out.push(row.id);
  }
  return out;
}

/** Write the four reports now (a refusal before sending); the stale mark is cleared once they are written. */
async function writeReportsOrWarn(o: RunOptions, store: Store, t0: number, reportsKey: string | null): Promise<void> {
  try {
    store.setRunFields({ finished_at: nowIso() });
    await o.writeReports(o.outDir, buildReportData(store, (Date.now() - t0) / 1000), o.download.bucket ? bucketJournal(store) : undefined);
    if (reportsKey !== null) store.setMeta(reportsKey, null);
    o.events.emit({ type: 'reports', out_dir: o.outDir, written: true });
  } catch (err) {
    o.events.emit({ type: 'warning', message: `could not write the reports: ${errorText(err)}` });
  }
}

/** Remove a state file and its WAL companions (tests and benches). */
export function removeState(path: string): void {
  for (const s of ['', '-wal', '-shm']) rmSync(path + s, { force: true });
}


