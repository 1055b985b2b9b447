import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { pageRows } from './helpers/page.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, readJobs } from './helpers/verify.js';

/**
 * `genbatch run` cases found by using the CLI hard (child process, sandbox in this process, real files):
 * reports that must follow the state even when the run that changed it never wrote them; flags
 * checked before anything is recorded or sent.
 */
const SCALE = '0.005';
const KEY = 'sk-run-review-0123456789';
/** Scripted `slow` steps hold a request this long (real ms). */
const SLOW_MS = 5000;

let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: Number(SCALE), seed: 41, slowMs: SLOW_MS });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-review-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

const baseArgs = (manifest: string, out: string) => ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out];
const env = { GENBATCH_API_KEY: KEY };

interface Ev {
  type: string;
  to?: string;
}

/** Spawn a run with --json; `onEvent` sees every NDJSON event as it comes. */
function spawnJson(args: string[], onEvent: (e: Ev, child: ReturnType<typeof spawnCli>) => void): Promise<{ code: number | null; signal: string | null }> {
  return new Promise((resolve) => {
    const child = spawnCli([...args, '--json'], env);
    let rest = '';
    child.stdout!.on('data', (d: Buffer) => {
      const lines = (rest + d.toString()).split('\n');
      rest = lines.pop() ?? '';
      for (const l of lines) if (l.startsWith('{')) onEvent(JSON.parse(l) as Ev, child);
    });
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
}

const reportCounts = (out: string) => (JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { summary: { counts: Record<string, number> } }).summary.counts;

describe('genbatch run: reports follow the state', () => {
  it('a run killed after its jobs finished but before its reports: the next run, which changes nothing, still rewrites them', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'stale.yaml'), 3, 'stale');
    // Run 1: stopped (SIGINT) at its estimate; its reports show no job done (on a loaded machine the first
    // submit may have left before the signal: that job is then submitted, the others pending).
    const first = await spawnJson([...baseArgs(manifest, w.out), '--concurrency', '1'], (e, child) => {
      if (e.type === 'estimate') child.kill('SIGINT');
    });
    expect(first.code).toBe(130);
    const stale = reportCounts(w.out);
    expect(stale.done ?? 0).toBe(0);
    expect(stale.pending).toBeGreaterThanOrEqual(2);
    // Run 2: every job done; the balance read after the run is held, and the run is SIGKILLed meanwhile.
    sb.script('balance', ['ok', 'slow']);
    let done = 0;
    const second = await spawnJson(baseArgs(manifest, w.out), (e, child) => {
      if (e.type === 'job' && e.to === 'done' && ++done === 3) child.kill('SIGKILL');
    });
    expect(second.signal).toBe('SIGKILL');
    expect(readJobs(w.state).map((j) => j.state)).toEqual(['done', 'done', 'done']);
    expect(reportCounts(w.out)).toEqual(stale); // still the reports of run 1
    // Run 3 changes no job, but the reports on disk do not show the state: they are written.
    const third = await runCli(baseArgs(manifest, w.out), env);
    expect(third.code).toBe(0);
    expect(third.stdout).not.toContain('nothing changed');
    expect(reportCounts(w.out)).toMatchObject({ pending: 0, done: 3 });
    // Run 4: now nothing changed and the reports are current.
    const fourth = await runCli(baseArgs(manifest, w.out), env);
    expect(fourth.code).toBe(0);
    expect(fourth.stdout).toContain('nothing changed');
  });
});

describe('genbatch run: flags checked before anything is done', () => {
  it.each([
    [['--callback-url', 'notaurl', '--listen', '127.0.0.1:0'], '--callback-url expects an absolute http:// or https:// URL, got "notaurl"'],
    [['--callback-url', 'ftp://example.com/hook', '--listen', '127.0.0.1:0'], '--callback-url expects an absolute http:// or https:// URL'],
    [['--listen', '127.0.0.1:99999'], '--listen expects HOST:PORT'],
  ])('%j: exit 2 naming the flag, no state file, nothing sent', async (flags, message) => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'flags.yaml'), 2, 'flag');
    const before = sb.stats();
    const r = await runCli([...baseArgs(manifest, w.out), ...flags], env);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(message);
    expect(existsSync(w.state)).toBe(false);
    const after = sb.stats();
    expect(after.tasks_total).toBe(before.tasks_total);
    expect(after.requests.balance ?? 0).toBe(before.requests.balance ?? 0);
  });
});

describe('genbatch report --out DIR: another folder than the run output', () => {
  it("report.html written elsewhere links the run's files from there (every src and href leads to an existing file); two runs in one state file are refused", async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'gallery.yaml'), 2, 'gal');
    expect((await runCli(baseArgs(manifest, w.out), env)).code).toBe(0);
    const elsewhere = join(w.dir, 'shared reports', 'today');
    const r = await runCli(['report', manifest, '--state', w.state, '--out', elsewhere], env);
    expect(r.code).toBe(0);
    const html = readFileSync(join(elsewhere, 'report.html'), 'utf8');
    const links = pageRows(html).rows.flatMap((r) => r.files.map((f) => f.href!));
    expect(links.length).toBe(2); // per job: its image (the card's img, its link and its file list entry use it)
    for (const link of links) {
      const file = join(elsewhere, ...link.split('/').map(decodeURIComponent));
      expect(existsSync(file), `${link} from ${elsewhere}`).toBe(true);
    }
    // A state file holding the runs of two manifests: one --out folder cannot take both sets of reports.
    const other = imageManifest(join(w.dir, 'second.yaml'), 1, 'sec');
    expect((await runCli([...baseArgs(other, join(w.dir, 'out2')), '--state', w.state], env)).code).toBe(0);
    const both = join(w.dir, 'both');
    const refused = await runCli(['report', '--state', w.state, '--out', both], env);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('the state file holds 2 runs');
    expect(existsSync(both)).toBe(false);
    const one = await runCli(['report', other, '--state', w.state, '--out', both], env);
    expect(one.code).toBe(0);
    expect((JSON.parse(readFileSync(join(both, 'report.json'), 'utf8')) as { summary: { manifest: string } }).summary.manifest).toBe(other);
    // In the output folder itself, links stay relative to it.
    expect(pageRows(readFileSync(join(w.out, 'report.html'), 'utf8')).rows[0]!.files[0]!.href).toMatch(/^gal-0000\/image-1\.(png|jpg|jpeg)$/);
  });
});

describe('genbatch run --uncertain resubmit', () => {
  it('an uncertain job removed from the manifest is not sent again (it stays uncertain, with a warning); the others are left as they are', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'unc.yaml'), 3, 'unc');
    sb.script('submit', ['500-after']); // the first submit creates its task, then answers 500: uncertain
    const first = await runCli([...baseArgs(manifest, w.out), '--concurrency', '1'], env);
    expect(first.code).toBe(4);
    expect(readJobs(w.state).map((j) => [j.id, j.state])).toEqual([['unc-0000', 'uncertain'], ['unc-0001', 'done'], ['unc-0002', 'done']]);
    // The user removes the job whose outcome is unknown.
    const text = readFileSync(manifest, 'utf8').split('\n');
    const at = text.findIndex((l) => l.includes('id: unc-0000'));
    text.splice(at, 4);
    writeFileSync(manifest, text.join('\n'));
    const tasks0 = sb.stats().tasks_total;
    const again = await runCli([...baseArgs(manifest, w.out), '--uncertain', 'resubmit'], env);
    expect(sb.stats().tasks_total).toBe(tasks0);
    expect(readJobs(w.state).map((j) => [j.id, j.state])).toEqual([['unc-0000', 'uncertain'], ['unc-0001', 'done'], ['unc-0002', 'done']]);
    expect(again.stderr).toContain('1 uncertain job(s) are no longer in the manifest: not resubmitted');
    expect(again.code).toBe(4);
    // Once more with the same manifest (no sync needed to know it is unchanged): still not sent.
    const third = await runCli([...baseArgs(manifest, w.out), '--uncertain', 'resubmit'], env);
    expect(sb.stats().tasks_total).toBe(tasks0);
    expect(third.code).toBe(4);
  });

  it('an uncertain job whose spec changed is resubmitted with the new spec, once (not the old one, then the new one)', async () => {
    const w = work();
    const manifest = join(w.dir, 'unc2.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: u1\n    model: alpha-image-2\n    input: {prompt: "old prompt"}\n');
    sb.script('submit', ['500-after']);
    expect((await runCli(baseArgs(manifest, w.out), env)).code).toBe(4);
    expect(readJobs(w.state)[0]!.state).toBe('uncertain');
    writeFileSync(manifest, 'jobs:\n  - id: u1\n    model: alpha-image-2\n    input: {prompt: "new prompt"}\n');
    const tasks0 = sb.stats().tasks_total;
    const again = await runCli([...baseArgs(manifest, w.out), '--uncertain', 'resubmit'], env);
    expect(again.code).toBe(0);
    const result = JSON.parse(readFileSync(join(w.out, 'u1', 'result.json'), 'utf8')) as { input: { prompt: string } };
    expect(result.input.prompt).toBe('new prompt');
    // The next run finds it current: nothing more is sent.
    const third = await runCli(baseArgs(manifest, w.out), env);
    expect(third.code).toBe(0);
    expect(sb.stats().tasks_total - tasks0).toBe(1);
  });
});

describe('genbatch run: an output folder that already holds unrelated files', () => {
  it('text results and result.json never replace a file that was there: texts take numbered names, a foreign result.json goes to previous-1/', async () => {
    const w = work();
    const manifest = join(w.dir, 'lyrics.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: lyr\n    model: generate-lyrics\n    input: {prompt: "A song about a lighthouse keeper"}\n');
    const jobDir = join(w.out, 'lyr');
    mkdirSync(jobDir, { recursive: true });
    const mine: Record<string, string> = { 'lyrics-1.txt': 'my own lyrics, not genbatch output\n', 'track-1.json': '{"mine": true}\n', 'result.json': '{"notes": "mine"}\n' };
    for (const [name, text] of Object.entries(mine)) writeFileSync(join(jobDir, name), text);
    const r = await runCli([...baseArgs(manifest, w.out), '--yes'], env);
    expect(r.code).toBe(0);
    // The user's files are untouched (result.json kept in previous-1/).
    expect(readFileSync(join(jobDir, 'lyrics-1.txt'), 'utf8')).toBe(mine['lyrics-1.txt']);
    expect(readFileSync(join(jobDir, 'track-1.json'), 'utf8')).toBe(mine['track-1.json']);
    expect(readFileSync(join(jobDir, 'previous-1', 'result.json'), 'utf8')).toBe(mine['result.json']);
    // The job's own texts are beside them, recorded under the names they got, with their size and sha256.
    const result = JSON.parse(readFileSync(join(jobDir, 'result.json'), 'utf8')) as { job_id: string; files: Array<{ path: string }> };
    expect(result.job_id).toBe('lyr');
    const paths = result.files.map((f) => f.path);
    expect(paths).toContain('lyr/lyrics-1 (2).txt');
    expect(paths).toContain('lyr/track-1 (2).json');
    expect(checkFiles(w.state, w.out)).toBe(paths.length);
    // A rerun changes nothing and moves nothing.
    const again = await runCli([...baseArgs(manifest, w.out), '--yes'], env);
    expect(again.code).toBe(0);
    expect(existsSync(join(jobDir, 'previous-2'))).toBe(false);
  });
});

describe('genbatch run: a spec changed while the job was in flight', () => {
  it('the job finishes the spec it was sent with, and the next run reruns it with the new one (also when the manifest is unchanged since)', async () => {
    const w = work();
    const manifest = join(w.dir, 'edit.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: c1\n    model: alpha-image-2\n    input: {prompt: "old prompt"}\n');
    const sentPrompt = () => (JSON.parse(readFileSync(join(w.out, 'c1', 'result.json'), 'utf8')) as { input: { prompt: string } }).input.prompt;
    // Run 1: stopped once the task exists (submitted, not finished).
    const first = await spawnJson(baseArgs(manifest, w.out), (e, child) => {
      if (e.type === 'job' && e.to === 'submitted') child.kill('SIGINT');
    });
    expect(first.code).toBe(130);
    expect(readJobs(w.state)[0]!.state).toBe('submitted');
    // The user edits the prompt meanwhile. Run 2 finishes the task that was sent (old prompt).
    writeFileSync(manifest, 'jobs:\n  - id: c1\n    model: alpha-image-2\n    input: {prompt: "new prompt"}\n');
    expect((await runCli(baseArgs(manifest, w.out), env)).code).toBe(0);
    expect(sentPrompt()).toBe('old prompt');
    // Run 3, same manifest as run 2: the job is run again with the new prompt.
    const tasks0 = sb.stats().tasks_total;
    const third = await runCli(baseArgs(manifest, w.out), env);
    expect(third.code).toBe(0);
    expect(third.stdout).toContain('1 jobs (0 new, 1 changed, 0 unchanged)');
    expect(sb.stats().tasks_total - tasks0).toBe(1);
    expect(sentPrompt()).toBe('new prompt');
    // Run 4: now it is current; nothing is sent.
    const fourth = await runCli(baseArgs(manifest, w.out), env);
    expect(fourth.stdout).toContain('nothing changed');
    expect(sb.stats().tasks_total - tasks0).toBe(1);
  });
});

describe('genbatch run --sandbox after a killed --sandbox run', () => {
  it('a job removed from the manifest while its task was in the gone sandbox is skipped, not sent again; the others are sent again', async () => {
    const w = work();
    const manifest = imageManifest(join(w.dir, 'gone.yaml'), 3, 'gone');
    let submitted = 0;
    // Slow tasks (time scale 0.5): all three are waited on when the run is killed.
    const first = await spawnJson(['run', manifest, '--sandbox', '--time-scale', '0.5', '--out', w.out], (e, child) => {
      if (e.type === 'job' && e.to === 'submitted' && ++submitted === 3) child.kill('SIGKILL');
    });
    expect(first.signal).toBe('SIGKILL');
    const text = readFileSync(manifest, 'utf8').split('\n');
    text.splice(text.findIndex((l) => l.includes('id: gone-0000')), 4);
    writeFileSync(manifest, text.join('\n'));
    const again = await runCli(['run', manifest, '--sandbox', '--time-scale', SCALE, '--out', w.out, '--json'], env);
    expect(again.code).toBe(0);
    const jobs = readJobs(w.state);
    expect(jobs.map((j) => [j.id, j.state])).toEqual([['gone-0000', 'skipped'], ['gone-0001', 'done'], ['gone-0002', 'done']]);
    expect(jobs[0]!.attempts).toBe(1); // sent once, by the first run only
    expect(again.stdout).toContain('2 job(s) were in flight in the sandbox of an earlier run');
  });
});
