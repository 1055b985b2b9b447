import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callbackUrlProblem } from '../src/lib/address.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';

/**
 * One check for addresses (lib/address.ts): the runner's `callback_url` check (genbatch validate)
 * and the sandbox's check at submit refuse the same hosts. These nine were refused by the sandbox
 * but accepted by validate before they shared the function.
 */
const NINE: Array<[string, string]> = [
  ['trailing-dot', 'https://localhost./hook'],
  ['nat64', 'https://[64:ff9b::7f00:1]/hook'],
  ['six-to-four', 'https://[2002:7f00:1::]/hook'],
  ['multicast', 'https://224.0.0.1/hook'],
  ['benchmarking', 'https://198.18.0.1/hook'],
  ['dot-local', 'https://printer.local/hook'],
  ['dot-internal', 'https://metadata.google.internal/hook'],
  ['credentials', 'https://user:pw@example.com/hook'],
  ['encoded-at', 'https://127.0.0.1%2f@example.com/hook'],
];

let dir: string;
let sb: Sandbox;
beforeAll(async () => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'gb-cbhosts-'));
  sb = await startSandbox({ keys: { k1: 1000 }, timeScale: 0.001, seed: 1 });
}, 180_000);
afterAll(async () => {
  await sb.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the nine callback hosts are refused by genbatch validate and by the sandbox', () => {
  it('genbatch validate refuses each one (exit 2), naming the job and callback_url', async () => {
    const lines = ['jobs:'];
    for (const [id, url] of [...NINE, ['public', 'https://hooks.example.com/hook']]) {
      lines.push(`  - id: ${id}`, '    model: alpha-image-2', `    callback_url: "${url}"`, '    input:', '      prompt: a quiet harbour');
    }
    const path = join(dir, 'jobs.yaml');
    writeFileSync(path, `${lines.join('\n')}\n`);
    const r = await runCli(['validate', path]);
    expect(r.code, r.stdout + r.stderr).toBe(2);
    const out = r.stdout + r.stderr;
    for (const [id] of NINE) expect(out, id).toMatch(new RegExp(`job ${id} \\(.*\\) callback_url: (host .* is local or private|must not carry credentials)`));
    expect(out).not.toMatch(/job public /);
  }, 60_000);

  for (const [id, url] of NINE) {
    it(`the sandbox refuses ${id} (${url}) at submit`, async () => {
      const res = await fetch(`${sb.localUrl}/api/generate/submit`, {
        method: 'POST',
        headers: { authorization: 'Bearer k1', 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'alpha-image-2', input: { prompt: 'x' }, callback_url: url }),
      });
      const body = (await res.json()) as { error?: { message?: string } };
      expect(res.status).toBe(400);
      expect(body.error?.message).toMatch(/^callback_url: must (point to a publicly reachable host|not carry credentials)/);
    });
  }

  it('credentials are refused even where loopback receivers are allowed (--allow-loopback)', () => {
    expect(callbackUrlProblem('http://127.0.0.1:9/hook', true)).toBeNull();
    expect(callbackUrlProblem('http://user:pw@127.0.0.1:9/hook', true)).toMatch(/credentials/);
    expect(callbackUrlProblem('http://127.0.0.1%2f@example.com/hook', true)).toMatch(/credentials/);
  });
});
