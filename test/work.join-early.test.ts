import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { imageManifest, spawnCli } from './helpers/cli.js';
import { pgSandbox } from './helpers/pg-fixture.js';

/**
 * A run on PostgreSQL makes its output folder when it starts sending, as a SQLite run has it (its state file is
 * in it): a worker started on the same machine before the first result was downloaded found no folder and
 * exited 2 ("the output folder ... is not on this machine"), the README's own "sleep 5; genbatch work" included,
 * whenever the service took longer than that. The sandbox here runs at the service's own pace (an image takes
 * seconds), so nothing is downloaded while the worker joins.
 */
const KEY = 'sk-work-join-early-0123456789abcdef';
const f = pgSandbox({ prefix: 'genbatch-work-early-', key: KEY, sandbox: { timeScale: 1 } });
const children: ChildProcess[] = [];
afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
});

/** Resolves with the child's stdout once it holds `text`. */
function until(child: ChildProcess, text: string): Promise<string> {
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes(text)) resolve(out);
    });
    child.on('exit', (code) => reject(new Error(`exited ${String(code)} before "${text}": ${out}`)));
  });
}

describe('a worker joining a run on PostgreSQL before its first download', () => {
  it('finds the output folder the run made when it started sending', async () => {
    const env = { GENBATCH_API_KEY: KEY, GENBATCH_STATE: f.db.url, GENBATCH_BASE_URL: f.sandbox.url };
    const out = join(f.dir, 'out');
    const manifest = imageManifest(join(f.dir, 'early.yaml'), 6, 'early');
    const run = spawnCli(['run', manifest, '--out', out, '--yes', '--json'], env);
    children.push(run);
    const sent = await until(run, '"type":"sending"');
    expect(sent).not.toContain('"type":"file"');
    expect(existsSync(out)).toBe(true);
    const worker = spawnCli(['work', '--run', 'early', '--json'], env);
    children.push(worker);
    expect(await until(worker, '"type":"synced"')).toContain('"joined":true');
  }, 60_000);
});
