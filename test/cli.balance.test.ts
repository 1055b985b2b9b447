import { execFile } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json, ok, scripted, type Scripted } from './client.server.js';

/** `genbatch balance` run as a user would: the built CLI in a child process. */

const ROOT = join(import.meta.dirname, '..');
const CANARY = 'sk-CANARY-balance-41d8e2';

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

function genbatch(args: string[], env: Record<string, string | undefined>): Promise<Result> {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1' };
  delete childEnv.GENBATCH_API_KEY;
  delete childEnv.GENBATCH_BASE_URL;
  for (const [k, v] of Object.entries(env)) if (v !== undefined) childEnv[k] = v;
  return new Promise((resolve) => {
    execFile(process.execPath, [join(ROOT, 'bin/genbatch.js'), ...args], { env: childEnv, cwd: ROOT }, (err, stdout, stderr) => {
      const code = err && typeof err.code === 'number' ? err.code : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** Build unless dist is newer than every source this command uses (`npm test` builds in pretest). */
function stale(): boolean {
  const out = join(ROOT, 'dist/cli/commands/balance.js');
  if (!existsSync(out)) return true;
  const built = statSync(out).mtimeMs;
  const sources = [join(ROOT, 'src/cli/commands/balance.ts'), join(ROOT, 'src/cli/main.ts'), join(ROOT, 'src/errors.ts'), ...readdirSync(join(ROOT, 'src/client')).map((f) => join(ROOT, 'src/client', f))];
  return sources.some((f) => statSync(f).mtimeMs > built);
}

function build(): Promise<void> {
  // Other people's files may be mid-edit: tsc still emits; we only need our command built.
  return new Promise((resolve) => execFile(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', ROOT], () => resolve()));
}

let server: Scripted;

beforeAll(async () => {
  if (stale()) await build();
  if (!existsSync(join(ROOT, 'dist/cli/commands/balance.js'))) throw new Error('dist/cli/commands/balance.js was not built');
  server = await scripted((_n, call) =>
    call.headers.authorization === `Bearer ${CANARY}` ? ok({ balance: 1234.5 }) : json(401, { code: 401, error: { message: 'invalid API key', type: 'authentication_error' } }),
  );
}, 120_000);
afterAll(async () => {
  await server?.close();
});

describe('genbatch balance', () => {
  it('prints the balance', async () => {
    const r = await genbatch(['balance', '--base-url', server.url], { GENBATCH_API_KEY: CANARY });
    expect(r).toMatchObject({ code: 0, stdout: 'balance: 1234.5 credits\n' });
  });

  it('prints JSON with --json, base URL from GENBATCH_BASE_URL', async () => {
    const r = await genbatch(['balance', '--json'], { GENBATCH_API_KEY: CANARY, GENBATCH_BASE_URL: server.url });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ balance: 1234.5 });
  });

  it('a missing key is a usage error naming the variable', async () => {
    const r = await genbatch(['balance', '--base-url', server.url], {});
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('GENBATCH_API_KEY');
    expect(r.stdout).toBe('');
  });

  it('a missing base URL is a usage error', async () => {
    const r = await genbatch(['balance'], { GENBATCH_API_KEY: CANARY });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--base-url');
    expect(r.stderr).toContain('GENBATCH_BASE_URL');
  });

  it('a rejected key exits 1 with the service message and never prints the key', async () => {
    const wrong = `${CANARY}-wrong`;
    const r = await genbatch(['balance', '--base-url', server.url], { GENBATCH_API_KEY: wrong });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('HTTP 401');
    expect(r.stderr).toContain('invalid API key');
    expect(r.stderr + r.stdout).not.toContain(CANARY);
  });
});
