import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * Downloads are named by kind and index inside the job's folder (image-1.png), not by the server's
 * name (a task hash); result.json keeps the server's name and URL. A resumed run keeps the names
 * recorded in the state (written by an earlier genbatch that used the server's names).
 */
const KEY = 'sk-file-names-0123456789';
const SCALE = '0.001';
let sb: Sandbox;
const t = tempDir('genbatch-file-names-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 9 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

function manifest(name: string, lines: string[]): string {
  const path = join(t.dir, `${name}.yaml`);
  writeFileSync(path, ['jobs:', ...lines].join('\n') + '\n');
  return path;
}

interface ResultJson {
  files: Array<{ name: string; server_name: string | null; path: string; url: string | null }>;
}

const run = (m: string, out: string) => runCli(['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });

describe('result file names', () => {
  it('a new run names image and video files image-1.png, video-1.mp4; result.json keeps the server name and URL', async () => {
    const out = join(t.dir, 'out-new');
    const m = manifest('fresh', [
      '  - id: pics',
      '    model: alpha-image-2',
      '    input:',
      '      prompt: "a lighthouse at dusk"',
      '  - id: clip',
      '    model: clip-2.3',
      '    input:',
      '      prompt: "waves on rocks"',
    ]);
    const r = await run(m, out);
    expect(r.code, r.stderr).toBe(0);
    expect(readdirSync(join(out, 'pics')).sort()).toEqual(['image-1.png', 'result.json']);
    expect(readdirSync(join(out, 'clip')).filter((n) => n !== 'result.json')).toEqual(['video-1.mp4']);
    const result = JSON.parse(readFileSync(join(out, 'pics', 'result.json'), 'utf8')) as ResultJson;
    expect(result.files[0]!.name).toBe('image-1.png');
    expect(result.files[0]!.path).toBe('pics/image-1.png');
    expect(result.files[0]!.server_name).toMatch(/\.png$/);
    expect(result.files[0]!.server_name).not.toBe('image-1.png');
    expect(result.files[0]!.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//);
  }, 60_000);

  it('a resumed run keeps a file name already recorded in the state (an older run named it after the server)', async () => {
    const out = join(t.dir, 'out-resumed');
    const m = manifest('resumed', ['  - id: kept', '    model: alpha-image-2', '    input:', '      prompt: "a harbour at night"']);
    // 40 failed fetches: the job is left downloading, its file recorded but not on disk.
    sb.script('file', Array.from({ length: 40 }, () => '500'));
    const first = await run(m, out);
    expect(first.code).toBe(7); // left downloading for the next run
    expect(readJobs(join(out, 'state.db')).map((j) => j.state)).toEqual(['downloading']);
    // What a state written before the new naming holds: the server's name.
    const db = new Database(join(out, 'state.db'));
    db.prepare(`UPDATE files SET name = 'lighthouse-62b8fc-1.png' WHERE job_id = 'kept'`).run();
    db.close();
    const second = await run(m, out);
    expect(second.code, second.stderr).toBe(0);
    expect(existsSync(join(out, 'kept', 'lighthouse-62b8fc-1.png'))).toBe(true);
    expect(existsSync(join(out, 'kept', 'image-1.png'))).toBe(false);
    const result = JSON.parse(readFileSync(join(out, 'kept', 'result.json'), 'utf8')) as ResultJson;
    expect(result.files.map((f) => f.path)).toEqual(['kept/lighthouse-62b8fc-1.png']);
  }, 60_000);
});
