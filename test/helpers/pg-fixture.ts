import { afterAll, beforeAll } from 'vitest';
import { startSandbox, type Sandbox } from '../../src/sandbox/index.js';
import type { SandboxOptions } from '../../src/sandbox/options.js';
import { openPool, type Pool } from '../../src/store/pg/db.js';
import { migrate } from '../../src/store/pg/schema.js';
import { ensureBuilt } from './cli.js';
import { testDatabase, type TestDatabase } from './pg.js';
import { tempDir } from './tmp.js';

/** What a test file of the CLI on a PostgreSQL state needs: its own database, a pool on it, a sandbox, a temporary folder. */
export interface PgSandbox {
  readonly db: TestDatabase;
  readonly pool: Pool;
  readonly sandbox: Sandbox;
  readonly dir: string;
}

/**
 * Registers beforeAll/afterAll for a file: the CLI built, a fresh database (its schema made when `migrate`),
 * a sandbox in this process with `key` (time scale 0.01), a temporary folder; all removed after the file.
 */
export function pgSandbox(o: { prefix: string; key: string; migrate?: boolean; sandbox?: Partial<SandboxOptions> }): PgSandbox {
  const t = tempDir(o.prefix);
  const f = { dir: t.dir } as { db: TestDatabase; pool: Pool; sandbox: Sandbox; dir: string };
  beforeAll(async () => {
    ensureBuilt();
    f.db = await testDatabase();
    f.pool = openPool(f.db.url);
    if (o.migrate !== false) await migrate(f.pool);
    f.sandbox = await startSandbox({ port: 0, keys: { [o.key]: 100_000 }, timeScale: 0.01, ...o.sandbox });
  }, 180_000);
  afterAll(async () => {
    await f.pool?.end();
    await f.db?.drop();
    await f.sandbox?.close();
    t.cleanup();
  });
  return f;
}
