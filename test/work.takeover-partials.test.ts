import { existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { imageManifest, runCli } from './helpers/cli.js';
import { pgSandbox } from './helpers/pg-fixture.js';
import { copyToPostgres } from './helpers/pg-copy.js';

/**
 * A worker that takes over a dead worker's `downloading` job removes the temporary files the dead one left
 * in the job's folder (found by the chaos test: a worker SIGKILLed mid-download left a `.part` file that no
 * other worker removed).
 */

const KEY = 'sk-work-partials-0123456789';
const f = pgSandbox({ prefix: 'genbatch-work-partials-', key: KEY });

describe('genbatch work taking over a dead worker', () => {
  it("removes the temporary files the dead worker left in a downloading job's folder, then downloads it", async () => {
    const manifest = imageManifest(join(f.dir, 'dogs.yaml'), 3, 'dog');
    const out = join(f.dir, 'out');
    const state = join(f.dir, 'state.db');
    const env = { GENBATCH_API_KEY: KEY };
    const made = await runCli(['run', manifest, '--state', state, '--out', out, '--base-url', f.sandbox.url, '--time-scale', '0.01', '--json'], env);
    expect(made.code, made.stderr).toBe(0);
    await copyToPostgres(state, f.pool);
    // dog-0001 was being downloaded by a worker that died: its lease ran out, a partial file in its folder.
    await f.pool.query(`UPDATE jobs SET state = 'downloading', lease_owner = 'gone:1:dead', lease_expires = now() - interval '1 second', lease_epoch = lease_epoch + 1 WHERE id = 'dog-0001'`);
    await f.pool.query(`UPDATE files SET state = 'pending', path = NULL, size = NULL, sha256 = NULL, worker = NULL WHERE job_id = 'dog-0001'`);
    const folder = join(out, 'dog-0001');
    for (const f of readdirSync(folder)) rmSync(join(folder, f));
    const partial = join(folder, '.image-1.png.0123456789ab.part');
    writeFileSync(partial, 'half a picture');

    const r = await runCli(['work', '--state', f.db.url, '--until-empty', '--base-url', f.sandbox.url, '--time-scale', '0.01', '--json'], env);
    expect(r.code, r.stderr).toBe(0);
    expect((await f.pool.query(`SELECT state FROM jobs WHERE id = 'dog-0001'`)).rows).toEqual([{ state: 'done' }]);
    expect(existsSync(partial)).toBe(false);
    expect(readdirSync(folder).filter((f) => f.endsWith('.part'))).toEqual([]);
    const files = await f.pool.query<{ state: string; worker: string }>(`SELECT state, worker FROM files WHERE job_id = 'dog-0001'`);
    expect(files.rows).toHaveLength(1);
    expect(files.rows[0]!.state).toBe('done');
    expect(files.rows[0]!.worker).not.toBe('gone:1:dead');
  });
});
