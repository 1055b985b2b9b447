import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/**
 * result.json beside each job's files: a job folder the run makes gets it at once; a job folder that was
 * there before, holding a result.json that is not the job's (the user's own file), keeps that file in
 * previous-<n>/ and is never overwritten. Real run through the CLI against the sandbox.
 */
const KEY = 'sk-run-result-json-0123456789';
let sb: Sandbox;
const t = tempDir('genbatch-result-json-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000_000 }, timeScale: 0.005, seed: 5 });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

describe('result.json of a job', () => {
  it("is written in a new job folder; a user's result.json already in the folder is moved to previous-1/, not replaced", async () => {
    const manifest = join(t.dir, 'm.yaml');
    writeFileSync(manifest, 'jobs:\n  - {id: cat, model: alpha-image-2, input: {prompt: a cat}}\n  - {id: dog, model: alpha-image-2, input: {prompt: a dog}}\n');
    const out = join(t.dir, 'out');
    mkdirSync(join(out, 'cat'), { recursive: true });
    const users = '{"job_id": "not-cat", "note": "the user\'s own file"}\n';
    writeFileSync(join(out, 'cat', 'result.json'), users);

    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', '0.005', '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);

    expect(readFileSync(join(out, 'cat', 'previous-1', 'result.json'), 'utf8')).toBe(users);
    for (const id of ['cat', 'dog']) {
      const doc = JSON.parse(readFileSync(join(out, id, 'result.json'), 'utf8')) as { job_id: string; files: Array<{ path: string }> };
      expect(doc.job_id).toBe(id);
      expect(doc.files.length).toBeGreaterThan(0);
    }
    expect(readdirSync(join(out, 'dog')).filter((n) => n.startsWith('previous-'))).toEqual([]);
  });
});
