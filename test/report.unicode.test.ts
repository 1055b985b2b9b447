import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeReports, type ReportData, type ReportJob } from '../src/report/index.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { pageRows } from './helpers/page.js';
import { tempDir } from './helpers/tmp.js';

/**
 * Texts cut to a length in the reports (a chat answer in report.html, an error in report.md)
 * never split a character outside the Basic Multilingual Plane (an emoji is two UTF-16 units):
 * half of one is written as U+FFFD.
 */
const SCALE = '0.005';
const KEY = 'sk-test-report-unicode-0123456789';
let sb: Sandbox;
const cleanups: Array<() => void> = [];
const REPLACEMENT = '\uFFFD';

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 3 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  while (cleanups.length) cleanups.pop()!();
});

function work(): string {
  const t = tempDir('genbatch-report-unicode-');
  cleanups.push(t.cleanup);
  return t.dir;
}

describe('cut texts in the reports', () => {
  it('report.html: a chat answer cut at 4000 characters drops an emoji whole instead of writing half of it', async () => {
    const dir = work();
    const out = join(dir, 'out');
    // The sandbox answers "Echo: <message> <sentence>": "Echo: " + 3993 letters puts the emoji on units 3999-4000.
    const user = `${'a'.repeat(3993)}\u{1F600} end`;
    const manifest = join(dir, 'm.yaml');
    writeFileSync(manifest, ['jobs:', '  - id: u1', '    model: vendora/chat-5', '    input:', '      messages:', `        - {role: user, content: "${user}"}`].join('\n') + '\n');
    const r = await runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(join(out, 'u1', 'response.txt'), 'utf8')).toContain('\u{1F600}');
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    expect(html).not.toContain(REPLACEMENT);
    const text = pageRows(html).rows[0]!.texts[0]![1];
    expect(text.endsWith(`${'a'.repeat(40)}…`)).toBe(true);
    expect(html).not.toMatch(/\\ud83d(?!\\ude00)/i);
  }, 60_000);

  it('report.md: an error cut to 500 characters drops an emoji whole instead of writing half of it', async () => {
    const out = work();
    const job: ReportJob = {
      id: 'f1',
      model: 'm',
      where: 'm.yaml:2',
      input: null,
      prompt: null,
      vars: {},
      task_id: null,
      state: 'failed',
      attempts: 1,
      error: `${'e'.repeat(498)}\u{1F600} and more`,
      estimated_credits: null,
      files: [],
      texts: {},
      submitted_at: null,
      finished_at: null,
    };
    const data: ReportData = {
      summary: {
        manifest: join(out, 'm.yaml'),
        out_dir: out,
        base_url: 'http://127.0.0.1:1/',
        sandbox: true,
        started_at: '2026-11-21T10:00:00.000Z',
        finished_at: '2026-11-21T10:00:01.000Z',
        wall_seconds: 1,
        counts: { failed: 1 },
        credits: { estimated_known: 0, unknown_price_jobs: 1, balance_before: null, balance_after: null, charged: null, user_prices: false, invocations: [] },
      },
      jobs: () => [job],
    };
    await writeReports(out, data);
    const md = readFileSync(join(out, 'report.md'), 'utf8');
    expect(md).not.toContain(REPLACEMENT);
    expect(md).toContain(`${'e'.repeat(498)}…\``);
  });
});
