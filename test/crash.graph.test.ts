import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STEM_SPLIT_KEYS } from '../src/models/music/index.js';
import { ROOT, ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { startSandboxProcess, type SandboxProcess } from './helpers/sandbox-process.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, findFiles, integrity, readJobs } from './helpers/verify.js';

/**
 * The full music chain (manifests/music-chain.yaml: a song, stem-split and
 * convert-to-wav for each variation, separate-vocals, timestamped lyrics,
 * covers, a music video, an extension, a persona and a second song with it),
 * run against a sandbox in another process, killed with SIGKILL twice at
 * random moments, resumed, and finished: every file present, every task
 * created exactly once.
 */
const SCALE = '0.01';
const KILLS = process.env.GENBATCH_SLOW === '1' ? 12 : 2;
const MANIFEST = join(ROOT, 'manifests', 'music-chain.yaml');

let sb: SandboxProcess;
const t = tempDir('genbatch-crash-graph-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandboxProcess(['--time-scale', SCALE, '--keys', 'sk-chain-key=1000000']);
}, 60_000);
afterAll(async () => {
  await sb?.stop();
  t.cleanup();
});

function killAfter(ms: number, args: string[], env: Record<string, string>): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => {
    const child = spawnCli(args, env);
    child.stdout!.resume();
    child.stderr!.resume();
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal });
    });
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
  it(`survives ${KILLS} SIGKILLs: every job done, every file present, every task created once`, async () => {
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const args = ['run', MANIFEST, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--concurrency', '3', '--json'];
    const env = { GENBATCH_API_KEY: sb.key };
    let killed = 0;
    const kills: number[] = [];
    for (let i = 0; i < KILLS; i++) {
      const ms = 300 + Math.floor(Math.random() * (KILLS > 2 ? 700 : 1500));
      kills.push(ms);
      const r = await killAfter(ms, args, env);
      if (r.signal === 'SIGKILL') killed++;
      else if (r.code !== 0 && r.code !== 4) throw new Error(`run exited ${String(r.code)} between kills`);
    }
    const last = await runCli(args, env);
    expect([0, 4], last.stderr).toContain(last.code);

    const jobs = readJobs(state);
    const uncertain = jobs.filter((j) => j.state === 'uncertain').map((j) => j.id);
    // 10 manifest jobs (two of them for_each) + 2 stem-split and 2 convert-to-wav children.
    expect(jobs).toHaveLength(14);
    if (uncertain.length === 0) {
      expect(last.code).toBe(0);
      expect(jobs.filter((j) => j.state !== 'done')).toEqual([]);
    } else {
      // A kill between a submit's intent and its answer: the job is uncertain (never resubmitted blindly), its descendants skipped naming it.
      for (const j of jobs.filter((x) => x.state === 'skipped')) expect(j.last_error).toMatch(/^skipped because job \S+ is (uncertain|skipped)/);
      expect(jobs.filter((j) => !['done', 'uncertain', 'skipped'].includes(j.state))).toEqual([]);
    }

    // Every task exactly once: the state's task ids are unique and are exactly the sandbox's tasks (plus at most one per uncertain job).
    const ids = jobs.map((j) => j.task_id).filter((x): x is string => x !== null);
    expect(new Set(ids).size).toBe(ids.length);
    const server = (await sb.tasks()).map((x) => x.task_id);
    expect(new Set(server).size).toBe(server.length);
    for (const id of ids) expect(server).toContain(id);
    expect(server.length - ids.length).toBeGreaterThanOrEqual(0);
    expect(server.length - ids.length).toBeLessThanOrEqual(uncertain.length);
    if (uncertain.length === 0) expect(server.length).toBe(12);

    // Files: recorded ones intact; 12 stems per stem-split; lyrics as JSON and LRC.
    expect(checkFiles(state, out)).toBeGreaterThan(0);
    for (const j of jobs.filter((x) => x.state === 'done' && x.id.startsWith('stems.'))) {
      const stems = filesOf(state, j.id).filter((f) => f.url !== null && f.type !== 'file');
      expect(stems.map((f) => f.type).sort()).toEqual(STEM_SPLIT_KEYS.map((k) => k.replace(/_url$/, '')).sort());
      for (const f of stems) expect(existsSync(join(out, f.path!))).toBe(true);
    }
    if (jobs.find((j) => j.id === 'lyrics')?.state === 'done') {
      expect(JSON.parse(readFileSync(join(out, 'lyrics', 'timestamped-lyrics.json'), 'utf8'))).toHaveProperty('aligned_words');
      expect(readFileSync(join(out, 'lyrics', 'lyrics.lrc'), 'utf8')).toMatch(/^\[\d\d:\d\d\.\d\d\]\S/);
    }
    if (jobs.find((j) => j.id === 'second-song')?.state === 'done') {
      const sent = JSON.parse(readFileSync(join(out, 'second-song', 'result.json'), 'utf8')) as { input: { persona_id: string; title: string } };
      const persona = readFileSync(join(out, 'persona', 'persona_id.txt'), 'utf8').trim();
      expect(sent.input.persona_id).toBe(persona);
      expect(sent.input.title).toBe(`Tide Tables (sung by ${persona})`);
    }
    expect(findFiles(out, (n) => n.endsWith('.part'))).toEqual([]);
    expect(integrity(state)).toBe('ok');
    console.log(`music chain crash test: kills at ${kills.join(', ')} ms, ${killed} landed mid-run, ${uncertain.length} uncertain, ${server.length} tasks for ${ids.length} task ids`);
  }, 300_000);
});
