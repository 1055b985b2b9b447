import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, genbatch } from './fixtures/manifest/cli.js';

/** Numeric flags and the run command's help, as a user meets them (the built CLI in child processes). */

beforeAll(() => ensureBuilt(), 180_000);

/** The one line of stderr that names the flag (commander prints the usage hint after it). */
const firstLine = (stderr: string) => stderr.split('\n')[0];

describe('integer flags: one parser, one message per flag', () => {
  it('--concurrency abc, 0, -1, 2.5 and 1e3 get the same message and exit 2, before any file is read', async () => {
    const runs = await Promise.all(['abc', '0', '-1', '2.5', '1e3', ''].map((v) => genbatch(['run', 'missing.yaml', '--concurrency', v])));
    runs.forEach((r, i) => {
      expect(r.code, String(i)).toBe(2);
      expect(firstLine(r.stderr)).toMatch(/^genbatch: --concurrency expects an integer >= 1, got ".*"$/);
    });
    expect(firstLine(runs[0]!.stderr)).toBe('genbatch: --concurrency expects an integer >= 1, got "abc"');
    expect(firstLine(runs[1]!.stderr)).toBe('genbatch: --concurrency expects an integer >= 1, got "0"');
  });

  it('--port and --seed of the sandbox: a word and a number out of range get the same message', async () => {
    const [word, high, seedWord, seedNegative] = await Promise.all([
      genbatch(['sandbox', '--port', 'http']),
      genbatch(['sandbox', '--port', '70000']),
      genbatch(['sandbox', '--seed', 'x']),
      genbatch(['sandbox', '--seed', '-1']),
    ]);
    for (const r of [word, high, seedWord, seedNegative]) expect(r.code).toBe(2);
    expect(firstLine(word.stderr)).toBe('genbatch: --port expects an integer from 0 to 65535, got "http"');
    expect(firstLine(high.stderr)).toBe('genbatch: --port expects an integer from 0 to 65535, got "70000"');
    expect(firstLine(seedWord.stderr)).toBe('genbatch: --seed expects an integer >= 0, got "x"');
    expect(firstLine(seedNegative.stderr)).toBe('genbatch: --seed expects an integer >= 0, got "-1"');
  });

  it('--time-scale of run: 0 and a word get the same message', async () => {
    const [zero, word] = await Promise.all([genbatch(['run', 'missing.yaml', '--time-scale', '0']), genbatch(['run', 'missing.yaml', '--time-scale', 'fast'])]);
    expect(firstLine(zero.stderr)).toBe('genbatch: --time-scale expects a number > 0, got "0"');
    expect(firstLine(word.stderr)).toBe('genbatch: --time-scale expects a number > 0, got "fast"');
  });
});

describe('run --help says what the flags do', () => {
  it('--concurrency limits submit requests in flight, and names the separate cap on tasks waited on', async () => {
    const help = (await genbatch(['run', '--help'])).stdout.replace(/\s+/g, ' ');
    expect(help).toContain('--concurrency <n> submit requests (and chat calls) in flight at once; the tasks being waited on are capped apart, at 50 x N (at least 500)');
    expect(help).toContain('(default: 8)');
    expect(help).not.toContain('jobs in flight');
  });

  it('--time-scale also scales the waits against a sandbox started elsewhere', async () => {
    const help = (await genbatch(['run', '--help'])).stdout.replace(/\s+/g, ' ');
    expect(help).toContain("--time-scale <s> multiply the run's own waits (poll interval, first poll, retry backoff, upload window) and, with --sandbox, every sandbox duration; against a sandbox started elsewhere, give its --time-scale");
    expect(help).not.toContain('with --sandbox: scale all sandbox durations');
  });
});
