import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, runCli } from './helpers/cli.js';

/** A file or folder the machine refuses is not a bug: exit 74 with the system's message, no "internal error". */
let dir: string;
beforeAll(() => {
  ensureBuilt();
  dir = mkdtempSync(join(tmpdir(), 'genbatch-io-'));
}, 180_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('file system errors', () => {
  it('genbatch report into a path under a regular file exits 74 naming the path and the system error', async () => {
    const manifest = join(dir, 'm.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: a\n    model: alpha-image-2\n    input:\n      prompt: "a red fox"\n');
    const out = join(dir, 'out');
    const run = await runCli(['run', manifest, '--sandbox', '--yes', '--time-scale', '0.01', '--out', out]);
    expect(run.code, run.stderr).toBe(0);
    const blocker = join(dir, 'a-file');
    writeFileSync(blocker, 'not a folder');
    const r = await runCli(['report', '--state', join(out, 'state.db'), '--out', join(blocker, 'reports')]);
    expect(r.code).toBe(74);
    expect(r.stderr).toContain('ENOTDIR');
    expect(r.stderr).toContain(join(blocker, 'reports'));
    expect(r.stderr).not.toContain('internal error');
  }, 60_000);
});
