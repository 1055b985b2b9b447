import Database from 'better-sqlite3';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { rawRequest, startViewProcess } from './helpers/view.js';

/**
 * `genbatch view` over a state file edited by hand (or made by another tool): what the file holds is data, never
 * markup. A finished run against the in-process sandbox, copied and edited per test; the view as a child process.
 */
const KEY = 'sk-view-hostile-0123456789abcdef';
let sb: Sandbox;
let made: string;
const t = tempDir('genbatch-view-hostile-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.001, seed: 7 });
  made = join(t.dir, 'made');
  const m = imageManifest(join(t.dir, 'm.yaml'), 2);
  const r = await runCli(['run', m, '--base-url', sb.url, '--time-scale', '0.001', '--out', made], { GENBATCH_API_KEY: KEY });
  expect(r.code, r.stderr).toBe(0);
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

/** A copy of the finished run's output folder (state included), edited by `edit` on its state file. */
function editedCopy(name: string, edit: (db: Database.Database) => void): string {
  const out = join(t.dir, name);
  cpSync(made, out, { recursive: true });
  const db = new Database(join(out, 'state.db'));
  try {
    edit(db);
  } finally {
    db.close();
  }
  return out;
}

const MARKUP = '"><img src=x onerror=alert(1)><b id=injected>';

describe('genbatch view over a hand-edited state', () => {
  it("shows a job's mark from the state file as text on its page, never as markup", async () => {
    const out = editedCopy('mark-markup', (db) => {
      db.prepare(`INSERT INTO marks (run_id, job_id, n, mark, note, at) VALUES (1, 'img-0000', 1, ?, NULL, '2026-01-01T00:00:00.000Z')`).run(MARKUP);
    });
    const view = await startViewProcess(['--out', out]);
    try {
      const page = await rawRequest(view.port, '/job/img-0000', { headers: { 'x-genbatch-token': view.token } });
      expect(page.status).toBe(200);
      expect(page.body).not.toContain('<img src=x');
      expect(page.body).not.toContain('<b id=injected>');
    } finally {
      await view.stop();
    }
  }, 60_000);
});
