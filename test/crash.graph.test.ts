import { createServer } from 'node:net';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STEM_SPLIT_KEYS } from '../src/models/music/index.js';
import { ROOT, ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { startSandboxProcess, type SandboxProcess, type SandboxTask } from './helpers/sandbox-process.js';
import { compareWithServer } from './helpers/server-files.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, findFiles, integrity, readJobs } from './helpers/verify.js';

/**
 * The full music chain (manifests/music-chain.yaml: a song, stem-split and
 * convert-to-wav for each variation, separate-vocals, timestamped lyrics,
 * covers, a music video, an extension, a persona and a second song with it),
 * run against a sandbox in another process and killed with SIGKILL at progress
 * points: a random delay (0-120 ms) after the k-th NDJSON `sending`, `job` or
 * `file` event (k random), so kills land in the submit window (after
 * `sending`, before the answer) as well as while polling and downloading.
 * Every kill must land (the run must not have finished first). The runner
 * receives completion callbacks on a fixed port with a callback token kept in
 * the state file, so a task sent just before a kill (its job recovered as
 * uncertain) is adopted from its callback by the next run, never resubmitted.
 * Finished: every job done, 12 stems per stem-split (the server's bytes),
 * every task created exactly once (the sandbox's own task list).
 */
const SCALE = process.env.GENBATCH_CRASH_SCALE ?? '0.03';
const SLOW = process.env.GENBATCH_SLOW === '1';
/** Kills per chain; GENBATCH_SLOW=1 runs the chain 5 times (10 kills). */
const KILLS = 2;
const ROUNDS = SLOW ? 5 : 1;
/** The k-th event is drawn from 1..K_MAX: a full run emits about 100 of them, so both kills land. */
const K_MAX = 15;
const MANIFEST = join(ROOT, 'manifests', 'music-chain.yaml');

let sb: SandboxProcess;
const t = tempDir('genbatch-crash-graph-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandboxProcess(['--time-scale', SCALE, '--keys', 'sk-chain-key=1000000', '--allow-loopback']);
}, 60_000);
afterAll(async () => {
  await sb?.stop();
  t.cleanup();
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      const port = typeof a === 'object' && a ? a.port : 0;
      s.close(() => resolve(port));
    });
  });
}

interface Killed {
  code: number | null;
  signal: string | null;
  /** The event after which the kill was timed ("sending img", "job x submitted->running", ...). */
  at: string | null;
  events: number;
  stderr: string;
}

/** Run, and SIGKILL `delayMs` after the k-th sending/job/file event on the NDJSON stdout. */
function killAtEvent(k: number, delayMs: number, args: string[], env: Record<string, string>): Promise<Killed> {
  return new Promise((resolve) => {
    const child = spawnCli(args, env);
    let buf = '';
    let seen = 0;
    let at: string | null = null;
    const tail: string[] = [];
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        tail.push(line);
        if (tail.length > 30) tail.shift();
        let e: { type?: string; id?: string; from?: string; to?: string; path?: string };
        try {
          e = JSON.parse(line) as typeof e;
        } catch {
          continue;
        }
        if (e.type !== 'sending' && e.type !== 'job' && e.type !== 'file') continue;
        seen++;
        if (seen === k) {
          at = e.type === 'job' ? `job ${e.id} ${e.from}->${e.to}` : `${e.type} ${e.id}${e.path ? ` ${e.path}` : ''}`;
          setTimeout(() => child.kill('SIGKILL'), delayMs);
        }
      }
    });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code, signal) => resolve({ code, signal, at, events: seen, stderr: `${tail.join('\n')}\n${stderr}` }));
  });
}

function filesOf(state: string, job: string): Array<{ name: string; type: string; url: string | null; path: string | null; state: string }> {
  const db = new Database(state, { readonly: true });
  try {
    return db.prepare('SELECT name, type, url, path, state FROM files WHERE job_id = ? ORDER BY idx').all(job) as Array<{ name: string; type: string; url: string | null; path: string | null; state: string }>;
  } finally {
    db.close();
  }
}

describe('music chain: crash and resume', () => {
  for (let round = 1; round <= ROUNDS; round++) {
    it(`round ${round}/${ROUNDS}: survives ${KILLS} SIGKILLs at progress points: every job done, every file present, every task created once`, async () => {
      await chainRound(join(t.dir, `out-${round}`));
    }, 300_000);
  }
});

async function chainRound(out: string): Promise<void> {
  const state = join(out, 'state.db');
  const port = await freePort();
  const args = ['run', MANIFEST, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--concurrency', '3', '--json', '--listen', `127.0.0.1:${port}`, '--callback-url', `http://127.0.0.1:${port}/cb`];
  const env = { GENBATCH_API_KEY: sb.key };
  const before = new Set((await sb.tasks()).map((x) => x.task_id));
  let killed = 0;
  const points: string[] = [];
  for (let i = 0; i < KILLS; i++) {
    const k = 1 + Math.floor(Math.random() * K_MAX);
    const delay = Math.floor(Math.random() * 120);
    const r = await killAtEvent(k, delay, args, env);
    points.push(`#${k} (${r.at ?? 'never reached'}) +${delay}ms`);
    if (r.signal === 'SIGKILL') killed++;
    else throw new Error(`run ${i + 1} was to be killed after event ${k} + ${delay} ms but exited ${String(r.code)} first (${r.events} events): ${r.stderr.slice(-3000)}`);
  }
  expect(killed).toBe(KILLS);
  let last = await runCli(args, env);
  let resubmitted: string[] = [];
  /** Tasks made before a kill whose job never learned their id: honest outcomes, counted, never hidden. */
  let orphans: SandboxTask[] = [];
  if (last.code === 4) {
    // A kill after the intent was written: the job is uncertain. Either the POST never left (no task), or
    // the service made a task whose id died with the run: the next run adopts it from its completion
    // callback, but the service retries a callback for a few seconds only (scaled by the time scale), so
    // on a loaded machine the callback can come and go while no run listens. What genbatch guarantees is
    // that such a job is reported uncertain and never sent again blindly: a task unknown to the state must
    // be one whose completion callback never reached a run, and its job must be uncertain.
    const j = readJobs(state);
    resubmitted = j.filter((x) => x.state === 'uncertain').map((x) => x.id);
    expect(j.filter((x) => !['done', 'uncertain', 'skipped', 'pending'].includes(x.state))).toEqual([]);
    for (const x of j.filter((y) => y.state === 'skipped')) expect(x.last_error).toMatch(/^skipped because job \S+ is (uncertain|skipped)/);
    const known = new Set(j.map((x) => x.task_id).filter((x): x is string => x !== null));
    orphans = (await sb.tasks()).filter((x) => !before.has(x.task_id) && !known.has(x.task_id));
    for (const o of orphans) {
      expect(o.callback_delivered, `orphan task ${o.task_id}: its callback reached a run, which did not adopt it`).toBe(false);
      expect(resubmitted).toContain(new URL(o.callback_url!).searchParams.get('job'));
    }
    expect(resubmitted.length).toBeGreaterThan(0);
    last = await runCli([...args, '--uncertain', 'resubmit'], env);
  }
  expect(last.code, `${last.stdout.split('\n').slice(-30).join('\n')}\n${last.stderr}`).toBe(0);

  // 10 manifest jobs (two of them for_each) + 2 stem-split and 2 convert-to-wav children: all done.
  const jobs = readJobs(state);
  expect(jobs).toHaveLength(14);
  // An orphan of a once-per-task endpoint (covers of a song): resubmitted, the service answers 409 (its cover exists
  // already), and the job ends `exists`, the honest outcome of the user's --uncertain resubmit. No other job is not done.
  const exists = jobs.filter((j) => j.state === 'exists');
  for (const j of exists) {
    expect(resubmitted, `${j.id} ended exists without being resubmitted`).toContain(j.id);
    expect(j.last_error).toMatch(/HTTP 409/);
    expect(orphans.some((o) => new URL(o.callback_url!).searchParams.get('job') === j.id)).toBe(true);
  }
  // The persona is such an endpoint too (once per track): when it ends `exists`, the song that sings with it has
  // no persona id to send and is skipped, saying why (seen once in a CI run: a kill left the persona an orphan).
  const skippedForExists = jobs.filter((j) => j.state === 'skipped' && exists.some((e) => (j.last_error ?? '').startsWith(`skipped because job ${e.id} is exists`)));
  expect(
    jobs.filter((j) => j.state !== 'done' && j.state !== 'exists' && !skippedForExists.includes(j)).map((j) => `${j.id} ${j.state} ${j.last_error ?? ''}`),
  ).toEqual([]);

  // Every task exactly once: the 12 task ids of the state (each job that sends one, less those ended `exists` or
  // skipped for one: for_each parents send none) are exactly the sandbox's new tasks.
  const forEachParents = new Set(jobs.filter((j) => /\.\d+$/.test(j.id)).map((j) => j.id.replace(/\.\d+$/, '')));
  const sending = 12 - exists.length - skippedForExists.filter((j) => !forEachParents.has(j.id)).length;
  const ids = jobs.map((j) => j.task_id).filter((x): x is string => x !== null);
  expect(ids).toHaveLength(sending);
  // (plus the orphans counted above, each resubmitted by the user's --uncertain resubmit).
  expect(new Set(ids).size).toBe(sending);
  const server = (await sb.tasks()).map((x) => x.task_id).filter((id) => !before.has(id));
  expect([...server].sort()).toEqual([...ids, ...orphans.map((o) => o.task_id)].sort());

  // 12 stems per stem-split, each file the server's bytes; lyrics as JSON and LRC.
  for (const id of ['stems.0', 'stems.1']) {
    const stems = filesOf(state, id).filter((f) => f.url !== null && f.type !== 'file');
    expect(stems.map((f) => f.type).sort()).toEqual(STEM_SPLIT_KEYS.map((k) => k.replace(/_url$/, '')).sort());
    expect(new Set(stems.map((f) => f.url)).size).toBe(12);
    for (const f of stems) {
      expect(f.state).toBe('done');
      expect(existsSync(join(out, f.path!))).toBe(true);
    }
  }
  const compared = await compareWithServer(state, out, async (url) => Buffer.from(await (await fetch(url)).arrayBuffer()));
  expect(compared).toBeGreaterThanOrEqual(24);
  expect(checkFiles(state, out)).toBeGreaterThan(0);
  expect(JSON.parse(readFileSync(join(out, 'lyrics', 'timestamped-lyrics.json'), 'utf8'))).toHaveProperty('aligned_words');
  expect(readFileSync(join(out, 'lyrics', 'lyrics.lrc'), 'utf8')).toMatch(/^\[\d\d:\d\d\.\d\d\]\S/);
  if (!exists.some((j) => j.id === 'persona')) {
    const sent = JSON.parse(readFileSync(join(out, 'second-song', 'result.json'), 'utf8')) as { input: { persona_id: string; title: string } };
    const persona = readFileSync(join(out, 'persona', 'persona_id.txt'), 'utf8').trim();
    expect(sent.input.persona_id).toBe(persona);
    expect(sent.input.title).toBe(`Tide Tables (sung by ${persona})`);
  } else expect(skippedForExists.map((j) => j.id)).toContain('second-song');
  expect(findFiles(out, (n) => n.endsWith('.part'))).toEqual([]);
  expect(integrity(state)).toBe('ok');
  const adopted = jobs.filter((j) => (j.last_error ?? '').includes('adopted')).map((j) => j.id);
  console.log(`music chain crash test: ${killed} kills at ${points.join('; ')}; adopted after a kill: ${adopted.join(', ') || 'none'}; resubmitted: ${resubmitted.join(', ') || 'none'} (of which ${orphans.length} had a task whose callback came while no run listened); ${server.length} tasks, ${compared} files compared with the server`);
}
