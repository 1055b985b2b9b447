import type { ChildProcess } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { ROOT, spawnCli } from './cli.js';
import { mixedManifest } from './mixed-manifest.js';
import type { SandboxProcess } from './sandbox-process.js';
import { checkFiles, findFiles, integrity, readJobs } from './verify.js';

/**
 * The chaos test's parts (test/chaos.workers.test.ts, bench/workers.mjs): its manifest, CLI processes
 * watched by their NDJSON events (to kill or pause them at progress points), and the checks made
 * after a run, on a SQLite state file (a PostgreSQL run is first copied into one by its snapshot).
 */

/** Prices (credits per request) for the models the catalogue gives none: what the sandbox charges, so that the known estimate is the whole charge. */
const PRICING: Record<string, number> = {
  'dream-4': 8,
  'generate-music': 24,
  'extend-music': 24,
  'convert-to-wav': 1,
  'separate-vocals': 20,
  'stem-split': 300,
  'get-timestamped-lyrics': 1,
  'generate-music-cover': 4,
  'create-music-video': 5,
  'generate-persona': 2,
};

/** Jobs of manifests/music-chain.yaml as written there (its for_each jobs make 2 children each at run time). */
export const CHAIN_JOBS = 10;

/**
 * A YAML manifest of `jobs` jobs: mixedManifest's cycle (plain images, edits of `refs` distinct local
 * PNGs, which are uploaded, dream-4 with n: 2, generate-music, motion video) for all but the last ten,
 * then the full music chain of manifests/music-chain.yaml (a song, stem-split and convert-to-wav per
 * variation, vocals, lyrics, cover, music video, extension, persona, a second song with it), with a
 * `pricing:` block for every model the catalogue gives no price.
 */
export function chaosManifest(dir: string, jobs = 300, refs = 20): { path: string; jobs: number } {
  const mixed = mixedManifest(dir, 'chaos', jobs - CHAIN_JOBS, refs);
  const chain = readFileSync(join(ROOT, 'manifests', 'music-chain.yaml'), 'utf8');
  const chainJobs = chain.slice(chain.indexOf('\njobs:\n') + '\njobs:\n'.length);
  const pricing = ['pricing:', ...Object.entries(PRICING).map(([m, c]) => `  ${m}: ${c}`)].join('\n');
  writeFileSync(mixed.path, `${pricing}\n${readFileSync(mixed.path, 'utf8')}${chainJobs}`);
  return { path: mixed.path, jobs };
}

/** One NDJSON event of `--json`. */
export interface CliEvent {
  type: string;
  [k: string]: unknown;
}

/** A genbatch CLI child process whose NDJSON events are kept, to act on them as they come. */
export class CliProcess {
  readonly child: ChildProcess;
  readonly events: CliEvent[] = [];
  stdout = '';
  stderr = '';
  /** Resolves with how the process ended. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private rest = '';
  private waiters: Array<{ test: (e: CliEvent) => boolean; k: number; resolve: (hit: boolean) => void }> = [];

  constructor(args: string[], env: Record<string, string>) {
    this.child = spawnCli(args, env);
    this.child.stdout!.on('data', (d: Buffer) => this.take(d.toString()));
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString()));
    this.exited = new Promise((resolve) =>
      this.child.on('close', (code, signal) => {
        for (const w of this.waiters) w.resolve(false);
        this.waiters = [];
        resolve({ code, signal });
      }),
    );
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Resolves true at the k-th event (counted from the start) that passes `test`, false if the process ends first. */
  waitFor(test: (e: CliEvent) => boolean, k = 1): Promise<boolean> {
    if (this.events.filter(test).length >= k) return Promise.resolve(true);
    if (!this.running) return Promise.resolve(false);
    return new Promise((resolve) => this.waiters.push({ test, k, resolve }));
  }

  signal(sig: NodeJS.Signals): boolean {
    return this.running && this.child.kill(sig);
  }

  private take(text: string): void {
    this.stdout += text;
    const lines = (this.rest + text).split('\n');
    this.rest = lines.pop() ?? '';
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      let e: CliEvent;
      try {
        e = JSON.parse(line) as CliEvent;
      } catch {
        continue;
      }
      this.events.push(e);
      this.waiters = this.waiters.filter((w) => {
        if (this.events.filter(w.test).length < w.k) return true;
        w.resolve(true);
        return false;
      });
    }
  }
}

/** A job's progress event that shows the work is under way: a submit sent or a file written. */
export const progressEvent = (e: CliEvent): boolean => e.type === 'sending' || e.type === 'file';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const randInt = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1));

/** The sandbox key's balance now (asked again while an injected fault answers instead). */
export async function balanceOf(sb: SandboxProcess): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      const r = await fetch(`${sb.url}/api/user/balance`, { headers: { authorization: `Bearer ${sb.key}` } });
      if (r.ok) return ((await r.json()) as { data: { balance: number } }).data.balance;
      await r.body?.cancel();
    } catch (err) {
      if (attempt >= 20) throw err;
    }
    if (attempt >= 20) throw new Error('the sandbox did not answer the balance in 20 tries');
  }
}

/**
 * The skipped jobs that wait, directly or through other such jobs, for an uncertain job (a music chain whose
 * song's submit was lost): their parents' outcome is unknown, so they are not sent, which is right.
 */
function skippedBehindUncertain(statePath: string): Set<string> {
  const db = new Database(statePath, { readonly: true });
  try {
    const state = new Map((db.prepare('SELECT id, state FROM jobs').all() as Array<{ id: string; state: string }>).map((r) => [r.id, r.state]));
    const links = db.prepare('SELECT job_id, parent_id FROM job_links').all() as Array<{ job_id: string; parent_id: string }>;
    const ok = new Set<string>();
    for (let grew = true; grew; ) {
      grew = false;
      for (const l of links) {
        if (ok.has(l.job_id) || state.get(l.job_id) !== 'skipped') continue;
        if (state.get(l.parent_id) === 'uncertain' || ok.has(l.parent_id)) {
          ok.add(l.job_id);
          grew = true;
        }
      }
    }
    return ok;
  } finally {
    db.close();
  }
}

/** What the checks found after a chaos run. */
export interface ChaosVerdict {
  jobs: number;
  /** Jobs by state. */
  states: Record<string, number>;
  /** Jobs neither `done` nor `uncertain` (nor `skipped` behind an uncertain job): "id: state (last error)". */
  unfinished: string[];
  /** Task ids recorded for two jobs or more. */
  sharedTaskIds: string[];
  /** Task ids recorded in the state that the sandbox never created. */
  unknownTaskIds: string[];
  /** Tasks at the sandbox that no job records (each from a submit whose answer was lost: its job is uncertain). */
  orphanTasks: number;
  /** Uncertain jobs without a task id: the most orphan tasks there may be if no task was created twice. */
  uncertainWithoutTask: number;
  tasksAtService: number;
  /** Done files compared with their recorded size and sha256. */
  filesChecked: number;
  /** Temporary files left in the output folder (`.part`, `.tmp`). */
  tempFiles: string[];
  uploads: Record<string, number>;
  /** Credits the sandbox charged the key over the run (refunds deducted). */
  charged: number;
  integrity: string;
}

/**
 * Check a finished chaos run in the SQLite state `statePath` (a PostgreSQL run: its snapshot) against the
 * output folder and the sandbox that served it. `startCredits`: the key's balance before the run.
 * Throws when a recorded file is missing or differs from its size or sha256 (checkFiles).
 */
export async function verifyChaos(statePath: string, outDir: string, sb: SandboxProcess, startCredits: number): Promise<ChaosVerdict> {
  const jobs = readJobs(statePath);
  const states: Record<string, number> = {};
  for (const j of jobs) states[j.state] = (states[j.state] ?? 0) + 1;
  const skippedForUncertain = skippedBehindUncertain(statePath);
  const owners = new Map<string, number>();
  for (const j of jobs) if (j.task_id !== null) owners.set(j.task_id, (owners.get(j.task_id) ?? 0) + 1);
  const atService = new Set((await sb.tasks()).map((t) => t.task_id));
  const stats = await sb.stats();
  return {
    jobs: jobs.length,
    states,
    unfinished: jobs.filter((j) => j.state !== 'done' && j.state !== 'uncertain' && !skippedForUncertain.has(j.id)).map((j) => `${j.id}: ${j.state} (${j.last_error ?? ''})`),
    sharedTaskIds: [...owners].filter(([, n]) => n > 1).map(([id]) => id),
    unknownTaskIds: [...owners.keys()].filter((id) => !atService.has(id)),
    orphanTasks: [...atService].filter((id) => !owners.has(id)).length,
    uncertainWithoutTask: jobs.filter((j) => j.state === 'uncertain' && j.task_id === null).length,
    tasksAtService: atService.size,
    filesChecked: checkFiles(statePath, outDir),
    tempFiles: findFiles(outDir, (n) => n.startsWith('.') && (n.endsWith('.part') || n.endsWith('.tmp'))),
    uploads: stats.uploads,
    charged: startCredits - (await balanceOf(sb)),
    integrity: integrity(statePath),
  };
}
