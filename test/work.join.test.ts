import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { workOutDir } from '../src/api/work.js';
import { openPool, type Pool } from '../src/store/pg/db.js';
import { migrate, NOW_ISO } from '../src/store/pg/schema.js';
import { chooseRun } from '../src/store/run-name.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { testDatabase, type TestDatabase } from './helpers/pg.js';
import { tempDir } from './helpers/tmp.js';

/** genbatch work: which run it joins (--run NAME, or the only one) and where it writes (--out, else the run's folder). */

const t = tempDir('genbatch-work-');
const runs = [
  { manifest: '/data/cats.yaml', out_dir: '/data/genbatch-out/cats' },
  { manifest: '/data/dogs.csv', out_dir: '/data/genbatch-out/dogs' },
  { manifest: '/other/cats.yaml', out_dir: '/other/genbatch-out/cats' },
];

describe('chooseRun', () => {
  it('takes the only run without a name, and a run by name, file name or path', () => {
    expect(chooseRun(runs.slice(0, 1), undefined, 'db')).toBe(runs[0]);
    expect(chooseRun(runs, 'dogs', 'db')).toBe(runs[1]);
    expect(chooseRun(runs, 'dogs.csv', 'db')).toBe(runs[1]);
    expect(chooseRun(runs, '/other/cats.yaml', 'db')).toBe(runs[2]);
  });

  it('lists the runs when none is named among several, when the name is unknown or when it names several', () => {
    expect(() => chooseRun(runs, undefined, 'db')).toThrow('db holds 3 runs; name one with --run NAME:\n  cats (/data/cats.yaml)\n  dogs (/data/dogs.csv)\n  cats (/other/cats.yaml)');
    expect(() => chooseRun(runs, 'birds', 'db')).toThrow('db holds no run named birds; its runs:\n  cats (/data/cats.yaml)');
    expect(() => chooseRun(runs, 'cats', 'db')).toThrow("cats names 2 runs of db; give the manifest's path:\n  cats (/data/cats.yaml)\n  cats (/other/cats.yaml)");
    expect(() => chooseRun([], undefined, 'db')).toThrow('db holds no run yet (genbatch run <manifest> --state URL makes one)');
  });
});

describe('workOutDir', () => {
  it('is --out when given, else the recorded folder when this machine has it, else an error saying what to do', () => {
    expect(workOutDir(runs[0]!, 'rel/out')).toBe(join(process.cwd(), 'rel', 'out'));
    expect(workOutDir({ manifest: '/x/m.yaml', out_dir: t.dir }, undefined)).toBe(t.dir);
    expect(() => workOutDir(runs[1]!, undefined)).toThrow('the output folder of dogs, /data/genbatch-out/dogs, is not on this machine; mount the shared folder there, or pass --out DIR where this machine sees it');
  });
});

describe('genbatch work on the command line', () => {
  let db: TestDatabase;
  let pool: Pool;
  beforeAll(async () => {
    ensureBuilt();
    db = await testDatabase();
    pool = openPool(db.url);
    await migrate(pool);
    for (const r of runs.slice(0, 2)) await pool.query(`INSERT INTO runs (manifest, out_dir, started_at) VALUES ($1, $2, ${NOW_ISO})`, [r.manifest, r.out_dir]);
  }, 120_000);
  afterAll(async () => {
    await pool?.end();
    await db?.drop();
    t.cleanup();
  });

  it('needs a PostgreSQL state: none, or a SQLite path, is exit 2 saying what to use', async () => {
    const none = await runCli(['work']);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('work expects --state postgres://USER:PASSWORD@HOST:PORT/DATABASE (or GENBATCH_STATE): the database that holds the run');
    const sqlite = await runCli(['work', '--state', join(t.dir, 'state.db')]);
    expect(sqlite.code).toBe(2);
    expect(sqlite.stderr).toContain(`work joins a run kept in PostgreSQL (--state postgres://...); ${join(t.dir, 'state.db')} is a SQLite state file, which has one writer: use genbatch run <manifest>`);
  });

  it('with several runs and no --run, exit 2 listing them; the run folder missing here is exit 2 too', async () => {
    const several = await runCli(['work'], { GENBATCH_STATE: db.url });
    expect(several.code).toBe(2);
    expect(several.stderr).toContain('holds 2 runs; name one with --run NAME:\n  cats (/data/cats.yaml)\n  dogs (/data/dogs.csv)\n');
    expect(several.stderr).not.toContain(new URL(db.url).password);
    const away = await runCli(['work', '--state', db.url, '--run', 'dogs']);
    expect(away.code).toBe(2);
    expect(away.stderr).toContain('the output folder of dogs, /data/genbatch-out/dogs, is not on this machine');
  });

  it("checks run's service flags before joining", async () => {
    const r = await runCli(['work', '--state', db.url, '--run', 'cats', '--callback-url', 'http://x.example/cb']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--callback-url needs --listen HOST:PORT');
    const c = await runCli(['work', '--state', db.url, '--concurrency', '0']);
    expect(c.code).toBe(2);
    expect(c.stderr).toContain('--concurrency expects an integer >= 1, got "0"');
  });

  it('refuses a run folder missing here only when --out is not given', async () => {
    const out = join(t.dir, 'shared', 'cats');
    mkdirSync(out, { recursive: true });
    // Past the run and its folder: the next thing it needs is the API key.
    const r = await runCli(['work', '--state', db.url, '--run', 'cats', '--out', out, '--base-url', 'http://127.0.0.1:9']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('GENBATCH_API_KEY is not set');
  });
});
