import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { countTokens, replyText } from '../src/sandbox/chat/reply.js';
import { ensureBuilt, runCli, spawnCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, findFiles, integrity, readJobs } from './helpers/verify.js';

/**
 * Chat jobs in `genbatch run`, against the real sandbox (in this process) and
 * the real CLI (a child process), real SQLite and real files: the four
 * protocols with streaming on and off next to media jobs, texts equal to the
 * sandbox's predictable reply, retried faults (429, an error and a cut in the
 * middle of a stream), a crash during a call, resume, and the report.
 */
const SCALE = '0.005';
const KEY = 'sk-test-chat-run-0123456789';
const SEED = 5;
const SYSTEM = 'You write one short line.';

let sb: Sandbox;
const cleanups: Array<() => void> = [];

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: SEED, slowMs: 20_000 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): { dir: string; out: string; state: string } {
  const t = tempDir('genbatch-chat-run-');
  cleanups.push(t.cleanup);
  const out = join(t.dir, 'out');
  return { dir: t.dir, out, state: join(out, 'state.db') };
}

const run = (manifest: string, out: string, more: string[] = []) =>
  runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes', ...more], { GENBATCH_API_KEY: KEY });

/** What the sandbox answers to [system, user] on `model`, whatever the protocol. */
const expected = (model: string, user: string) => replyText(SEED, { model, texts: [SYSTEM, user], lastUser: user });

const PROTOCOLS = [
  { protocol: 'chat-completions', model: 'vendora/chat-5' },
  { protocol: 'responses', model: 'vendora/chat-5' },
  { protocol: 'messages', model: 'vendorb/verse-4.5' },
  { protocol: 'gemini', model: 'vendorc/lumen-2.5-pro' },
] as const;

function chatJob(id: string, model: string, protocol: string, stream: boolean, user: string): string {
  return [
    `  - id: ${id}`,
    `    model: ${model}`,
    `    protocol: ${protocol}`,
    '    input:',
    `      stream: ${stream}`,
    '      messages:',
    `        - {role: system, content: "${SYSTEM}"}`,
    `        - {role: user, content: "${user}"}`,
  ].join('\n');
}

interface ReportJson {
  summary: { counts: Record<string, number>; chat?: { jobs: number; done: number; repeated_calls: number; input_tokens: number; output_tokens: number } };
  jobs: Array<{ id: string; state: string; attempts: number; texts: Record<string, string>; usage: { input_tokens: number; output_tokens: number } | null; files: Array<{ path: string }> }>;
}
const report = (out: string) => JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as ReportJson;

function storedResult(state: string, id: string): { text: string; usage: { input_tokens: number; output_tokens: number } } {
  const db = new Database(state, { readonly: true });
  try {
    const r = db.prepare('SELECT result FROM jobs WHERE id = ?').get(id) as { result: string };
    return JSON.parse(r.result) as { text: string; usage: { input_tokens: number; output_tokens: number } };
  } finally {
    db.close();
  }
}

/** Wait until a job of the state file is in `want` (the file may not exist yet). */
async function waitForState(state: string, id: string, want: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    let now: string | undefined;
    try {
      now = readJobs(state).find((j) => j.id === id)?.state;
    } catch {
      now = undefined; // the state file is not created yet
    }
    if (now === want) return;
    if (Date.now() > deadline) throw new Error(`job ${id} never reached ${want}`);
    await new Promise((res) => setTimeout(res, 20));
  }
}

/** Until the sandbox has received a chat call more than `before`: its scripted step is then drawn by this call, not left for the next run's. */
async function waitForCall(before: number): Promise<void> {
  const deadline = Date.now() + 30_000;
  while ((sb.stats().requests.chat ?? 0) <= before) {
    if (Date.now() > deadline) throw new Error('the chat call never reached the sandbox');
    await new Promise((res) => setTimeout(res, 20));
  }
}

describe('chat jobs in genbatch run', () => {
  it('runs media and chat jobs (4 protocols, stream on and off, a rows template) to done; texts match; resume does nothing', async () => {
    const w = work();
    writeFileSync(join(w.dir, 'subjects.tsv'), 'subject\tmood\na lighthouse\tcalm\na red fox\tplayful\n');
    const lines = ['jobs:', '  - id: img-1', '    model: alpha-image-2', '    input: {prompt: A quiet harbour}'];
    for (const p of PROTOCOLS) {
      for (const stream of [false, true]) lines.push(chatJob(`${p.protocol}-${stream ? 'stream' : 'json'}`, p.model, p.protocol, stream, `Write a caption for test ${p.protocol}`));
    }
    // A prompt template filled from rows: {{column}} in the message content.
    lines.push(
      '  - id: "row-{{row}}"',
      '    rows: {file: subjects.tsv}',
      '    model: vendorb/verse-4.5',
      '    input:',
      '      stream: true',
      '      messages:',
      `        - {role: system, content: "${SYSTEM}"}`,
      '        - {role: user, content: "Describe {{subject}} in a {{mood}} tone"}',
    );
    const manifest = join(w.dir, 'mixed.yaml');
    writeFileSync(manifest, lines.join('\n') + '\n');

    const r = await run(manifest, w.out);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const jobs = readJobs(w.state);
    expect(jobs.map((j) => [j.id, j.state, j.attempts])).toEqual([
      ['img-1', 'done', 1],
      ...PROTOCOLS.flatMap((p) => [
        [`${p.protocol}-json`, 'done', 1],
        [`${p.protocol}-stream`, 'done', 1],
      ]),
      ['row-1', 'done', 1],
      ['row-2', 'done', 1],
    ]);
    expect(jobs.filter((j) => j.id !== 'img-1').every((j) => j.task_id === null)).toBe(true);

    const rep = report(w.out);
    const byId = new Map(rep.jobs.map((j) => [j.id, j]));
    for (const p of PROTOCOLS) {
      const want = expected(p.model, `Write a caption for test ${p.protocol}`);
      const plain = readFileSync(join(w.out, `${p.protocol}-json`, 'response.txt'), 'utf8');
      const streamed = readFileSync(join(w.out, `${p.protocol}-stream`, 'response.txt'), 'utf8');
      expect(plain).toBe(want);
      expect(streamed).toBe(plain);
      for (const id of [`${p.protocol}-json`, `${p.protocol}-stream`]) {
        const job = byId.get(id)!;
        expect(job.texts).toEqual({ 'response.txt': want });
        expect(job.usage).toEqual({ input_tokens: countTokens(SYSTEM) + countTokens(`Write a caption for test ${p.protocol}`), output_tokens: countTokens(want) });
        expect(job.files.map((f) => f.path)).toEqual([`${id}/response.txt`, `${id}/response.json`]);
        // The text a later job of a graph reads: the stored result's `text`.
        expect(storedResult(w.state, id).text).toBe(want);
      }
      // The raw answer: the JSON body, or the stream's events.
      const rawPlain = JSON.parse(readFileSync(join(w.out, `${p.protocol}-json`, 'response.json'), 'utf8')) as unknown;
      const rawStream = JSON.parse(readFileSync(join(w.out, `${p.protocol}-stream`, 'response.json'), 'utf8')) as unknown;
      expect(Array.isArray(rawPlain)).toBe(false);
      expect(Array.isArray(rawStream) && rawStream.length > 2).toBe(true);
    }
    expect(readFileSync(join(w.out, 'row-1', 'response.txt'), 'utf8')).toBe(expected('vendorb/verse-4.5', 'Describe a lighthouse in a calm tone'));
    expect(readFileSync(join(w.out, 'row-2', 'response.txt'), 'utf8')).toBe(expected('vendorb/verse-4.5', 'Describe a red fox in a playful tone'));
    expect(rep.summary.chat).toMatchObject({ jobs: 10, done: 10, repeated_calls: 0 });
    expect(rep.summary.chat!.output_tokens).toBe(rep.jobs.reduce((n, j) => n + (j.usage?.output_tokens ?? 0), 0));
    expect(byId.get('img-1')!.files.length).toBeGreaterThan(0);
    expect(checkFiles(w.state, w.out)).toBe(1 + 20);

    // Resume after done: nothing is called again, nothing rewritten.
    const mtime = statSync(join(w.out, 'gemini-stream', 'response.txt')).mtimeMs;
    const again = await run(manifest, w.out, ['--json']);
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('"unchanged":11');
    expect(again.stdout).not.toContain('"type":"job"');
    expect(readJobs(w.state).map((j) => j.attempts)).toEqual(Array(11).fill(1));
    expect(statSync(join(w.out, 'gemini-stream', 'response.txt')).mtimeMs).toBe(mtime);
    expect(integrity(w.state)).toBe('ok');
    // The key is in no file of the output folder (state file included) and in no output.
    const all = findFiles(w.out, () => true);
    expect(all.length).toBeGreaterThan(20);
    for (const f of all) expect(readFileSync(f).includes(KEY), f).toBe(false);
    expect(r.stdout + again.stdout).not.toContain(KEY);
  }, 120_000);

  it('retries a 429, an error in the middle of a stream and a cut stream; attempts and the report count the repeats', async () => {
    const w = work();
    const manifest = join(w.dir, 'faults.yaml');
    writeFileSync(manifest, ['jobs:', chatJob('limited', 'vendora/chat-5', 'chat-completions', false, 'Say hi'), ''].join('\n'));
    const before = sb.stats().faults_injected['chat:429'] ?? 0;
    sb.script('chat', ['429']);
    const r = await run(manifest, w.out, ['--json']);
    expect(r.code).toBe(0);
    expect(sb.stats().faults_injected['chat:429']).toBe(before + 1);
    expect(r.stdout).toContain('"type":"retry"');
    expect(readJobs(w.state)[0]).toMatchObject({ state: 'done', attempts: 2 });
    expect(readFileSync(join(w.out, 'limited', 'response.txt'), 'utf8')).toBe(expected('vendora/chat-5', 'Say hi'));

    for (const p of PROTOCOLS) {
      const v = work();
      const m = join(v.dir, 'mid.yaml');
      writeFileSync(m, ['jobs:', chatJob('mid', p.model, p.protocol, true, `Stream for ${p.protocol}`), ''].join('\n'));
      sb.script('chat', ['500-after']);
      const a = await run(m, v.out);
      expect(a.code, a.stderr).toBe(0);
      expect(readJobs(v.state)[0]).toMatchObject({ state: 'done', attempts: 2 });
      const want = expected(p.model, `Stream for ${p.protocol}`);
      expect(readFileSync(join(v.out, 'mid', 'response.txt'), 'utf8')).toBe(want);
      // response.json holds the successful stream only (no error event).
      const events = JSON.parse(readFileSync(join(v.out, 'mid', 'response.json'), 'utf8')) as Array<{ event: string | null; data: unknown }>;
      const isError = (e: { event: string | null; data: unknown }) =>
        e.event === 'error' || (typeof e.data === 'object' && e.data !== null && 'error' in e.data && Boolean(e.data.error)) || (typeof e.data === 'object' && e.data !== null && 'type' in e.data && e.data.type === 'error');
      expect(events.length).toBeGreaterThan(2);
      expect(events.filter(isError)).toEqual([]);
      expect(report(v.out).summary.chat).toMatchObject({ jobs: 1, done: 1, repeated_calls: 1 });
      expect(report(v.out).jobs[0]!.attempts).toBe(2);
    }

    const c = work();
    const cm = join(c.dir, 'cut.yaml');
    writeFileSync(cm, ['jobs:', chatJob('cut', 'vendorb/verse-4.5', 'messages', true, 'Cut me'), ''].join('\n'));
    sb.script('chat', ['drop-after', '502']);
    const b = await run(cm, c.out);
    expect(b.code).toBe(0);
    expect(readJobs(c.state)[0]).toMatchObject({ state: 'done', attempts: 3 });
    expect(readFileSync(join(c.out, 'cut', 'response.txt'), 'utf8')).toBe(expected('vendorb/verse-4.5', 'Cut me'));
  }, 120_000);

  it('SIGINT during a call: the job goes back to pending (exit 130); the next run makes the call again', async () => {
    const w = work();
    const manifest = join(w.dir, 'sigint.yaml');
    writeFileSync(manifest, ['jobs:', chatJob('waiting', 'vendora/chat-5', 'responses', true, 'Wait for it'), ''].join('\n'));
    sb.script('chat', ['slow']);
    const calls = sb.stats().requests.chat ?? 0;
    const child = spawnCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--yes'], { GENBATCH_API_KEY: KEY });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    await waitForState(w.state, 'waiting', 'submitting');
    // Stopped while the slow call is at the sandbox (else the slow step waits for the next run's call).
    await waitForCall(calls);
    child.kill('SIGINT');
    expect(await exited).toBe(130);
    expect(readJobs(w.state)[0]).toMatchObject({ state: 'pending', attempts: 1 });
    expect(readJobs(w.state)[0]!.last_error).toContain('stopped during the chat call');
    const r = await run(manifest, w.out);
    expect(r.code).toBe(0);
    expect(readJobs(w.state)[0]).toMatchObject({ state: 'done', attempts: 2 });
    expect(readFileSync(join(w.out, 'waiting', 'response.txt'), 'utf8')).toBe(expected('vendora/chat-5', 'Wait for it'));
  }, 60_000);

  it('manifests/chat-captions.yaml validates and runs with --sandbox: 100 captions, every one the sandbox reply to its row', async () => {
    const w = work();
    const v = await runCli(['validate', 'manifests/chat-captions.yaml']);
    expect(v.code).toBe(0);
    expect(v.stdout).toContain('100 jobs, all valid');
    const r = await runCli(['run', 'manifests/chat-captions.yaml', '--sandbox', '--out', w.out]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const jobs = readJobs(w.state);
    expect(jobs.length).toBe(100);
    expect(jobs.every((j) => j.state === 'done')).toBe(true);
    const rep = report(w.out);
    expect(rep.summary.chat).toMatchObject({ jobs: 100, done: 100 });
    // Row 1 of PartiPrompts: "bond", category Abstract; the template filled it.
    for (const id of ['caption-messages-1', 'caption-gemini-1']) expect(rep.jobs.find((j) => j.id === id)!.texts['response.txt']).toMatch(/^Echo: Caption an image of \(Abstract\): bond /);
  }, 120_000);

  it('a crash during a call: the next run makes the call again (no uncertain state); a 400 fails the job', async () => {
    const w = work();
    const manifest = join(w.dir, 'crash.yaml');
    writeFileSync(manifest, ['jobs:', chatJob('slow', 'vendorc/lumen-2.5-flash', 'gemini', true, 'Take your time'), chatJob('bad', 'vendora/chat-5', 'chat-completions', false, 'Bad request'), ''].join('\n').replace('      stream: false', '      stream: false\n      max_tokens: -1'));
    sb.script('chat', ['slow']);
    const calls = sb.stats().requests.chat ?? 0;
    const child = spawnCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', w.out, '--yes', '--concurrency', '1'], { GENBATCH_API_KEY: KEY });
    const exited = new Promise<void>((resolve) => child.on('close', () => resolve()));
    // Kill -9 once the intent of the slow call is committed and the call is at the sandbox.
    await waitForState(w.state, 'slow', 'submitting');
    await waitForCall(calls);
    child.kill('SIGKILL');
    await exited;
    expect(readJobs(w.state).find((j) => j.id === 'slow')).toMatchObject({ state: 'submitting', attempts: 1 });

    const r = await run(manifest, w.out, ['--json']);
    expect(r.stdout).not.toContain('"type":"recovered"');
    const jobs = readJobs(w.state);
    expect(jobs.find((j) => j.id === 'slow')).toMatchObject({ state: 'done', attempts: 2 });
    expect(readFileSync(join(w.out, 'slow', 'response.txt'), 'utf8')).toBe(expected('vendorc/lumen-2.5-flash', 'Take your time'));
    const bad = jobs.find((j) => j.id === 'bad')!;
    expect(bad.state).toBe('failed');
    expect(bad.last_error).toContain('max_tokens');
    expect(r.code).toBe(6); // a 400 refused the input: a permanent failure, nothing a retry fixes
    expect(report(w.out).summary.chat).toMatchObject({ jobs: 2, done: 1, repeated_calls: 1 });
  }, 120_000);
});
