import Database from 'better-sqlite3';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * `genbatch status` over a state file edited by hand: a job id or an error holding control characters (ESC, CR,
 * LF, a tab) is printed as one visible value, as genbatch prints a server's text: it can neither drive the
 * terminal nor forge a line or a column of the table. So are the ids `genbatch mark` prints and what report.md
 * shows (a file read in a terminal too). A finished run against the in-process sandbox, then edited.
 */
const KEY = 'sk-status-hostile-0123456789abcdef';
let sb: Sandbox;
const t = tempDir('genbatch-status-hostile-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.001, seed: 11 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

describe('genbatch status over a hand-edited state', () => {
  it('prints ids and errors with control characters as visible text, one line per job', async () => {
    const out = join(t.dir, 'out');
    const m = imageManifest(join(t.dir, 'm.yaml'), 2);
    const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.001', '--out', out], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    const hostileId = 'img-0001\u001b[31m\u001b]0;title\u0007\r\n  forged\tdone';
    const db = new Database(join(out, 'state.db'));
    try {
      db.prepare(`UPDATE jobs SET id = ?, last_error = ? WHERE id = 'img-0001'`).run(hostileId, 'broken\u001b[2J\r\nsecond line');
      db.prepare(`UPDATE files SET job_id = ? WHERE job_id = 'img-0001'`).run(hostileId);
    } finally {
      db.close();
    }
    const st = await runCli(['status', '--out', out, '--jobs']);
    expect(st.code, st.stderr).toBe(0);
    expect(st.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/);
    const lines = st.stdout.split('\n');
    const header = lines.findIndex((l) => l.startsWith('  id\t'));
    const rows = lines.slice(header + 1).filter((l) => l !== '');
    expect(rows).toHaveLength(2);
    const hostile = rows.find((l) => l.startsWith('  img-0001'))!;
    expect(hostile.split('\t')).toHaveLength(6);
    expect(hostile).toContain('\\u001b[31m');
    expect(hostile).toContain('broken\\u001b[2J\\u000d\\u000asecond line');
  }, 60_000);

  it('mark prints the ids it marked, and report.md shows ids and errors, without control characters', async () => {
    const out = join(t.dir, 'out-md');
    const m = imageManifest(join(t.dir, 'm-md.yaml'), 2);
    const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.001', '--out', out], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    const marked = 'img-0000\u001b[2J';
    const db = new Database(join(out, 'state.db'));
    try {
      db.prepare(`UPDATE jobs SET id = ?, state = 'failed', last_error = ? WHERE id = 'img-0001'`).run('img-0001\u001b]0;title\u0007', 'broken\u001b[2J');
      db.prepare(`DELETE FROM files WHERE job_id = 'img-0001'`).run();
      db.prepare(`UPDATE jobs SET id = ? WHERE id = 'img-0000'`).run(marked);
      db.prepare(`UPDATE files SET job_id = ? WHERE job_id = 'img-0000'`).run(marked);
    } finally {
      db.close();
    }
    const mk = await runCli(['mark', '--out', out, '--approve', 'img-*']);
    expect(mk.code, mk.stderr).toBe(0);
    expect(mk.stdout).toContain('img-0000\\u001b[2J');
    expect(mk.stdout).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/);
    const md = readFileSync(join(out, 'report.md'), 'utf8');
    expect(md).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f]/);
    expect(md).toContain('img-0001\\u001b]0;title\\u0007');
    expect(md).toContain('broken\\u001b[2J');
  }, 60_000);
});
