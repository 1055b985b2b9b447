import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Nightly runs report themselves: $GITHUB_STEP_SUMMARY gets the run's markdown summary appended, and
 * --notify URL gets a JSON POST (a `text` line, the counts as fields) when the run ends, whichever way.
 * The receiver is a real local HTTP server; a notify that fails is a warning and leaves the exit code alone.
 */

const SCALE = '0.005';
const KEY = 'sk-test-notify-0123456789';
let sb: Sandbox;
let tmp: { dir: string; cleanup: () => void };
let receiver: Server;
let receiverUrl: string;
/** What the receiver got: method, path, headers, parsed body. */
const got: Array<{ method: string; path: string; headers: IncomingHttpHeaders; body: Record<string, unknown> }> = [];
/** The status the receiver answers with. */
let answer = 200;

beforeAll(async () => {
  ensureBuilt();
  tmp = tempDir('genbatch-notify-');
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 11 });
  receiver = createServer((req, res) => {
    let text = '';
    req.on('data', (d: Buffer) => (text += d.toString()));
    req.on('end', () => {
      got.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: JSON.parse(text) as Record<string, unknown> });
      res.writeHead(answer).end(answer === 200 ? 'ok' : 'no');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks/T000-secret-path`;
}, 120_000);
afterAll(async () => {
  await sb?.close();
  await new Promise((resolve) => receiver?.close(resolve));
  tmp?.cleanup();
});

/** A manifest of `n` jobs; the ids in `bad` fail (the sandbox refuses their output). */
function manifest(name: string, n: number, bad: number[] = []): string {
  const lines = ['jobs:'];
  for (let i = 0; i < n; i++) lines.push(`  - id: ${name}-${i}`, '    model: alpha-image-2', '    input:', `      prompt: "${bad.includes(i) ? 'a fail-output picture' : 'a quiet harbour'} ${i}"`);
  const path = join(tmp.dir, `${name}.yaml`);
  writeFileSync(path, lines.join('\n') + '\n');
  return path;
}

const args = (m: string, ...more: string[]) => ['run', m, '--base-url', sb.url, '--time-scale', SCALE, '--out', join(tmp.dir, `out-${m.length}-${more.length}-${got.length}`), ...more];

describe('run --notify and $GITHUB_STEP_SUMMARY', () => {
  it('a run with failed jobs: the step summary is appended (counts, charge, cap, failed ids, no links) and the notify gets text and counts', async () => {
    const summaryFile = join(tmp.dir, 'step-summary.md');
    writeFileSync(summaryFile, '## earlier step\n\n');
    got.length = 0;
    const m = manifest('nightly', 5, [1, 3]);
    const r = await runCli(args(m, '--max-credits', '500', '--notify', receiverUrl), { GENBATCH_API_KEY: KEY, GITHUB_STEP_SUMMARY: summaryFile });
    expect(r.code, r.stdout + r.stderr).toBe(1);
    expect(r.stderr).not.toContain('warning');

    const md = readFileSync(summaryFile, 'utf8');
    expect(md.startsWith('## earlier step\n\n### genbatch run `nightly.yaml`: failed (exit 1)\n')).toBe(true);
    expect(md).toContain('| done | 3 |');
    expect(md).toContain('| failed | 2 |');
    expect(md).toMatch(/- charged: \d+(\.\d+)? credits over the run/);
    expect(md).toContain('- cap (--max-credits): 500');
    expect(md).toContain('- failed: `nightly-1`, `nightly-3`');
    expect(md).not.toMatch(/\]\(|https?:|<a /);

    expect(got).toHaveLength(1);
    const post = got[0]!;
    expect(post.method).toBe('POST');
    expect(post.path).toBe('/hooks/T000-secret-path');
    expect(post.headers['content-type']).toBe('application/json');
    expect(post.body).toMatchObject({ manifest: 'nightly.yaml', outcome: 'failed', exit_code: 1, done: 3, failed: 2, pending: 0, max_credits: 500, failed_ids: ['nightly-1', 'nightly-3'], error: null });
    expect(typeof post.body.charged).toBe('number');
    expect(post.body.text).toMatch(/^genbatch run nightly\.yaml: failed \(exit 1\) in \d+\.\d s: 3 done, 2 failed; charged \d+(\.\d+)? credits \(cap 500\); failed: nightly-1, nightly-3$/);
  }, 120_000);

  it('an interrupted run (SIGINT) notifies too: outcome interrupted, exit 130, the pending jobs counted', async () => {
    got.length = 0;
    const m = manifest('stopped', 150);
    const code = await new Promise<number | null>((resolve) => {
      const child = spawnCli(args(m, '--concurrency', '2', '--notify', receiverUrl), { GENBATCH_API_KEY: KEY });
      let stdout = '';
      child.stdout!.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (stdout.includes('estimate') && !child.killed) child.kill('SIGINT');
      });
      child.stderr!.resume();
      child.on('close', resolve);
    });
    expect(code).toBe(130);
    expect(got).toHaveLength(1);
    expect(got[0]!.body).toMatchObject({ outcome: 'interrupted', exit_code: 130 });
    expect(got[0]!.body.pending as number).toBeGreaterThan(0);
  }, 120_000);

  it('a run where no job fits --max-credits sends nothing (exit 5, the jobs pending) and notifies', async () => {
    got.length = 0;
    const summaryFile = join(tmp.dir, 'refused.md');
    const r = await runCli(args(manifest('costly', 4), '--max-credits', '1', '--notify', receiverUrl), { GENBATCH_API_KEY: KEY, GITHUB_STEP_SUMMARY: summaryFile });
    expect(r.code).toBe(5);
    expect(got).toHaveLength(1);
    expect(got[0]!.body).toMatchObject({ outcome: 'cap-reached', exit_code: 5, max_credits: 1, pending: 4, error: null });
    expect(got[0]!.body.text).toMatch(/^genbatch run costly\.yaml: cap-reached \(exit 5\)/);
    expect(readFileSync(summaryFile, 'utf8')).toMatch(/^### genbatch run `costly\.yaml`: cap-reached \(exit 5\)\n\n\| state \| jobs \|/);
  }, 120_000);

  it('a notify that fails (HTTP 500, nothing listening) is a warning naming only the origin; the exit code is the run\'s', async () => {
    answer = 500;
    try {
      const r = await runCli(args(manifest('warned', 2), '--notify', receiverUrl), { GENBATCH_API_KEY: KEY });
      expect(r.code).toBe(0);
      expect(r.stderr).toContain(`genbatch: warning: --notify: ${new URL(receiverUrl).origin} answered HTTP 500`);
      expect(r.stderr).not.toContain('secret-path');
    } finally {
      answer = 200;
    }
    const closed = await new Promise<number>((resolve) => {
      const s = createServer();
      s.listen(0, '127.0.0.1', () => {
        const port = (s.address() as AddressInfo).port;
        s.close(() => resolve(port));
      });
    });
    const r = await runCli(args(manifest('unreached', 2), '--notify', `http://127.0.0.1:${closed}/x`), { GENBATCH_API_KEY: KEY });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/genbatch: warning: --notify: could not reach http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\)/);
  }, 120_000);

  it('--notify that is not an http(s) URL is a usage error (exit 2) before anything is sent', async () => {
    const before = sb.stats().tasks_total;
    const r = await runCli(args(manifest('badurl', 2), '--notify', 'ftp://example.test/x'));
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--notify: ftp: URL (expected http://... or https://...)');
    expect(sb.stats().tasks_total).toBe(before);
  }, 120_000);
});
