import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate, NOW_ISO } from '../src/store/pg/schema.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { seedRun, testDatabase, type TestDatabase } from './helpers/pg.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The readers of a PostgreSQL state on rows another client wrote by hand: a job's spec, input or chat result
 * that is not JSON, or is JSON nested far deeper than any genbatch writes. status, report and export read the
 * rest of the run (the job's input is left out where it cannot be read); before, each of them ended
 * 'internal error (a bug)' (exit 70): SQLite's json_extract refused the text ('malformed JSON'), or
 * JSON.stringify overflowed the stack writing the input back out.
 */

const t = tempDir('genbatch-pg-hostile-json-');
let db: TestDatabase;
let pool: Pool;
let out: string;
const DEEP = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;

beforeAll(async () => {
  ensureBuilt();
  db = await testDatabase();
  pool = openPool(db.url);
  await migrate(pool);
  const runId = await seedRun(pool, join(t.dir, 'm.yaml'), [
    { id: 'plain', state: 'done' },
    { id: 'bad-spec', state: 'done' },
    { id: 'deep-spec', state: 'done' },
    { id: 'deep-input', state: 'done' },
    { id: 'bad-chat', kind: 'chat', state: 'done' },
  ]);
  out = join(t.dir, 'out');
  await pool.query('UPDATE runs SET out_dir = $1 WHERE id = $2', [out, runId]);
  await pool.query(`UPDATE jobs SET created_at = ${NOW_ISO}, updated_at = ${NOW_ISO}, finished_at = ${NOW_ISO}`);
  await pool.query(`UPDATE jobs SET spec = '{"model":"m","input":{"prompt":"a cat"}}' WHERE id = 'plain'`);
  await pool.query(`UPDATE jobs SET spec = 'garbage' WHERE id = 'bad-spec'`);
  await pool.query(`UPDATE jobs SET spec = $1 WHERE id = 'deep-spec'`, [`{"model":"m","input":${DEEP}}`]);
  await pool.query(`UPDATE jobs SET submitted_input = $1 WHERE id = 'deep-input'`, [`{"prompt":${DEEP}}`]);
  await pool.query(`UPDATE jobs SET result = 'not json' WHERE id = 'bad-chat'`);
  // A file per job, on disk as recorded, so that export writes an index line for each.
  const bytes = 'not really a png';
  const sha = createHash('sha256').update(bytes).digest('hex');
  for (const id of ['plain', 'bad-spec', 'deep-spec', 'deep-input', 'bad-chat']) {
    mkdirSync(join(out, id), { recursive: true });
    writeFileSync(join(out, id, 'image-1.png'), bytes);
    await pool.query(
      `INSERT INTO files (run_id, job_id, idx, name, url, type, path, size, sha256, state) VALUES ($1, $2, 0, 'image-1.png', 'http://x/1.png', 'image', $3, $4, $5, 'done')`,
      [runId, id, `${id}/image-1.png`, bytes.length, sha],
    );
  }
}, 120_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
  t.cleanup();
});

describe('readers on hand-edited JSON in a PostgreSQL state', () => {
  it('status reads the run', async () => {
    const r = await runCli(['status', '--state', db.url, '--json']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect((JSON.parse(r.stdout) as { counts: Record<string, number> }).counts.done).toBe(5);
  });

  it('report writes the reports, the unreadable inputs left out', async () => {
    const r = await runCli(['report', '--state', db.url]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const report = JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; input: unknown }> };
    expect(Object.fromEntries(report.jobs.map((j) => [j.id, j.input]))).toEqual({
      plain: { prompt: 'a cat' },
      'bad-spec': null,
      'deep-spec': null,
      'deep-input': null,
      'bad-chat': null,
    });
  });

  it('export writes its index', async () => {
    const to = join(t.dir, 'export');
    const r = await runCli(['export', '--state', db.url, '--to', to, '--format', 'jsonl', '--only', 'done']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const lines = readFileSync(join(to, 'export.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { job_id: string; prompt: unknown });
    expect(lines.map((l) => [l.job_id, l.prompt])).toEqual([
      ['plain', 'a cat'],
      ['bad-spec', null],
      ['deep-spec', null],
      ['deep-input', null],
      ['bad-chat', null],
    ]);
  });
});
