import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { sandboxTasks } from './helpers/admin.js';
import { ensureBuilt, imageManifest, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { until } from './helpers/until.js';
import { readJobs } from './helpers/verify.js';

/**
 * The callback receiver of `genbatch run --listen` answers a request whose target is not a URL (`GET http://[`,
 * sent by anyone who reaches the port, no token needed) with 400 and goes on. It parsed the target with
 * `new URL()` in the request handler, outside any try: the TypeError was uncaught and the whole run died
 * (exit 1, jobs left submitted). Found by sending odd request lines to a receiver.
 */
const KEY = 'sk-callback-bad-target';
const t = tempDir('genbatch-cb-bad-target-');
let sb: Sandbox;

beforeAll(async () => {
  ensureBuilt();
  // Time scale 1: the task runs until the test moves the sandbox clock.
  sb = await startSandbox({ port: 0, keys: { [KEY]: 1_000 }, timeScale: 1, seed: 8, allowLoopback: true });
}, 60_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

/** Write `text` on a new connection to `port` and return what comes back before it closes. */
function raw(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    const c = connect(port, '127.0.0.1', () => c.write(text));
    let got = '';
    c.on('data', (d: Buffer) => (got += d.toString('latin1')));
    c.on('error', () => resolve(got));
    c.on('close', () => resolve(got));
    setTimeout(() => c.destroy(), 2_000);
  });
}

it('a request target that is not a URL is a 400, and the run goes on to finish its job', async () => {
  const manifest = imageManifest(join(t.dir, 'm.yaml'), 1, 'odd');
  const out = join(t.dir, 'out');
  const child = spawnCli(['run', manifest, '--base-url', sb.url, '--time-scale', '1', '--out', out, '--listen', '127.0.0.1:0', '--json', '--yes'], { GENBATCH_API_KEY: KEY });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<number | null>((r) => child.on('close', r));
  try {
    const task = await until('the task', async () => (await sandboxTasks(sb)).find((x) => x.callback_url !== null) ?? null);
    const port = Number(new URL(task.callback_url!).port);
    for (const target of ['http://[', 'http://a:99999/x', 'http://%zz/']) {
      expect(await raw(port, `POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n`)).toMatch(/^HTTP\/1\.1 400 /);
    }
    sb.clock.advance(120);
    expect(await closed, stderr).toBe(0);
  } finally {
    child.kill('SIGKILL');
  }
  expect(readJobs(join(out, 'state.db'))[0]?.state).toBe('done');
}, 60_000);
