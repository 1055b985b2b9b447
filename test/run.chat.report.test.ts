import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { countTokens, replyText } from '../src/sandbox/chat/reply.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/** Chat token usage in every report: a chat section in report.md and report.html, input/output token columns in report.csv. */
const SCALE = '0.005';
const KEY = 'sk-test-chat-report-0123456789';
const SEED = 12;
let sb: Sandbox;
const t = tempDir('genbatch-chat-report-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: SEED });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

describe('chat usage in the reports', () => {
  it('report.md and report.html summarise chat jobs and tokens; report.csv has input_tokens and output_tokens after the first columns', async () => {
    const manifest = join(t.dir, 'chat.yaml');
    writeFileSync(
      manifest,
      `jobs:
  - id: a
    model: vendora/chat-5
    input: {messages: [{role: user, content: "one two three"}]}
  - id: b
    model: vendorb/verse-4.5
    protocol: messages
    input: {max_tokens: 100, stream: true, messages: [{role: user, content: "four five"}]}
  - id: pic
    model: alpha-image-2
    input: {prompt: "a quiet harbour", quality: low}
`,
    );
    const out = join(t.dir, 'out');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    const tokens = (model: string, user: string) => ({ input: countTokens(user), output: countTokens(replyText(SEED, { model, texts: [user], lastUser: user })) });
    const a = tokens('vendora/chat-5', 'one two three');
    const b = tokens('vendorb/verse-4.5', 'four five');
    const input = a.input + b.input;
    const output = a.output + b.output;

    const md = readFileSync(join(out, 'report.md'), 'utf8');
    expect(md).toContain(`## Chat\n\n| Chat jobs | Done | Repeated calls | Input tokens | Output tokens |\n| ---: | ---: | ---: | ---: | ---: |\n| 2 | 2 | 0 | ${input} | ${output} |`);
    const line = `2 chat jobs (2 done), 0 repeated calls (a call cut short by a crash or a retry is made again), ${input} input and ${output} output tokens`;
    expect(md).toContain(`In one line: ${line}.`);
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    expect(html).toContain(`<dt>Chat</dt><dd>${line}</dd>`);

    const csv = readFileSync(join(out, 'report.csv'), 'utf8');
    expect(csv.split('\r\n')[0]).toBe('id,model,where,state,task_id,attempts,estimated_credits,files,bytes,error,input_tokens,output_tokens,prompt,vars,input,mark');
    const rows = parse(csv, { columns: true }) as Array<Record<string, string>>;
    expect(rows.map((x) => [x.id, x.input_tokens, x.output_tokens])).toEqual([
      ['a', String(a.input), String(a.output)],
      ['b', String(b.input), String(b.output)],
      ['pic', '', ''],
    ]);
  }, 60_000);

  it('a run without chat jobs has no chat section', async () => {
    const manifest = join(t.dir, 'img.yaml');
    writeFileSync(manifest, 'jobs:\n  - id: pic\n    model: alpha-image-2\n    input: {prompt: "a quiet harbour", quality: low}\n');
    const out = join(t.dir, 'out-img');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(out, 'report.md'), 'utf8')).not.toContain('## Chat');
    expect(readFileSync(join(out, 'report.html'), 'utf8')).not.toContain('<dt>Chat</dt>');
  }, 60_000);

  it('report.md and report.html show a charge below 0.005 credits (one short chat call) as it is, not as 0', async () => {
    const manifest = join(t.dir, 'tiny.yaml');
    writeFileSync(manifest, ['jobs:', '  - id: t1', '    model: vendora/chat-5', '    input:', '      max_tokens: 1', '      messages:', '        - {role: user, content: "hi"}'].join('\n') + '\n');
    const out = join(t.dir, 'out-tiny');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    const charged = (JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { summary: { credits: { charged: number } } }).summary.credits.charged;
    expect(charged).toBeGreaterThan(0);
    expect(charged).toBeLessThan(0.005);
    const md = readFileSync(join(out, 'report.md'), 'utf8');
    expect(md).toContain(`- Charged over the run (1 invocation): ${charged}\n`);
    expect(md).toContain(`, charged ${charged} (balance`);
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain(`, charged ${charged} (balance`);
  }, 60_000);

  it('report.html of a run with one job says "Jobs (1)"', async () => {
    const out = join(t.dir, 'out-tiny');
    const r = await runCli(['report', join(t.dir, 'tiny.yaml'), '--state', join(out, 'state.db')]);
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain('>Jobs (1)</h2>');
  }, 60_000);
});
