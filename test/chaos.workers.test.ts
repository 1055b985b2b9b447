import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { PgReader } from '../src/store/pg/snapshot.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { balanceOf, chaosManifest, CliProcess, progressEvent, randInt, sleep, verifyChaos, type CliEvent } from './helpers/chaos.js';
import { testDatabase } from './helpers/pg.js';
import { startSandboxProcess, type SandboxProcess } from './helpers/sandbox-process.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Chaos test (issue #13 item 6): one run in PostgreSQL worked by 4 worker processes (the CLI: one
 * `genbatch run <manifest> --state postgres://...` that creates the run, three `genbatch work
 * --until-empty`), 300 jobs (plain images, edits of 20 local reference images, which are uploaded,
 * dream-4 with two images, music, video, and the full music chain of manifests/music-chain.yaml)
 * against a sandbox in another process with faults on (5xx, 429, drops, truncated downloads, and
 * ambiguous submits that create the task and answer 500). Leases are short (GENBATCH_LEASE_SECONDS).
 *
 * Chaos, each at a random moment (after the k-th submit or file of the worker, k random): two
 * workers SIGKILLed, each replaced by a new `work`; then one worker SIGSTOPped while it holds jobs in
 * flight (submitting, submitted, downloading), until each of them was taken by another worker (past
 * its lease: made uncertain, or polled and downloaded by them), then SIGCONT: its late writes are
 * refused (no new file row of it and no job event of a move of it about those jobs).
 *
 * After: every job done or uncertain (or skipped behind an uncertain job: a music chain whose song's
 * submit answer was lost); no task created twice (every task at the sandbox is recorded
 * by one job, or comes from a submit whose answer was lost, whose job is uncertain: no more of those
 * than uncertain jobs without a task); zero 429s of the upload rate limit (the sandbox's own count);
 * the credits charged (the key's balance) within --max-credits; every file present with its recorded
 * size and sha256; no temporary file left.
 * CHAOS_ROUNDS=N runs N rounds (default 1), each with its own sandbox and database; CHAOS_DEBUG=1
 * prints the chaos as it happens and the unfinished jobs every 5 s.
 */
const SCALE = '0.01';
const JOBS = 300;
const WORKERS = 4;
const LEASE_S = '2';
const ROUNDS = Number(process.env.CHAOS_ROUNDS ?? '1');
const START_CREDITS = 10_000_000;
const FAULTS = [
  'submit:500=0.01',
  'submit:500-after=0.01',
  'submit:503=0.03',
  'submit:429=0.03',
  'status:500=0.03',
  'status:429=0.03',
  'status:drop=0.02',
  'detail:500=0.03',
  'detail:drop=0.02',
  'file:500=0.03',
  'file:drop=0.02',
  'file:truncate=0.03',
  'upload:500=0.1',
  'upload:drop=0.05',
  'balance:500=0.05',
].join(',');

const t = tempDir('genbatch-chaos-');
/** Every worker process of the round: those still running when it fails are ended. */
const started: CliProcess[] = [];

beforeAll(() => ensureBuilt());
afterAll(() => t.cleanup());

/** The known estimate of the manifest (the cap given as --max-credits is three times it). */
async function estimate(manifest: string): Promise<number> {
  const r = await runCli(['estimate', manifest, '--offline', '--json']);
  if (r.code !== 0) throw new Error(`estimate exited ${String(r.code)}: ${r.stderr}`);
  return (JSON.parse(r.stdout) as { total_credits: number }).total_credits;
}

interface Held {
  id: string;
  state: string;
  epoch: number;
}

/** The jobs a worker process holds now (its id is hostname:pid:random) and its id. */
async function heldBy(pool: Pool, pid: number): Promise<{ worker: string | null; jobs: Held[] }> {
  const r = await pool.query<{ id: string; state: string; epoch: number; owner: string }>(
    `SELECT id, state, lease_epoch AS epoch, lease_owner AS owner FROM jobs WHERE lease_owner LIKE $1 ORDER BY seq`,
    [`%:${pid}:%`],
  );
  return { worker: r.rows[0]?.owner ?? null, jobs: r.rows.map(({ id, state, epoch }) => ({ id, state, epoch })) };
}

/** Files rows of these jobs written by `worker`: "job/idx". */
async function filesBy(pool: Pool, worker: string, ids: string[]): Promise<string[]> {
  const r = await pool.query<{ k: string }>(`SELECT job_id || '/' || idx AS k FROM files WHERE worker = $1 AND job_id = ANY($2) ORDER BY 1`, [worker, ids]);
  return r.rows.map((x) => x.k);
}

/** One round: the run, its workers and the chaos, then the checks. */
async function chaosRound(round: number, url: string, pool: Pool, sb: SandboxProcess): Promise<void> {
  const dir = join(t.dir, `r${round}`);
  mkdirSync(dir);
  const { path: manifest } = chaosManifest(dir, JOBS);
  // The cap bounds what is charged (issue #21): jobs of unknown price are charged too, and each worker counts a
  // class at the first charge it read (other workers' charges may be in it), so the cap leaves room over the
  // known estimate for the run to finish; what is charged must still stay within it.
  const cap = 3 * (await estimate(manifest));
  const out = join(dir, 'out');
  mkdirSync(out);
  const service = ['--state', url, '--out', out, '--base-url', sb.url, '--time-scale', SCALE, '--concurrency', '4', '--yes', '--json'];
  const env = { GENBATCH_API_KEY: sb.key, GENBATCH_LEASE_SECONDS: LEASE_S };
  const spawnWorker = (args: string[]) => {
    const w = new CliProcess(args, env);
    started.push(w);
    return w;
  };
  const startWorker = () => spawnWorker(['work', '--until-empty', ...service]);
  const before = await balanceOf(sb);
  const log: string[] = [];
  const t0 = Date.now();
  const note = (line: string) => {
    log.push(line);
    if (process.env.CHAOS_DEBUG) console.log(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${line}`);
  };

  const workers = [spawnWorker(['run', manifest, ...service, '--max-credits', String(cap)])];
  // The others join once the run exists (its first submit is sent after the manifest is synced).
  expect(await workers[0]!.waitFor((e) => e.type === 'sending'), workers[0]!.stderr).toBe(true);
  for (let w = 1; w < WORKERS; w++) workers.push(startWorker());

  /** A running worker not yet touched, after its k-th submit or file from now (null when none is left running). */
  const touched = new Set<CliProcess>();
  const pick = async (kMax: number): Promise<CliProcess | null> => {
    const live = workers.filter((w) => w.running && !touched.has(w));
    if (live.length === 0) return null;
    const w = live[randInt(0, live.length - 1)]!;
    touched.add(w);
    const k = w.events.filter(progressEvent).length + randInt(1, kMax);
    return (await w.waitFor(progressEvent, k)) ? w : null;
  };

  let kills = 0;
  for (let attempt = 0; attempt < 4 && kills < 2; attempt++) {
    const w = await pick(20);
    if (!w) continue;
    await sleep(randInt(0, 150));
    if (w.signal('SIGKILL')) {
      kills++;
      note(`killed pid ${w.pid} after ${w.events.filter(progressEvent).length} submits/files`);
      workers.push(startWorker());
    }
  }
  expect(kills, 'workers killed mid-run').toBe(2);

  // Pause one past its lease: stopped while it holds jobs, resumed once every one of them was taken by another worker.
  let paused: { worker: string; pid: number; jobs: Held[]; filesBefore: string[]; eventsBefore: number; takenOver: number; warnings: number } | null = null;
  for (let attempt = 0; attempt < 5 && !paused; attempt++) {
    const w = await pick(10);
    if (!w || !w.signal('SIGSTOP')) continue;
    // What it wrote before the stop reaches the pipe and the database (a commit in flight) first.
    await sleep(300);
    const held = await heldBy(pool, w.pid);
    // Jobs at the service or being sent: the ones no other worker may take but by the lease's expiry.
    if (held.worker === null || !held.jobs.some((j) => j.state !== 'pending')) {
      w.signal('SIGCONT');
      continue;
    }
    const ids = held.jobs.map((j) => j.id);
    const filesBefore = await filesBy(pool, held.worker, ids);
    const eventsBefore = w.events.length;
    // Its jobs in flight are taken over once its lease ran out (submitting ones made uncertain, the others
    // adopted); its pending ones are free to claim again then (counted when another worker did).
    const inFlight = held.jobs.filter((j) => j.state !== 'pending');
    const deadline = Date.now() + 30_000;
    let takenOver = 0;
    let reclaimed: string[] = [];
    while (Date.now() < deadline) {
      await sleep(250);
      const now = await pool.query<{ id: string; epoch: number }>('SELECT id, lease_epoch AS epoch FROM jobs WHERE id = ANY($1)', [ids]);
      const moved = new Set(now.rows.filter((r) => r.epoch > held.jobs.find((j) => j.id === r.id)!.epoch).map((r) => r.id));
      takenOver = inFlight.filter((j) => moved.has(j.id)).length;
      reclaimed = held.jobs.filter((j) => j.state === 'pending' && moved.has(j.id)).map((j) => j.id);
      if (takenOver === inFlight.length) break;
    }
    if (process.env.CHAOS_DEBUG && takenOver < inFlight.length) {
      const st = workers.map((x) => `${x.pid}:${x.running ? 'up' : 'down'}:${x.events.length}:${String(x.events.at(-1)?.type)}`).join(' ');
      const r = await pool.query(`SELECT id, state, lease_owner, lease_epoch, round(extract(epoch FROM lease_expires - now())::numeric, 1) AS left_s FROM jobs WHERE id = ANY($1) AND lease_owner LIKE $2`, [ids, `%:${w.pid}:%`]);
      console.log(`not taken over: ${st} ${JSON.stringify(r.rows)}`);
    }
    w.signal('SIGCONT');
    paused = { worker: held.worker, pid: w.pid, jobs: held.jobs, filesBefore, eventsBefore, takenOver, warnings: 0 };
    note(`paused pid ${w.pid} holding ${held.jobs.length} job(s) (${held.jobs.map((j) => `${j.id}:${j.state}`).join(', ')}); ${takenOver} in flight taken over and ${reclaimed.length} pending claimed by others before it went on`);
  }

  const watch = process.env.CHAOS_DEBUG
    ? setInterval(() => {
        const st = workers.map((w) => `${w.pid}:${w.running ? 'up' : 'down'}:${w.events.length}:${String(w.events.at(-1)?.type)}`).join(' ');
        console.log(`${((Date.now() - t0) / 1000).toFixed(1)} s: ${st}`);
        for (const w of workers.filter((x) => x.running)) console.log(`  ${w.pid} last: ${JSON.stringify(w.events.slice(-4))} ${w.stderr.slice(-300)}`);
        void pool
          .query(`SELECT id, state, lease_owner, lease_epoch, round(extract(epoch FROM lease_expires - now())::numeric, 1) AS left_s FROM jobs WHERE state NOT IN ('done', 'uncertain') ORDER BY seq LIMIT 12`)
          .then((r) => console.log(JSON.stringify(r.rows)), () => undefined);
        void pool
          .query(`SELECT slot, held_by, round(extract(epoch FROM held_until - now())::numeric, 1) AS hold_s, round(extract(epoch FROM now() - ended_at)::numeric, 1) AS ended_s FROM upload_slots`)
          .then((r) => console.log(`slots ${JSON.stringify(r.rows)}`), () => undefined);
      }, 5000)
    : null;
  // Every worker ends (--until-empty) once the run has nothing left; a round that hangs fails here, its state shown.
  const ended = Promise.all(workers.map((w) => w.exited));
  const hung = await Promise.race([ended.then(() => false), sleep(90_000).then(() => true)]);
  if (hung) {
    if (watch) clearInterval(watch);
    const left = await pool.query(
      `SELECT id, state, attempts, last_error, lease_owner, round(extract(epoch FROM lease_expires - now())::numeric, 1) AS left_s FROM jobs WHERE state NOT IN ('done', 'uncertain') ORDER BY seq LIMIT 20`,
    );
    const up = workers
      .filter((w) => w.running)
      .map((w) => `${w.pid}: ${JSON.stringify(w.events.slice(-3))}, warnings ${JSON.stringify(w.events.filter((e) => e.type === 'warning').slice(-5))}`);
    throw new Error(`workers still running 90 s after the chaos: ${up.join('; ')}; jobs left: ${JSON.stringify(left.rows)}`);
  }
  const exits = await ended;
  if (watch) clearInterval(watch);
  // A last worker for whatever a worker killed at the very end still held (its leases expire first).
  const left = (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM jobs WHERE state IN ('pending', 'submitting', 'submitted', 'downloading')`)).rows[0]!.n;
  if (left > 0) {
    note(`${left} job(s) left unfinished by the workers: one more worker`);
    await sleep(Number(LEASE_S) * 1000 + 500);
    const last = startWorker();
    workers.push(last);
    exits.push(await last.exited);
  }
  for (const [i, w] of workers.entries()) {
    const e = exits[i]!;
    if (e.signal === 'SIGKILL') continue;
    expect([0, 4], `worker pid ${w.pid}: ${w.stderr.slice(-2000)}`).toContain(e.code);
  }

  // Late writes of the paused worker refused. Its jobs in flight (submitting, submitted, downloading) were
  // taken by others (made uncertain, or polled and downloaded by them): no file row of it about them and no
  // job event of a move of it about them but the acknowledgement of a move committed before the stop. (Its
  // pending jobs went back to the queue when its lease ran out: it may claim them again, rightly.)
  console.log(`chaos round ${round}: ${log.join('; ')}`);
  expect(paused, 'a worker paused while holding jobs in flight').not.toBeNull();
  const p = paused!;
  const inFlight = p.jobs.filter((j) => j.state !== 'pending');
  expect(p.takenOver).toBe(inFlight.length);
  const ids = inFlight.map((j) => j.id);
  expect((await filesBy(pool, p.worker, ids)).filter((k) => !p.filesBefore.includes(k))).toEqual([]);
  const pausedProc = workers.find((w) => w.pid === p.pid)!;
  const after = pausedProc.events.slice(p.eventsBefore);
  const late = after.filter((e: CliEvent) => e.type === 'job' && ids.includes(String(e.id)) && e.to !== inFlight.find((j) => j.id === e.id)!.state);
  expect(late).toEqual([]);
  p.warnings = after.filter((e) => e.type === 'warning' && String(e.message).includes('another worker holds it now')).length;
  note(`paused worker after SIGCONT: ${p.warnings} move(s) refused as another worker's, exit ${JSON.stringify(await pausedProc.exited)}`);

  const reader = await PgReader.open(url, 'chaos');
  const run = (await reader.runs())[0]!;
  const snap = await reader.snapshot([run.id], out);
  try {
    const v = await verifyChaos(snap.path, out, sb, before);
    console.log(`chaos round ${round}: ${log.slice(-1).join('')}; ${JSON.stringify(v)}; cap ${cap}`);
    expect(v.unfinished).toEqual([]);
    expect(v.sharedTaskIds).toEqual([]);
    expect(v.unknownTaskIds).toEqual([]);
    expect(v.orphanTasks).toBeLessThanOrEqual(v.uncertainWithoutTask);
    expect(v.uploads.rate_limited).toBe(0);
    expect(v.charged).toBeLessThanOrEqual(cap);
    expect(v.filesChecked).toBeGreaterThan(0);
    expect(v.tempFiles).toEqual([]);
    expect(v.integrity).toBe('ok');
    // Each result file row names the worker that wrote it.
    expect((await pool.query(`SELECT count(*)::int AS n FROM files WHERE state = 'done' AND worker IS NULL`)).rows).toEqual([{ n: 0 }]);
  } finally {
    snap.close();
    await reader.close();
  }
}

describe('chaos: 4 workers on one PostgreSQL run', () => {
  for (let round = 1; round <= ROUNDS; round++) {
    it(`round ${round}/${ROUNDS}: 2 workers killed and replaced, 1 paused past its lease: every job done or uncertain, tasks once, late writes refused, no upload 429, within --max-credits, files intact, no temp file`, async () => {
      // A sandbox of its own per round: its task list and stats are this round's.
      const sb = await startSandboxProcess(['--time-scale', SCALE, '--keys', `sk-chaos-key=${START_CREDITS}`, '--faults', FAULTS]);
      const db = await testDatabase();
      const pool = openPool(db.url);
      try {
        await chaosRound(round, db.url, pool, sb);
      } finally {
        for (const w of started.splice(0)) {
          w.signal('SIGCONT');
          w.signal('SIGKILL');
        }
        await pool.end();
        await db.drop();
        await sb.stop();
      }
    }, 150_000);
  }
});
