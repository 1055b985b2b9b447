import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, imageManifest, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { findFiles } from './helpers/verify.js';

/** The API key never reaches the state file (or its WAL), the output folder, the reports or anything printed. */
const CANARY = `sk-canary-${randomBytes(12).toString('hex')}`;
const SCALE = '0.01';

let sb: Sandbox;
const t = tempDir('genbatch-canary-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [CANARY]: 100_000 }, timeScale: Number(SCALE), faults: 'status:500=0.2,file:truncate=0.1', seed: 3 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

function assertNoKey(where: string, text: string | Buffer): void {
  const s = typeof text === 'string' ? text : text.toString('latin1');
  if (s.includes(CANARY) || s.includes(CANARY.slice(10))) throw new Error(`the API key appears in ${where}`);
}

describe('API key canary', () => {
  it('appears nowhere: state, WAL, outputs, reports, stdout, stderr', async () => {
    // A failing job (content moderation) too, so error messages are written.
    const manifest = imageManifest(join(t.dir, 'canary.yaml'), 8, 'cn', '  - id: banned\n    model: alpha-image-2\n    input:\n      prompt: "a forbidden picture"\n');
    const out = join(t.dir, 'out');
    const args = ['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out];
    // First: kill one run mid-way, so a WAL file is left on disk to inspect.
    await new Promise<void>((resolve) => {
      const child = spawnCli(args, { GENBATCH_API_KEY: CANARY });
      let text = '';
      child.stdout!.on('data', (d: Buffer) => {
        text += d.toString();
        assertNoKey('stdout', text);
        if (text.includes('estimate')) setTimeout(() => child.kill('SIGKILL'), 150);
      });
      child.stderr!.on('data', (d: Buffer) => assertNoKey('stderr', d));
      child.on('exit', () => resolve());
    });
    const wal = findFiles(out, (n) => n.endsWith('-wal'));
    expect(wal.length).toBeGreaterThan(0);
    for (const f of wal) assertNoKey(f, readFileSync(f));
    for (const json of [false, true]) {
      const r = await runCli([...args, ...(json ? ['--json'] : [])], { GENBATCH_API_KEY: CANARY });
      expect([0, 1, 4, 6]).toContain(r.code); // 6: the banned job failed permanently (a 400 content_moderation_error)
      assertNoKey('stdout', r.stdout);
      assertNoKey('stderr', r.stderr);
    }
    const status = await runCli(['status', manifest, '--state', join(out, 'state.db'), '--jobs', '--json']);
    assertNoKey('status', status.stdout + status.stderr);
    // A wrong key: the 401 message must not echo it either.
    const wrong = `${CANARY}-wrong`;
    const bad = await runCli(args.concat(['--state', join(t.dir, 'other.db')]), { GENBATCH_API_KEY: wrong });
    expect(bad.code).not.toBe(0);
    expect(bad.stdout + bad.stderr).not.toContain(wrong);
    const files = findFiles(t.dir, () => true).filter((f) => !f.endsWith('canary.yaml'));
    expect(files.some((f) => f.endsWith('report.html'))).toBe(true);
    expect(files.some((f) => f.endsWith('state.db'))).toBe(true);
    for (const f of files) assertNoKey(f, readFileSync(f));
  }, 120_000);
});
