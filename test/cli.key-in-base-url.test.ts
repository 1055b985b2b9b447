import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXIT } from '../src/errors.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * The API key in the base URL: GENBATCH_BASE_URL and GENBATCH_API_KEY swapped, or the key put in the URL
 * (`http://user:KEY@host`). The key was echoed in the "must be an http:// URL" error, printed in the run's first
 * line and its --json start event, and kept in the state file (the run's base URL). A base URL that holds the key is
 * refused (exit 2, naming the variable, not the key), before anything is written or sent.
 */

const KEY = 'sk-key-in-url-0123456789';
let sb: Sandbox;
const tmp = tempDir('genbatch-key-in-url-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1000 }, timeScale: 0.01 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  tmp.cleanup();
});

describe('a base URL that holds the API key', () => {
  it('is refused by run, estimate and balance: exit 2, the key in nothing printed, nothing written or sent', async () => {
    const manifest = imageManifest(join(tmp.dir, 'm.yaml'), 2, 'k');
    const withUser = sb.url.replace('http://', `http://user:${KEY}@`);
    const encoded = sb.url.replace('http://', `http://user:${encodeURIComponent(KEY).replace('-', '%2D')}@`);
    for (const base of [KEY, withUser, encoded, `${sb.url}/?key=${KEY}`]) {
      const out = join(tmp.dir, `out-${base.length}`);
      const env = { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: base, GENBATCH_PRICE_BOOK: join(tmp.dir, 'book.json') };
      for (const args of [['run', manifest, '--out', out, '--yes', '--json', '--time-scale', '0.01'], ['estimate', manifest], ['balance']]) {
        const r = await runCli(args, env);
        expect(r.code, `${args[0]} ${base}: ${r.stderr}${r.stdout}`).toBe(EXIT.usage);
        expect(r.stderr).toContain('GENBATCH_BASE_URL holds the API key');
        expect(r.stdout + r.stderr).not.toContain(KEY);
        expect(r.stdout + r.stderr).not.toContain('sk-key-in-url');
      }
      expect(existsSync(out)).toBe(false);
    }
    expect(sb.stats().tasks_total).toBe(0);
  }, 120_000);
});
