import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChatClient } from '../src/client/index.js';
import { fsyncDir } from '../src/download/index.js';
import { runChatJob } from '../src/engine/submit/chat.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { SqliteWorkStore, Store } from '../src/store/index.js';
import { replyText } from '../src/sandbox/chat/reply.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { readJobs } from './helpers/verify.js';

/**
 * Where a chat job's answer goes on disk: the files are made durable (one
 * folder fsync) before they are recorded as done, like downloads, and they
 * never replace a file that was in out/<id>/ before (a numbered name, as for
 * downloads and text results). Real sandbox on port 0, real store, real files.
 */
const KEY = 'sk-test-chat-files-0123456789';
const SEED = 11;
const SCALE = '0.005';
const SYSTEM = 'You write one short line.';

let sb: Sandbox;
const cleanups: Array<() => void | Promise<void>> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: SEED });
}, 120_000);
afterAll(async () => {
  while (cleanups.length) await cleanups.pop()!();
  await sb?.close();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-chat-files-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

const expected = (model: string, user: string) => replyText(SEED, { model, texts: [SYSTEM, user], lastUser: user });

describe('chat answer files', () => {
  it('the job folder is fsynced once with both answer files in it, before they are recorded as done', async () => {
    const w = work();
    mkdirSync(w.out, { recursive: true });
    const store = Store.openForWrite(w.state);
    cleanups.push(() => store.close());
    store.openRun(join(w.dir, 'm.yaml'), w.out, sb.url, true, false);
    const user = 'Write a caption for the fsync test';
    const spec = { model: 'vendora/chat-5', protocol: 'chat-completions', input: { stream: false, messages: [{ role: 'system', content: SYSTEM }, { role: 'user', content: user }] }, refs: [] };
    store.beginSync();
    store.syncJob({ id: 'c1', model: spec.model, kind: 'chat', where: 'm.yaml:c1', specHash: 'h', spec: JSON.stringify(spec), estimatedCredits: null });
    store.commitSync();
    const client = new ChatClient({ baseUrl: sb.url, apiKey: KEY });
    cleanups.push(() => client.close());
    const syncs: Array<{ dir: string; onDisk: string[]; recorded: number; state: string }> = [];
    const row = store.nextPending(0, 10)[0]!;
    const ws = new SqliteWorkStore(store);
    await runChatJob(row, {
      move: async (from, to, patch, o) => (await ws.transition('c1', from, to, patch, o)).moved,
      chat: (req, o) => client.call(req, o),
      outDir: w.out,
      signal: new AbortController().signal,
      emit: () => undefined,
      stop: () => undefined,
      sanitizeName: (n) => n,
      // The real folder fsync, observed: what is on disk and what the store has recorded when it runs.
      syncDir: async (dir) => {
        syncs.push({
          dir,
          onDisk: ['response.txt', 'response.json'].filter((n) => existsSync(join(dir, n))),
          recorded: store.filesOf('c1').filter((f) => f.state === 'done').length,
          state: readJobs(w.state).find((j) => j.id === 'c1')?.state ?? '',
        });
        await fsyncDir(dir);
      },
    });
    expect(syncs).toEqual([{ dir: join(w.out, 'c1'), onDisk: ['response.txt', 'response.json'], recorded: 0, state: 'submitting' }]);
    expect(readJobs(w.state).find((j) => j.id === 'c1')?.state).toBe('done');
    expect(store.filesOf('c1').map((f) => [f.path, f.state])).toEqual([
      [join('c1', 'response.txt'), 'done'],
      [join('c1', 'response.json'), 'done'],
    ]);
    expect(readFileSync(join(w.out, 'c1', 'response.txt'), 'utf8')).toBe(expected('vendora/chat-5', user));
  });

  it('a response.txt / response.json already in out/<id>/ is never replaced: the answer takes numbered names, in the state and the report', async () => {
    const w = work();
    const user = 'Write a caption for the no-replace test';
    const manifest = join(w.dir, 'm.yaml');
    writeFileSync(
      manifest,
      [
        'jobs:',
        '  - id: c1',
        '    model: vendorb/verse-4.5',
        '    protocol: messages',
        '    input:',
        '      stream: true',
        '      messages:',
        `        - {role: system, content: "${SYSTEM}"}`,
        `        - {role: user, content: "${user}"}`,
      ].join('\n') + '\n',
    );
    mkdirSync(join(w.out, 'c1'), { recursive: true });
    writeFileSync(join(w.out, 'c1', 'response.txt'), 'my own notes, not genbatch output\n');
    writeFileSync(join(w.out, 'c1', 'response.json'), '{"mine": true}\n');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(w.out, 'c1', 'response.txt'), 'utf8')).toBe('my own notes, not genbatch output\n');
    expect(readFileSync(join(w.out, 'c1', 'response.json'), 'utf8')).toBe('{"mine": true}\n');
    const text = expected('vendorb/verse-4.5', user);
    expect(readFileSync(join(w.out, 'c1', 'response (2).txt'), 'utf8')).toBe(text);
    expect(existsSync(join(w.out, 'c1', 'response (2).json'))).toBe(true);
    const rep = JSON.parse(readFileSync(join(w.out, 'report.json'), 'utf8')) as { jobs: Array<{ id: string; state: string; texts: Record<string, string>; files: Array<{ path: string }> }> };
    const job = rep.jobs.find((j) => j.id === 'c1')!;
    expect(job.state).toBe('done');
    expect(job.files.map((f) => f.path)).toEqual([join('c1', 'response (2).txt'), join('c1', 'response (2).json')]);
    expect(job.texts['response.txt']).toBe(text);
    // A second run changes nothing: the job is done, the files stay as they are.
    const again = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(join(w.out, 'c1', 'response.txt'), 'utf8')).toBe('my own notes, not genbatch output\n');
    expect(existsSync(join(w.out, 'c1', 'response (3).txt'))).toBe(false);
  }, 60_000);
});
