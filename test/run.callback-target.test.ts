import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkCallbackTarget } from '../src/api/run.js';
import { UsageError } from '../src/errors.js';
import { imageManifest, runCli } from './helpers/cli.js';

/**
 * The service takes only public HTTPS callback URLs (the contract: HTTPS only, publicly reachable, no private or
 * internal address). `--listen 127.0.0.1:0` alone gives it http://127.0.0.1:PORT/: every submit was refused with
 * a 400 and all 2,000 jobs of a run failed. Now such a run is refused before anything is written or sent
 * (exit 2); a service on a loopback address (a sandbox on this machine, which may take loopback callbacks) is not
 * checked.
 */
const dir = mkdtempSync(join(tmpdir(), 'genbatch-callback-target-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the callback URL a run gives the service', () => {
  it('is refused before the run when the service would refuse it, naming the flag and the way out', () => {
    const real = 'https://api.example.com';
    const refused: Array<[{ listen: string; callbackUrl?: string }, string]> = [
      [{ listen: '127.0.0.1:0' }, '--listen 127.0.0.1:0 without --callback-url gives the service http://127.0.0.1:0/ to call back, which it refuses (a callback URL must be an HTTPS URL'],
      [{ listen: '0.0.0.0:8080', callbackUrl: 'http://hooks.example.com/' }, '--callback-url http://hooks.example.com/, which it refuses (a callback URL must be an HTTPS URL'],
      [{ listen: '0.0.0.0:8080', callbackUrl: 'https://10.0.0.7/' }, 'must point to a publicly reachable host'],
      [{ listen: '0.0.0.0:8080', callbackUrl: 'https://user:pw@hooks.example.com/' }, 'must not carry credentials'],
    ];
    for (const [o, message] of refused) {
      const f = () => checkCallbackTarget(o, real);
      expect(f, JSON.stringify(o)).toThrow(UsageError);
      expect(f, JSON.stringify(o)).toThrow(message);
      expect(f).toThrow('give --callback-url https://... (a public address that reaches the receiver on');
    }
    // Taken: a public HTTPS URL; no --listen (polling); a service on this machine (a sandbox decides itself).
    expect(() => checkCallbackTarget({ listen: '0.0.0.0:8080', callbackUrl: 'https://hooks.example.com/genbatch/' }, real)).not.toThrow();
    expect(() => checkCallbackTarget({}, real)).not.toThrow();
    for (const local of ['http://127.0.0.1:8787', 'http://localhost:8787', 'http://[::1]:8787']) expect(() => checkCallbackTarget({ listen: '127.0.0.1:0' }, local)).not.toThrow();
  });

  it('genbatch run exits 2 with that line and writes nothing (no output folder, no state)', async () => {
    const manifest = imageManifest(join(dir, 'm.yaml'), 3, 'cb');
    const out = join(dir, 'out');
    const r = await runCli(['run', manifest, '--base-url', 'https://api.example.com', '--out', out, '--listen', '127.0.0.1:0', '--yes'], { GENBATCH_API_KEY: 'sk-callback-target-0123456789' });
    expect(r.code, r.stdout + r.stderr).toBe(2);
    expect(r.stderr).toContain('--listen 127.0.0.1:0 without --callback-url gives the service http://127.0.0.1:0/ to call back');
    expect(existsSync(out)).toBe(false);
  });
});
