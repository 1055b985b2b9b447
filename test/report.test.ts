import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterEach, describe, expect, it } from 'vitest';
import { formatSummaryLine, writeReports, type ReportData, type ReportFile, type ReportJob, type ReportSummary } from '../src/report/index.js';
import { fileHref, mediaKind } from '../src/report/html.js';
import { pageRows } from './helpers/page.js';
import { tempDir } from './helpers/tmp.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()!();
});

function fresh(): string {
  const t = tempDir('genbatch-report-');
  cleanups.push(t.cleanup);
  return t.dir;
}

const HOSTILE = `HTTP 400 invalid_request: prompt "<script>alert('x')</script>", bad, value\nsecond line`;

const summary = (counts: Record<string, number>): ReportSummary => ({
  manifest: '/data/demo <b>.yaml',
  out_dir: '/data/out',
  base_url: 'http://user:s3cret@127.0.0.1:8080/?key=qz9canary',
  sandbox: true,
  started_at: '2026-11-21T10:00:00.000Z',
  finished_at: '2026-11-21T10:04:05.000Z',
  wall_seconds: 245,
  counts,
  credits: {
    estimated_known: 120.5, unknown_price_jobs: 1, balance_before: 1000, balance_after: 880, charged: 120, user_prices: false,
    invocations: [{ n: 1, started_at: '2026-11-21T10:00:00.000Z', finished_at: '2026-11-21T10:04:05.000Z', balance_before: 1000, balance_before_at: '2026-11-21T10:00:01.000Z', balance_after: 880, balance_after_at: '2026-11-21T10:04:04.000Z', submits: 9, charged: 120, charged_to: 'end' }],
  },
});

/** Write a real result file under `out` and describe it as the downloader would. */
function realFile(out: string, path: string, type: string, contentType: string | null, bytes: Buffer): ReportFile {
  const full = join(out, ...path.split('/'));
  mkdirSync(join(full, '..'), { recursive: true });
  writeFileSync(full, bytes);
  return { path, size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex'), type, contentType };
}

function job(id: string, state: string, extra: Partial<ReportJob> = {}): ReportJob {
  return {
    id, model: 'flash-image', where: `m.yaml:${id.length}`, input: null, prompt: null, vars: {}, task_id: null, state, attempts: 1, error: null,
    estimated_credits: 4, files: [], texts: {}, usage: null, submitted_at: null, finished_at: null, ...extra,
  };
}

function fixture(out: string): ReportJob[] {
  return [
    job('img', 'done', {
      task_id: 't-img', submitted_at: '2026-11-21T10:00:01Z', finished_at: '2026-11-21T10:00:30Z',
      files: [
        realFile(out, 'img/image-1.png', 'image', 'image/png', Buffer.from('png-bytes-1')),
        realFile(out, 'img/image 2#?.png', 'image', null, Buffer.from('png-bytes-two')),
      ],
    }),
    job('song', 'done', {
      model: 'music-v5', task_id: 't-song', estimated_credits: null,
      files: [realFile(out, 'song/track-1.mp3', 'audio', 'audio/mpeg', Buffer.from('mp3')), realFile(out, 'song/lyrics.txt', 'text', 'text/plain', Buffer.from('la la'))],
      texts: { lyrics: '<b>la la</b> & "more"' },
    }),
    job('clip', 'done', { model: 'vidmodel2.5', task_id: 't-clip', attempts: 2, files: [realFile(out, 'clip/video.mp4', 'video', 'video/mp4', Buffer.alloc(2048, 1))] }),
    job('chat', 'done', { model: 'chat-x', texts: { text: 'Hello,\n"world"' }, usage: { input_tokens: 10, output_tokens: 20 } }),
    job('evil', 'done', { files: [{ path: '../outside.png', size: 1, sha256: 'a'.repeat(64), type: 'image', contentType: 'image/png' }] }),
    job('job,"quoted"', 'failed', { task_id: 't-bad', error: HOSTILE, attempts: 3 }),
    job('unsure', 'uncertain', { error: 'submit outcome unknown, a task may have been created: HTTP 502' }),
    job('old', 'expired', { task_id: 't-old', error: 'results expired before download (`files` gone)' }),
    job('later', 'pending', { estimated_credits: null }),
  ];
}

const counts = { done: 5, failed: 1, uncertain: 1, expired: 1, pending: 1 };
const dataOf = (jobs: ReportJob[], s = summary(counts)): ReportData => ({ summary: s, jobs: () => jobs });
const tempsIn = (dir: string): string[] => readdirSync(dir).filter((n) => n.endsWith('.tmp'));

describe('writeReports', () => {
  it('writes the four reports with the right content and leaves no temp file', async () => {
    const out = fresh();
    const jobs = fixture(out);
    const paths = await writeReports(out, dataOf(jobs));
    expect(paths).toEqual({ json: join(out, 'report.json'), csv: join(out, 'report.csv'), md: join(out, 'report.md'), html: join(out, 'report.html') });
    expect(tempsIn(out)).toEqual([]);

    // report.json
    const report = JSON.parse(readFileSync(paths.json, 'utf8'));
    expect(report.summary).toEqual({ ...summary(counts), base_url: 'http://127.0.0.1:8080/' });
    expect(report.jobs).toHaveLength(jobs.length);
    expect(report.jobs.map((j: { id: string }) => j.id)).toEqual(jobs.map((j) => j.id));
    const failed = report.jobs[5];
    expect(failed).toMatchObject({ id: 'job,"quoted"', state: 'failed', task_id: 't-bad', attempts: 3, error: HOSTILE, files: [] });
    expect(report.jobs[3].usage).toEqual({ input_tokens: 10, output_tokens: 20 });
    expect(report.jobs[1].texts).toEqual({ lyrics: '<b>la la</b> & "more"' });
    for (const j of report.jobs.slice(0, 4)) {
      for (const f of j.files as Array<{ path: string; size: number; sha256: string }>) {
        const bytes = readFileSync(join(out, ...f.path.split('/')));
        expect(f.size).toBe(bytes.length);
        expect(f.sha256).toBe(createHash('sha256').update(bytes).digest('hex'));
      }
    }
    expect(report.jobs[0].files[1]).toEqual({ path: 'img/image 2#?.png', size: 13, sha256: jobs[0]!.files[1]!.sha256, type: 'image', content_type: null });

    // report.csv
    const csvText = readFileSync(paths.csv, 'utf8');
    expect(csvText.split('\r\n')[0]).toBe('id,model,where,state,task_id,attempts,estimated_credits,files,bytes,error,input_tokens,output_tokens,prompt,vars,input,mark');
    expect(csvText).toContain('"job,""quoted"""');
    const rows = parse(csvText, { columns: true }) as Array<Record<string, string>>;
    expect(rows).toEqual(
      jobs.map((j) => ({
        id: j.id, model: j.model, where: j.where, state: j.state, task_id: j.task_id ?? '', attempts: String(j.attempts),
        estimated_credits: j.estimated_credits === null ? '' : String(j.estimated_credits),
        files: String(j.files.length), bytes: String(j.files.reduce((n, f) => n + f.size, 0)), error: j.error ?? '',
        input_tokens: j.usage ? String(j.usage.input_tokens) : '', output_tokens: j.usage ? String(j.usage.output_tokens) : '',
        prompt: j.prompt ?? '', vars: Object.entries(j.vars).map(([k, v]) => `${k}=${v}`).join(', '), input: j.input === null ? '' : JSON.stringify(j.input), mark: '',
      })),
    );
    expect(rows[5]!.error).toContain('\nsecond line');

    // report.md
    const md = readFileSync(paths.md, 'utf8');
    expect(md).toContain('| done | 5 |');
    expect(md).toContain('| total | 9 |');
    expect(md).toContain('## Failed (1)');
    expect(md).toContain('- `job,"quoted"`');
    expect(md).toContain(`\`HTTP 400 invalid_request: prompt "<script>alert('x')</script>", bad, value second line\``);
    expect(md).toMatch(/## Uncertain .*\(1\)\n\n- `unsure`.*HTTP 502/);
    expect(md).toMatch(/## Expired .*\(1\)\n\n- `old`.*results expired before download/);
    expect(md).toContain('``results expired before download (`files` gone)``');
    expect(md).toContain('wall time 4m 05s');
    expect(md).toContain('- Charged over the run (1 invocation): 120\n');

    // report.html: every job rides in the page's data; the problems are plain HTML.
    const html = readFileSync(paths.html, 'utf8');
    const { rows: page, more } = pageRows(html);
    expect(more).toBe(0);
    expect(page.map((r) => r.id)).toEqual(jobs.map((j) => j.id));
    const img = page.find((r) => r.id === 'img')!;
    expect(img.files.map((f) => [f.href, f.kind])).toEqual([['img/image-1.png', 'i'], ['img/image%202%23%3F.png', 'i']]);
    const song = page.find((r) => r.id === 'song')!;
    expect(song.files.map((f) => [f.href, f.kind])).toEqual([['song/track-1.mp3', 'a'], ['song/lyrics.txt', 't']]);
    expect(song.texts).toEqual([['lyrics', '<b>la la</b> & "more"']]);
    expect(page.find((r) => r.id === 'clip')!.files[0]).toMatchObject({ href: 'clip/video.mp4', kind: 'v' });
    expect(page.find((r) => r.id === 'chat')!.texts).toEqual([['text', 'Hello,\n"world"']]);
    expect(page.find((r) => r.id === 'evil')!.files[0]).toMatchObject({ href: null, path: '../outside.png' });
    // Two scripts of data (never run) and one script, our own, allowed by its hash; nothing from the jobs runs.
    expect(html.match(/<script/gi)).toHaveLength(3);
    expect(html.match(/<script type="application\/json"/g)).toHaveLength(2);
    const script = /<script>([\s\S]*?)<\/script>/.exec(html)![1]!;
    expect(html).toContain(`script-src 'sha256-${createHash('sha256').update(script).digest('base64')}'`);
    expect(html).not.toContain('<b>');
    expect(html.split('<script>')[0]).not.toContain('</script><');
    expect(html).toContain('&#60;script&#62;alert(&#39;x&#39;)&#60;/script&#62;');
    expect(html).toContain('job,&#34;quoted&#34;');
    expect(html).toContain('Failed, uncertain and expired jobs (3)');
    expect(page.flatMap((r) => r.files).filter((f) => f.href !== null && /^(\.\.|\/|[a-z]+:)/i.test(f.href))).toEqual([]);
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);

    // No secret from the base URL reaches any report.
    for (const p of Object.values(paths)) {
      const text = readFileSync(p, 'utf8');
      expect(text).not.toContain('s3cret');
      expect(text).not.toContain('qz9canary');
    }
  });

  it('caps the gallery and the lists, and streams a large run', async () => {
    const out = fresh();
    const n = 20_000;
    function* many(): Generator<ReportJob> {
      for (let i = 0; i < n; i++) {
        const failed = i % 10 === 0;
        yield job(`j${i}`, failed ? 'failed' : 'done', {
          error: failed ? `boom ${i}` : null,
          files: failed ? [] : [{ path: `j${i}/image-1.png`, size: 100, sha256: 'b'.repeat(64), type: 'image', contentType: 'image/png' }],
        });
      }
    }
    let passes = 0;
    const data: ReportData = { summary: summary({ done: n - n / 10, failed: n / 10 }), jobs: () => (passes++, many()) };
    const paths = await writeReports(out, data, { galleryLimit: 30, problemLimit: 5, mdListLimit: 7 });
    // One pass over the jobs feeds the four reports.
    expect(passes).toBe(1);
    const report = JSON.parse(readFileSync(paths.json, 'utf8'));
    expect(report.jobs).toHaveLength(n);
    expect(report.jobs[n - 1].id).toBe(`j${n - 1}`);
    expect(readFileSync(paths.csv, 'utf8').split('\r\n')).toHaveLength(n + 2);
    const md = readFileSync(paths.md, 'utf8');
    expect(md).toContain(`## Failed (${n / 10})`);
    expect(md.match(/^- `j\d+`/gm)).toHaveLength(7);
    expect(md).toContain(`and ${n / 10 - 7} more`);
    const html = readFileSync(paths.html, 'utf8');
    expect(pageRows(html).rows).toHaveLength(30);
    expect(pageRows(html).more).toBe(n - 30);
    expect(html).toContain(`Only the first 30 jobs are in this page`);
    expect(html).toContain(`${n - 30} more are listed`);
    expect(html).toContain(`and ${n / 10 - 5} more, listed in report.csv`);
    expect(tempsIn(out)).toEqual([]);
  });

  it('an error mid-way keeps the previous report under its final name and removes the temp file', async () => {
    const out = fresh();
    writeFileSync(join(out, 'report.json'), 'previous report');
    const data: ReportData = {
      summary: summary({ done: 3 }),
      jobs: function* () {
        yield job('a', 'done');
        yield job('b', 'done');
        throw new Error('state file went away');
      },
    };
    await expect(writeReports(out, data)).rejects.toThrow('state file went away');
    expect(readFileSync(join(out, 'report.json'), 'utf8')).toBe('previous report');
    expect(readdirSync(out).sort()).toEqual(['report.json']);
  });

  it('removes report temp files left by a dead process, not those of a live one', async () => {
    const out = fresh();
    const dead = '.report.json.999999999.abcd1234.tmp';
    const live = `.report.csv.${process.pid}.abcd1234.tmp`;
    const unrelated = 'c1.part.tmp';
    for (const name of [dead, live, unrelated]) writeFileSync(join(out, name), 'x');
    await writeReports(out, dataOf([job('a', 'done')], summary({ done: 1 })));
    const names = readdirSync(out);
    expect(names).not.toContain(dead);
    expect(names).toContain(live);
    expect(names).toContain(unrelated);
  });

  it('writes valid reports for a run with no jobs', async () => {
    const out = join(fresh(), 'new', 'folder');
    const paths = await writeReports(out, dataOf([], summary({})));
    expect(JSON.parse(readFileSync(paths.json, 'utf8')).jobs).toEqual([]);
    expect(parse(readFileSync(paths.csv, 'utf8'), { columns: true })).toEqual([]);
    expect(readFileSync(paths.html, 'utf8')).toContain('No jobs.');
  });
});

describe('html helpers', () => {
  it('picks the player from file_type, then content type, then extension', () => {
    const f = (path: string, type: string, contentType: string | null): ReportFile => ({ path, size: 1, sha256: '', type, contentType });
    expect(mediaKind(f('a/x.bin', 'video', null))).toBe('video');
    expect(mediaKind(f('a/x.bin', 'other', 'video/webm'))).toBe('video');
    expect(mediaKind(f('a/x.WAV', 'other', null))).toBe('audio');
    expect(mediaKind(f('a/x.jpeg', 'other', 'application/octet-stream'))).toBe('image');
    expect(mediaKind(f('a/x.glb', '3d', 'model/gltf-binary'))).toBeNull();
  });

  it('links only plain relative paths, encoding each segment', () => {
    expect(fileHref('c1/a b/100%.png')).toBe('c1/a%20b/100%25.png');
    expect(fileHref('c1/javascript:alert(1).png')).toBe('c1/javascript%3Aalert(1).png');
    expect(fileHref('javascript:alert(1)')).toBe('javascript%3Aalert(1)');
    for (const bad of ['', '/etc/passwd', '../x.png', 'a/../../x', 'a//b', 'a\\b.png', './a.png']) expect(fileHref(bad)).toBeNull();
  });
});

describe('formatSummaryLine', () => {
  it('names counts in state order, credits and wall time', () => {
    expect(formatSummaryLine(summary(counts))).toBe(
      '9 jobs: 5 done, 1 failed, 1 uncertain, 1 expired, 1 pending; estimated 120.5 credits (+1 job of unknown price), charged 120 (balance 1000 -> 880); 4m 05s',
    );
    const s = summary({ done: 1 });
    s.credits = { estimated_known: 0, unknown_price_jobs: 0, balance_before: null, balance_after: null, charged: null, user_prices: true, invocations: [] };
    s.wall_seconds = 3.21;
    expect(formatSummaryLine(s)).toBe('1 job: 1 done; estimated 0 credits (some prices user-supplied), charged unknown; 3.2s');
  });
});
