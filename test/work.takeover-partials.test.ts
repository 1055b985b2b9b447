import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate } from '../src/store/pg/schema.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { copyToPostgres } from './helpers/pg-copy.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';
import { tempDir } from './helpers/tmp.js';

/**
 * A worker that takes over a dead worker's `downloading` job removes the temporary files the dead one left
 * in the job's folder (found by the chaos test: a worker SIGKILLed mid-download left a `.part` file that no
 * other worker removed).
 */

const KEY = 'sk-work-partials-0123456789';
const t = tempDir('genbatch-work-partials-');
let db: TestDatabase;
let pool: Pool;
let sandbox: Sandbox;

beforeAll(async () => {
  ensureBuilt();
  db = await testDatabase();
  pool = openPool(db.url);
  await migrate(pool);
  sandbox = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: 0.01 });
}, 180_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
  await sandbox?.close();
  t.cleanup();
});

describe('genbatch work taking over a dead worker', () => {
  it("removes the temporary files the dead worker left in a downloading job's folder, then downloads it", async () => {
    const manifest = imageManifest(join(t.dir, 'dogs.yaml'), 3, 'dog');
    const out = join(t.dir, 'out');
    const state = join(t.dir, 'state.db');
    const env = { GENBATCH_API_KEY: KEY };
    const made = await runCli(['run', manifest, '--state', state, '--out', out, '--base-url', sandbox.url, '--time-scale', '0.01', '--json'], env);
    expect(made.code, made.stderr).toBe(0);
    await copyToPostgres(state, pool);
    // dog-0001 was being downloaded by a worker that died: its lease ran out, a partial file in its folder.
    await pool.query(`UPDATE jobs SET state = 'downloading', lease_owner = 'gone:1:dead', lease_expires = now() - interval '1 second', lease_epoch = lease_epoch + 1 WHERE id = 'dog-0001'`);
    await pool.query(`UPDATE files SET state = 'pending', path = NULL, size = NULL, sha256 = NULL, worker = NULL WHERE job_id = 'dog-0001'`);
    const folder = join(out, 'dog-0001');
    for (const f of readdirSync(folder)) rmSync(join(folder, f));
    const partial = join(folder, '.image-1.png.0123456789ab.part');
    writeFileSync(partial, 'half a picture');

    const r = await runCli(['work', '--state', db.url, '--until-empty', '--base-url', sandbox.url, '--time-scale', '0.01', '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    expect((await pool.query(`SELECT state FROM jobs WHERE id = 'dog-0001'`)).rows).toEqual([{ state: 'done' }]);
    expect(existsSync(partial)).toBe(false);
    expect(readdirSync(folder).filter((f) => f.endsWith('.part'))).toEqual([]);
    const files = await pool.query<{ state: string; worker: string }>(`SELECT state, worker FROM files WHERE job_id = 'dog-0001'`);
    expect(files.rows).toHaveLength(1);
    expect(files.rows[0]!.state).toBe('done');
    expect(files.rows[0]!.worker).not.toBe('gone:1:dead');
  });
});
