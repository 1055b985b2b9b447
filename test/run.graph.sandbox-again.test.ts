import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * `--sandbox` starts a new in-process sandbox each time. A run killed once the parent of a job graph
 * was done (its children being sent) leaves results whose task id and audio ids only the earlier,
 * now gone, sandbox knew: the rerun makes that parent again (and what was made from it) instead of
 * sending its children with references the new sandbox answers with 404 (task not found).
 */
const t = tempDir('genbatch-run-graph-sandbox-again-');
beforeAll(() => ensureBuilt());
afterAll(() => t.cleanup());

const MANIFEST = `pricing: {generate-music: 10, convert-to-wav: 1, generate-music-cover: 2}
jobs:
  - id: song
    model: generate-music
    input: {custom_mode: false, instrumental: false, prompt: "a calm harbour song"}
  - id: wav
    for_each: \${{ jobs.song.audio }}
    model: convert-to-wav
    input: {task_id: "\${{ jobs.song.task_id }}", audio_id: "\${{ item.audio_id }}"}
  - id: cover
    model: generate-music-cover
    input: {task_id: "\${{ jobs.song.task_id }}"}
`;

/** Run until the first NDJSON event matching `re`, then SIGKILL. */
function killAfterEvent(argv: string[], re: RegExp): Promise<void> {
  return new Promise((resolveP, reject) => {
    const child = spawnCli([...argv, '--json'], { GENBATCH_API_KEY: 'unused' });
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      if (re.test(buf)) child.kill('SIGKILL');
    });
    child.on('error', reject);
    child.on('close', () => resolveP());
  });
}

describe('--sandbox again after a kill, with a job graph', () => {
  it('the parent done in the earlier sandbox is made again; its children are sent with the new results (exit 0)', async () => {
    const manifest = join(t.dir, 'chain.yaml');
    writeFileSync(manifest, MANIFEST);
    const out = join(t.dir, 'out');
    const state = join(out, 'state.db');
    const args = ['run', manifest, '--sandbox', '--out', out, '--yes'];
    await killAfterEvent(args, /"id":"song","from":"downloading","to":"done"/);
    expect(readJobs(state).find((j) => j.id === 'song')!.state).toBe('done');
    expect(readJobs(state).some((j) => j.state === 'pending' || j.state === 'submitting' || j.state === 'submitted')).toBe(true);
    const r = await runCli(args, { GENBATCH_API_KEY: 'unused' });
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    const jobs = readJobs(state);
    expect(jobs.map((j) => `${j.id}:${j.state}`).sort()).toEqual(['cover:done', 'song:done', 'wav.0:done', 'wav.1:done', 'wav:done']);
    expect(jobs.find((j) => j.id === 'song')!.attempts).toBe(2);
    expect(r.stderr).toMatch(/1 finished job\(s\) whose results pending jobs use were made in the sandbox of an earlier run/);
    // A run after that changes nothing.
    const again = await runCli(args, { GENBATCH_API_KEY: 'unused' });
    expect(again.code).toBe(0);
    expect(readJobs(state).find((j) => j.id === 'song')!.attempts).toBe(2);
  }, 120_000);
});
