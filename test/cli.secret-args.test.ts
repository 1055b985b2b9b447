import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { pgSandbox } from './helpers/pg-fixture.js';

/**
 * Secrets given as flags leave the command line of the genbatch process as soon as it starts (bin/genbatch.js
 * sets process.title over it): a PostgreSQL password in --state is in no /proc/PID/cmdline during the run
 * (what `ps` shows any user), nor the sandbox's --keys and --admin-token. PGPASSWORD with a URL without one
 * works, as the README recommends.
 */

const KEY = 'sk-secret-args-0123456789abcdef';
const f = pgSandbox({ prefix: 'genbatch-secret-args-', key: KEY });

/** Every process whose command line holds `secret` (its pid and command line, NULs as spaces). */
function holding(secret: string): string[] {
  const out: string[] = [];
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (cmd.includes(secret)) out.push(`${pid}: ${cmd.replaceAll('\0', ' ')}`);
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

const cmdline = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();

describe.skipIf(process.platform !== 'linux')('secrets given as flags', () => {
  it('a PostgreSQL password in --state is in no /proc/*/cmdline while the run goes on; ps shows the URL with ***', async () => {
    const password = new URL(f.db.url).password;
    expect(password.length).toBeGreaterThan(8);
    const manifest = imageManifest(join(f.dir, 'pw.yaml'), 8, 'pw');
    const child = spawnCli(['run', manifest, '--state', f.db.url, '--time-scale', '0.01', '--concurrency', '2'], { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: f.sandbox.url });
    let stdout = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.resume();
    const ended = new Promise<number | null>((done) => child.on('close', (code) => done(code)));
    let exited = false;
    void ended.then(() => (exited = true));
    // From its first line on (the start: module loading, the database), then every 20 ms until it ends.
    while (!stdout.includes('genbatch: output in') && !exited) await new Promise((r) => setTimeout(r, 5));
    const shown = cmdline(child.pid!);
    expect(shown).toContain(`--state ${f.db.url.replace(`:${password}@`, ':***@')}`);
    let samples = 0;
    const seen: string[] = [];
    while (!exited) {
      seen.push(...holding(password));
      samples++;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(await ended).toBe(0);
    expect(stdout).toContain('8 done');
    expect(samples).toBeGreaterThan(5);
    expect(seen).toEqual([]);
  }, 120_000);

  it('PGPASSWORD with a URL without the password: the run works', async () => {
    const url = new URL(f.db.url);
    const password = url.password;
    url.password = '';
    const manifest = imageManifest(join(f.dir, 'env.yaml'), 2, 'env');
    const r = await runCli(['run', manifest, '--state', url.toString(), '--time-scale', '0.01'], { GENBATCH_API_KEY: KEY, GENBATCH_BASE_URL: f.sandbox.url, PGPASSWORD: password });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('2 done');
  }, 120_000);

  it("the sandbox's --keys and --admin-token are not on its command line", async () => {
    const key = 'sk-hidden-key-0123456789';
    const token = 'hidden-admin-token-0123456789';
    const child = spawnCli(['sandbox', '--port', '0', '--keys', `${key}=100`, `--admin-token=${token}`]);
    let stdout = '';
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.resume();
    try {
      // The start lines may come in more than one chunk: read until the key's line is in.
      while (!stdout.includes(`key: ${key}`) && child.exitCode === null) await new Promise((r) => setTimeout(r, 10));
      expect(stdout).toContain('listening');
      expect(stdout).toContain(`key: ${key}`);
      expect(cmdline(child.pid!)).toMatch(/sandbox --port 0 --keys \*\*\* --admin-token=\*\*\*$/);
      expect([...holding(key), ...holding(token)]).toEqual([]);
    } finally {
      child.kill('SIGTERM');
      await new Promise((r) => child.on('close', r));
    }
  }, 60_000);
});
