/**
 * One pass over the jobs feeds the four report writers: the bytes must stay exactly those the
 * four separate passes wrote before. test/fixtures/report-onepass/ holds the reports written by
 * the multi-pass writers (commit d357467; regenerated when the reports gained prompts, inputs and
 * variables) for the varied jobs below; regenerate only on purpose
 * (GENBATCH_WRITE_REPORT_FIXTURES=1).
 */
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildReportData } from '../src/engine/finish/report-data.js';
import { writeCsvReport, writeHtmlReport, writeJsonReport, writeMarkdownReport, writeReports, type ReportData, type ReportJob, type ReportOptions, type ReportSummary } from '../src/report/index.js';
import { Store, type JobInput } from '../src/store/index.js';
import { tempDir } from './helpers/tmp.js';

const FIXTURES = join(import.meta.dirname, 'fixtures', 'report-onepass');
const NAMES = ['report.json', 'report.csv', 'report.md', 'report.html'] as const;

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function fresh(): string {
  const t = tempDir('genbatch-report-onepass-');
  cleanups.push(t.cleanup);
  return t.dir;
}

const HOSTILE = `HTTP 400 invalid_request: prompt "<script>alert('x')</script>" & 'q', bad, value\r\nsecond | line *star* _u_ [l](x) ~t~ \\ back\`tick\` \`\`\`fence\`\`\``;

function job(id: string, state: string, extra: Partial<ReportJob> = {}): ReportJob {
  return {
    id, model: 'flash-image', where: `m.yaml:${id.length}`, input: null, prompt: null, vars: {}, task_id: null, state, attempts: 1, error: null,
    estimated_credits: 4, files: [], texts: {}, submitted_at: null, finished_at: null, ...extra,
  };
}

const file = (path: string, type: string, contentType: string | null, size: number): ReportJob['files'][number] => ({ path, size, sha256: `${size}`.padStart(64, 'f'), type, contentType });

/** Varied jobs: every state, several files, texts, chat usage, hostile text, long errors, odd numbers. */
function* varied(n: number): Generator<ReportJob> {
  for (let i = 0; i < n; i++) {
    const k = i % 12;
    const t = { submitted_at: `2026-11-21T10:${String(i % 60).padStart(2, '0')}:01.000Z`, finished_at: `2026-11-21T11:00:${String(i % 60).padStart(2, '0')}.5Z` };
    if (k === 0)
      yield job(`img${i}`, 'done', {
        ...t, task_id: `t-${i}`, estimated_credits: 0.1 + i / 3,
        where: `m.yaml:3, matrix mood=rainy, size=${i}:1`, vars: { mood: 'rainy', size: `${i}:1` },
        prompt: `A "harbour" <b>&</b> ${'long '.repeat(i % 5)}</script>`, input: { prompt: `A "harbour" <b>&</b> ${'long '.repeat(i % 5)}</script>`, size: `${i}:1`, image_urls: ['https://h/x.png'] },
        files: [file(`img${i}/image-1.png`, 'image', 'image/png', 1000 + i), file(`img${i}/image 2#?&.webp`, 'other', null, 5), file(`img${i}/clip.MOV`, 'other', null, 2 ** 31 + i), file(`img${i}/sound`, 'other', 'audio/ogg', 3)],
      });
    else if (k === 1)
      yield job(`song,"${i}"`, 'done', {
        ...t, model: 'music-v5', estimated_credits: null, attempts: 2,
        prompt: 'indie folk', input: { custom_mode: true, instrumental: true, style: 'indie folk', title: 'Harbour Lights' },
        files: [file(`song${i}/track-1.mp3`, 'audio', 'audio/mpeg', 4_000_000), file(`song${i}/lyrics.txt`, 'text', 'text/plain', 12)],
        texts: { lyrics: `<b>la la</b> & "more" ${'x'.repeat(i % 24 === 1 ? 4100 : 3)}`, style: 'é ü 中文 \u2028 😀' },
      });
    else if (k === 2) yield job(`chat${i}`, i % 24 === 2 ? 'failed' : 'done', { ...t, model: 'chat-x', prompt: `caption ${i}`, vars: { row: `${i}` }, where: `m.yaml:9, p.tsv:row ${i}`, input: { messages: [{ role: 'user', content: `caption ${i}` }], stream: true }, texts: i % 24 === 2 ? {} : { text: `Hello,\n"world" ${i}` }, usage: i % 24 === 2 ? null : { input_tokens: 10 + i, output_tokens: 20 }, error: i % 24 === 2 ? HOSTILE : null });
    else if (k === 3) yield job(`bad<${i}>`, 'failed', { task_id: `t&${i}`, error: i % 36 === 3 ? `${HOSTILE} ${'long '.repeat(600)}` : `${HOSTILE} ${i}`, attempts: 3 });
    else if (k === 4) yield job(`unsure${i}`, 'uncertain', { error: 'submit outcome unknown, a task may have been created: HTTP 502', estimated_credits: 0 });
    else if (k === 5) yield job(`old${i}`, 'expired', { task_id: `t-old${i}`, error: 'results expired before download (`files` gone)', where: '' });
    else if (k === 6) yield job(`skip${i}`, 'skipped', { error: i % 24 === 6 ? null : 'skipped: a parent failed', model: '' });
    else if (k === 7) yield job(`exists${i}`, 'exists', { files: [file(`../outside${i}.png`, 'image', 'image/png', 1), file(`/abs${i}.png`, 'image', null, 2), file(`a\\b${i}.mp4`, 'video', null, 3)] });
    else if (k === 8) yield job(`vid${i}`, 'done', { ...t, model: 'vidmodel2.5', files: [file(`vid${i}/video.mp4`, 'video', 'video/mp4', 2048)], estimated_credits: 1e21 });
    else if (k === 9) yield job(`later${i}`, 'pending', { estimated_credits: null, usage: null });
    else if (k === 10) yield job(`run${i}`, i % 24 === 10 ? 'submitted' : 'downloading', { task_id: `t${i}`, estimated_credits: -0 });
    else yield job(`\`tick\`${i}`, 'done', { where: 'jobs.csv:row 7', texts: { '<name>': '' }, files: [file(`t${i}/out.json`, 'json', 'application/json', 0)] });
  }
}

/** varied: a run stopped (killed) and resumed twice; capped: one invocation not measured yet; empty: none. */
function invocationsOf(n: number, chat: boolean): ReportSummary['credits']['invocations'] {
  const inv = (k: number, before: number | null, after: number | null, charged: number | null, to: 'end' | 'next-start' | null, submits: number | null) => ({
    n: k, started_at: `2026-11-21T10:0${k}:00.000Z`, finished_at: after === null ? null : `2026-11-21T10:0${k}:30.000Z`,
    balance_before: before, balance_before_at: before === null ? null : `2026-11-21T10:0${k}:01.000Z`,
    balance_after: after, balance_after_at: after === null ? null : `2026-11-21T10:0${k}:29.000Z`, submits, charged, charged_to: to,
  });
  if (chat) return [inv(1, 1000, null, 50, 'next-start', 25), inv(2, 950, 950, 0, 'end', 0), inv(3, 950, 880.125, 69.875, 'end', null)];
  return n === 0 ? [] : [inv(1, 1000, null, null, null, 7)];
}

function summaryOf(n: number, chat: boolean): ReportSummary {
  const counts: Record<string, number> = {};
  for (const j of varied(n)) counts[j.state] = (counts[j.state] ?? 0) + 1;
  return {
    manifest: '/data/demo <b>&.yaml', out_dir: '/data/out `x`', base_url: 'http://user:s3cret@127.0.0.1:8080/?key=qz9canary#frag', sandbox: chat,
    started_at: '2026-11-21T10:00:00.000Z', finished_at: '2026-11-21T10:04:05.000Z', wall_seconds: 245.25, counts,
    credits: { estimated_known: 120.5, unknown_price_jobs: 3, balance_before: chat ? 1000 : n === 0 ? null : 1000, balance_after: chat ? 880.125 : null, charged: chat ? 119.875 : n === 0 ? 0 : null, user_prices: chat, invocations: invocationsOf(n, chat) },
    ...(chat ? { chat: { jobs: 9, done: 8, repeated_calls: 1, input_tokens: 1234, output_tokens: 567 } } : {}),
  };
}

interface Case {
  name: string;
  n: number;
  chat: boolean;
  options: ReportOptions;
}

const CASES: Case[] = [
  { name: 'varied', n: 120, chat: true, options: {} },
  { name: 'capped', n: 300, chat: false, options: { galleryLimit: 7, problemLimit: 5, mdListLimit: 3 } },
  { name: 'empty', n: 0, chat: false, options: {} },
];

const dataOf = (c: Case): ReportData => ({ summary: summaryOf(c.n, c.chat), jobs: () => varied(c.n) });
const read = (dir: string): string[] => NAMES.map((n) => readFileSync(join(dir, n), 'utf8'));

describe('reports written in one pass', () => {
  it.each(CASES)('$name: the same bytes as the multi-pass writers wrote', async (c) => {
    const out = fresh();
    if (process.env.GENBATCH_WRITE_REPORT_FIXTURES === '1') {
      const dir = join(FIXTURES, c.name);
      mkdirSync(dir, { recursive: true });
      await writeReports(dir, dataOf(c), c.options);
    }
    let passes = 0;
    const data = dataOf(c);
    await writeReports(out, { summary: data.summary, jobs: () => (passes++, data.jobs()) }, c.options);
    expect(passes).toBe(1);
    const expected = read(join(FIXTURES, c.name));
    const got = read(out);
    for (let i = 0; i < NAMES.length; i++) expect(got[i], NAMES[i]).toBe(expected[i]);
    expect(readdirSync(out).filter((n) => n.endsWith('.tmp'))).toEqual([]);
  });

  it.each(CASES)('$name: the single-report functions write the same bytes', async (c) => {
    const out = fresh();
    const data = dataOf(c);
    await writeJsonReport(join(out, 'report.json'), data);
    await writeCsvReport(join(out, 'report.csv'), data);
    await writeMarkdownReport(join(out, 'report.md'), data, c.options.mdListLimit);
    await writeHtmlReport(join(out, 'report.html'), data, c.options);
    expect(read(out)).toEqual(read(join(FIXTURES, c.name)));
  });

  it('an error mid-pass (after chunks reached the temp files) replaces none of the four reports and leaves no temp file', async () => {
    const out = fresh();
    for (const n of NAMES) writeFileSync(join(out, n), `previous ${n}`);
    const c = CASES[1]!;
    const data: ReportData = {
      summary: summaryOf(c.n, false),
      jobs: function* () {
        for (let round = 0; round < 20; round++) yield* varied(c.n);
        throw new Error('state file went away');
      },
    };
    await expect(writeReports(out, data)).rejects.toThrow('state file went away');
    expect(read(out)).toEqual(NAMES.map((n) => `previous ${n}`));
    expect(readdirSync(out).sort()).toEqual([...NAMES].sort());
  });
});
