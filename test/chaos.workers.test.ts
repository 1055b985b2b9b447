import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { mixedManifest } from './helpers/mixed-manifest.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';
import { startSandboxProcess, type SandboxProcess } from './helpers/sandbox-process.js';
import { tempDir } from './helpers/tmp.js';
import { findFiles } from './helpers/verify.js';

/**
 * Chaos test of many workers on one run kept in PostgreSQL (issue #13 item 6): one `genbatch run` (it syncs
 * the manifest) and 3 `genbatch work --until-empty`, on a mixed manifest (images, edits of local PNGs: uploads,
 * two-image jobs, music, video, and music chains: a song, a WAV of each track, a video) against the sandbox in another process with faults on (status 500 and 429,
 * file 500; none on uploads, whose refusals are counted: 429s only). Placed by the workers' own NDJSON events (not wall time): SIGKILL of a worker and a
 * replacement started, SIGSTOP of another past its lease (5 s at this time scale) then SIGCONT, SIGKILL of a
 * third and its replacement. After: every job done or uncertain; each task id once, each at the sandbox, extra
 * sandbox tasks only for uncertain jobs; no upload refused (429); the charge within --max-credits; every file
 * on disk with its recorded size and sha256; no temporary file left. GENBATCH_SLOW=1: 300 jobs, 5 rounds.
 */
const SCALE = '0.01';
const SLOW = process.env.GENBATCH_SLOW === '1';
const JOBS = SLOW ? 300 : 200;
/** Rounds, each with its own sandbox, database and output folder: 2 in CI (about 30 s here), 5 with GENBATCH_SLOW=1 (GENBATCH_CHAOS_ROUNDS=N: N). */
const ROUNDS = Number(process.env.GENBATCH_CHAOS_ROUNDS ?? (SLOW ? 5 : 2));
const KEY = 'sk-chaos-key-0123456789';
/** Music chains: a song, a WAV of each of its tracks (for_each), a video of its first track. */
const CHAINS = 5;

function musicChains(n: number): string {
  let yaml = '';
  for (let k = 0; k < n; k++) {
    yaml += `  - id: song-${k}
    model: generate-music
    input: {custom_mode: false, instrumental: false, prompt: "a calm harbour song number ${k}"}
  - id: song-${k}-wav
    for_each: \${{ jobs.song-${k}.audio }}
    model: convert-to-wav
    input: {task_id: "\${{ jobs.song-${k}.task_id }}", audio_id: "\${{ item.audio_id }}"}
  - id: song-${k}-video
    model: create-music-video
    input: {task_id: "\${{ jobs.song-${k}.task_id }}", audio_id: "\${{ jobs.song-${k}.audio[0].audio_id }}"}
`;
  }
  return yaml;
}
const CREDITS = 10_000_000;
const MAX_CREDITS = 100_000;

let sb: SandboxProcess;
let round = 0;
let db: TestDatabase;
let pool: Pool;
const t = tempDir('genbatch-chaos-');

beforeAll(() => ensureBuilt(), 120_000);
afterAll(() => t.cleanup());
// Each round: its own sandbox (its task list is the round's), database and output folder.
beforeEach(async () => {
  sb = await startSandboxProcess(['--time-scale', SCALE, '--keys', `${KEY}=${CREDITS}`, '--seed', String(7 + round), '--faults', 'status:500=0.03,status:429=0.03,file:500=0.03']);
  db = await testDatabase();
  pool = openPool(db.url);
}, 60_000);
afterEach(async () => {
  await pool?.end();
  await db?.drop();
  await sb?.stop();
}, 60_000);

/** A worker process, its NDJSON events counted; resolves `exited` with its code and signal. */
interface Worker {
  name: string;
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  warnings: string[];
}

async function balance(): Promise<number> {
  const r = await runCli(['balance', '--json', '--base-url', sb.url], { GENBATCH_API_KEY: KEY });
  return (JSON.parse(r.stdout) as { balance: number }).balance;
}

describe('many workers on PostgreSQL under kills, a pause and faults', () => {
  it.each(Array.from({ length: ROUNDS }, (_, i) => i + 1))(`round %i: ${JOBS} jobs and ${CHAINS} music chains, 4 workers, 2 SIGKILLs with replacements, 1 SIGSTOP past the lease: every invariant holds`, async (n) => {
    round = n;
    const dir = join(t.dir, `round-${round}`);
    mkdirSync(dir);
    const { path: manifest } = mixedManifest(dir, 'x', JOBS, 20);
    appendFileSync(manifest, musicChains(CHAINS));
    const out = join(dir, 'out');
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: sb.url, GENBATCH_STATE: db.url };
    const common = ['--time-scale', SCALE, '--concurrency', '4', '--yes', '--json'];
    const before = await balance();
    let events = 0;
    const waiters: Array<{ at: number; go: () => void }> = [];
    const reached = (n: number) => new Promise<void>((go) => (events >= n ? go() : waiters.push({ at: n, go })));
    const workers: Worker[] = [];
    const start = (name: string, args: string[]): Worker => {
      const child = spawnCli(args, env);
      const w: Worker = { name, child, exited: new Promise((r) => child.on('exit', (code, signal) => r({ code, signal }))), warnings: [] };
      let rest = '';
      child.stdout!.on('data', (d: Buffer) => {
        const lines = (rest + d.toString()).split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) {
          if (!line.startsWith('{')) continue;
          const e = JSON.parse(line) as { type: string; message?: string };
          if (e.type === 'warning') w.warnings.push(e.message ?? '');
          if (e.type !== 'job') continue;
          events++;
          for (const x of waiters.filter((x) => events >= x.at)) {
            waiters.splice(waiters.indexOf(x), 1);
            x.go();
          }
        }
      });
      child.stderr!.resume();
      workers.push(w);
      return w;
    };
    const work = (name: string) => start(name, ['work', '--until-empty', ...common]);

    start('run', ['run', manifest, '--out', out, '--max-credits', String(MAX_CREDITS), ...common]);
    await reached(1); // synced: the run is in the database
    for (const n of ['w1', 'w2', 'w3']) work(n);
    // Kills first, then the pause (the run may be near its end by the time a 7 s pause is over).
    await reached(Math.round(JOBS * 0.3));
    workers[1]!.child.kill('SIGKILL');
    work('w4');
    await reached(Math.round(JOBS * 0.6));
    workers[3]!.child.kill('SIGKILL');
    work('w5');
    await reached(Math.round(JOBS * 0.9));
    const paused = workers[2]!;
    paused.child.kill('SIGSTOP');
    await new Promise((r) => setTimeout(r, 7_000)); // past its 5 s lease: its jobs are taken over meanwhile
    paused.child.kill('SIGCONT');
    const ends = await Promise.all(workers.map((w) => w.exited));
    const codes = ends.map((e) => e.code);
    // Both kills landed on running workers.
    expect([ends[1]!.signal, ends[3]!.signal]).toEqual(['SIGKILL', 'SIGKILL']);

    const jobs = (await pool.query<{ id: string; state: string; task_id: string | null; last_error: string | null }>('SELECT id, state, task_id, last_error FROM jobs')).rows;
    // The mixed jobs, 3 per chain and the for_each children of each song's tracks.
    expect(jobs.length).toBeGreaterThanOrEqual(JOBS + 3 * CHAINS);
    const uncertain = jobs.filter((j) => j.state === 'uncertain');
    // Done or uncertain; a chain's job skipped only because a job it needs ended uncertain.
    const skipped = jobs.filter((j) => j.state === 'skipped');
    expect(jobs.filter((j) => j.state !== 'done' && j.state !== 'uncertain' && j.state !== 'skipped')).toEqual([]);
    for (const j of skipped) expect(j.last_error ?? '', j.id).toMatch(/uncertain/);
    // Workers not killed end 0, or 4 with uncertain jobs.
    for (const [i, code] of codes.entries()) if (i !== 1 && i !== 3) expect([0, 4], workers[i]!.name).toContain(code);
    const ids = jobs.map((j) => j.task_id).filter((x): x is string => x !== null);
    expect(new Set(ids).size).toBe(ids.length);
    const serverTasks = new Set((await sb.tasks()).map((x) => x.task_id));
    for (const id of ids) expect(serverTasks.has(id)).toBe(true);
    expect(serverTasks.size - ids.length).toBeLessThanOrEqual(uncertain.length);
    const stats = await sb.stats();
    expect(stats.uploads.refused ?? 0).toBe(0);
    const charged = before - (await balance());
    expect(charged).toBeLessThanOrEqual(MAX_CREDITS);
    const files = (await pool.query<{ path: string; size: number; sha256: string; worker: string | null }>(`SELECT path, size, sha256, worker FROM files WHERE state = 'done'`)).rows;
    expect(files.length).toBeGreaterThanOrEqual(jobs.length - uncertain.length - skipped.length);
    for (const f of files) {
      const buf = readFileSync(join(out, f.path));
      expect(buf.length, f.path).toBe(f.size);
      expect(createHash('sha256').update(buf).digest('hex'), f.path).toBe(f.sha256);
      expect(f.worker).not.toBeNull();
    }
    expect(findFiles(out, (n) => n.endsWith('.part') || n.includes('.tmp'))).toEqual([]);
    // The paused worker, woken past its lease, wrote nothing about the jobs it had held: each such write refused.
    const refused = paused.warnings.filter((m) => m.includes('another worker holds it now') || m.includes('leases ran out'));
    expect(refused.length).toBeGreaterThanOrEqual(1);
    console.log(
      `chaos test, round ${round}: ${jobs.length} jobs (${CHAINS} music chains), ${uncertain.length} uncertain, ${skipped.length} skipped, ${serverTasks.size} tasks, charged ${charged}, uploads ${JSON.stringify(stats.uploads)}, ` +
        `faults ${JSON.stringify(stats.faults_injected)}, paused worker: ${refused.length} write(s) refused or leases lost, exit codes ${JSON.stringify(codes)}`,
    );
  }, 300_000);
});
