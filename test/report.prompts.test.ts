import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'csv-parse/sync';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { promptOf, varsOf, varsText } from '../src/report/index.js';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ensureBuilt, runCli } from './helpers/cli.js';
import { solidPng } from './helpers/png.js';
import { CHROMIUM, overflowAt, pageRows, renderedPage } from './helpers/page.js';
import { tempDir } from './helpers/tmp.js';
import { toolPresent } from './helpers/tools.js';
const haveChromium = toolPresent('Chromium', CHROMIUM !== null, 'apt-get install chromium-headless-shell');

/**
 * Every report shows what each job asked, after a real run against the sandbox: report.json has the
 * input as sent (uploaded URLs in place of local paths), the prompt and the rows/matrix variables;
 * report.csv has prompt, vars and input columns; report.md a per-job table; report.html the prompt
 * on each card and as its images' alt text.
 */
const KEY = 'sk-report-prompts-0123456789';
const SCALE = '0.001';
let sb: Sandbox;
const t = tempDir('genbatch-report-prompts-');
let out = '';
let runOut = { code: null as number | null, stderr: '' };

interface JsonJob {
  id: string;
  prompt: string | null;
  vars: Record<string, string>;
  input: Record<string, unknown> | null;
  files: Array<{ path: string }>;
}

const MANIFEST = `jobs:
  - id: pic
    model: alpha-image-2
    input: {prompt: "a <b>quiet</b> harbour & \\"boats\\"", quality: low}
  - id: edit
    model: alpha-image-2-edit
    input: {prompt: "make it night", image_urls: ["local.png"]}
  - id: talk
    model: vendora/chat-5
    input:
      messages:
        - {role: system, content: "be brief"}
        - {role: user, content: "first question"}
        - {role: assistant, content: "an answer"}
        - {role: user, content: "the last question"}
  - id: song
    model: generate-music
    input: {custom_mode: true, instrumental: true, mv: V5, title: "Harbour Lights", style: "indie folk, acoustic"}
  - id: "street-{{mood}}"
    matrix: {mood: [rainy, sunny]}
    model: alpha-image-2
    input: {prompt: "a street, {{mood}}", quality: low}
  - id: long
    model: alpha-image-2
    input: {prompt: "see https://example.com/a/very/long/path/with/no/spaces/0123456789abcdef0123456789abcdef0123456789abcdef/unknown unknown unknown", quality: low}
  - id: "row-{{row}}"
    rows: {file: rows.tsv}
    model: alpha-image-2
    input: {prompt: "{{subject}} at dawn", quality: low}
`;

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 3 });
  writeFileSync(join(t.dir, 'local.png'), solidPng(8, 8, [10, 20, 30]));
  writeFileSync(join(t.dir, 'rows.tsv'), 'subject\nlighthouse\nfishing boat\n');
  writeFileSync(join(t.dir, 'm.yaml'), MANIFEST);
  out = join(t.dir, 'out');
  const r = await runCli(['run', join(t.dir, 'm.yaml'), '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });
  runOut = { code: r.code, stderr: r.stderr };
}, 120_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

const report = () => JSON.parse(readFileSync(join(out, 'report.json'), 'utf8')) as { jobs: JsonJob[] };
const byId = (id: string) => report().jobs.find((j) => j.id === id)!;

describe('reports show what each job asked', () => {
  it('report.json: prompt, input as sent (an uploaded URL in place of the local path) and rows/matrix variables', () => {
    expect(runOut.code, runOut.stderr).toBe(0);
    expect(report().jobs.map((j) => j.id)).toEqual(['pic', 'edit', 'talk', 'song', 'street-rainy', 'street-sunny', 'long', 'row-1', 'row-2']);
    expect(byId('pic').prompt).toBe('a <b>quiet</b> harbour & "boats"');
    expect(byId('pic').input).toEqual({ prompt: 'a <b>quiet</b> harbour & "boats"', quality: 'low' });
    const edit = byId('edit');
    expect(edit.prompt).toBe('make it night');
    const urls = edit.input!.image_urls as string[];
    expect(urls).toHaveLength(1);
    expect(urls[0]).toMatch(/^https?:\/\//);
    expect(byId('talk').prompt).toBe('the last question');
    expect(byId('song').prompt).toBe('indie folk, acoustic');
    expect(byId('song').input).toMatchObject({ title: 'Harbour Lights', style: 'indie folk, acoustic' });
    expect(byId('street-rainy')).toMatchObject({ prompt: 'a street, rainy', vars: { mood: 'rainy' } });
    expect(byId('street-sunny')).toMatchObject({ prompt: 'a street, sunny', vars: { mood: 'sunny' } });
    expect(byId('row-2')).toMatchObject({ prompt: 'fishing boat at dawn', vars: { row: '2' } });
    expect(byId('pic').vars).toEqual({});
  });

  it('report.csv: prompt, vars and input columns that csv-parse reads back', () => {
    const rows = parse(readFileSync(join(out, 'report.csv'), 'utf8'), { columns: true }) as Array<Record<string, string>>;
    const row = (id: string) => rows.find((r) => r.id === id)!;
    expect(row('pic').prompt).toBe('a <b>quiet</b> harbour & "boats"');
    expect(JSON.parse(row('edit').input!)).toEqual(byId('edit').input);
    expect(row('talk').prompt).toBe('the last question');
    expect(row('street-rainy').vars).toBe('mood=rainy');
    expect(row('row-1')).toMatchObject({ vars: 'row=1', prompt: 'lighthouse at dawn' });
    expect(row('song').prompt).toBe('indie folk, acoustic');
  });

  it('report.md: a table of the jobs with their prompts and variables', () => {
    const md = readFileSync(join(out, 'report.md'), 'utf8');
    expect(md).toContain('## Jobs and what they asked (9)');
    expect(md).toMatch(/\| talk \| done \| vendora\/chat-5 \| the last question \|  \| \d+ \|/);
    expect(md).toMatch(/\| street-rainy \| done \| alpha-image-2 \| a street, rainy \| mood=rainy \| 1 \|/);
    expect(md).toContain('| pic | done | alpha-image-2 | a \\<b\\>quiet\\</b\\> harbour \\& "boats" |  | 1 |');
  });

  it('report.html carries every job with its prompt, variables and input fields, escaped against </script>', () => {
    const html = readFileSync(join(out, 'report.html'), 'utf8');
    const { rows } = pageRows(html);
    const row = (id: string) => rows.find((r) => r.id === id)!;
    expect(rows.map((r) => r.id)).toEqual(report().jobs.map((j) => j.id));
    expect(row('pic').prompt).toBe('a <b>quiet</b> harbour & "boats"');
    expect(row('pic').input).toEqual({ quality: 'low' });
    expect(row('talk').prompt).toBe('the last question');
    expect(row('song').input).toMatchObject({ title: 'Harbour Lights', style: 'indie folk, acoustic' });
    expect(row('street-sunny').vars).toBe('mood=sunny');
    expect(row('row-1').vars).toBe('row=1');
    expect(html).not.toContain('<b>quiet');
    expect(html).not.toContain('word-break:break-all');
    expect(html).toMatch(/<time datetime="\d{4}-\d\d-\d\dT[^"]+">\d{4}-\d\d-\d\dT/);
  });

  it.skipIf(!haveChromium)('report.html in Chromium: each card shows its prompt (also the alt text of its images), variables and labelled players; search narrows the cards; no console message', () => {
    const { dom, console } = renderedPage(join(out, 'report.html'));
    expect(console).toEqual([]);
    const card = (id: string) => {
      const at = dom.indexOf(`<article class="card"><h3 class="tok">${id}</h3>`);
      expect(at, id).toBeGreaterThan(-1);
      return dom.slice(at, dom.indexOf('</article>', at));
    };
    const pic = card('pic');
    expect(pic).toContain('<p class="prompt">a &lt;b&gt;quiet&lt;/b&gt; harbour &amp; "boats"</p>');
    expect(pic).toMatch(/<img src="pic\/image-1\.\w+" alt="a &lt;b&gt;quiet&lt;\/b&gt; harbour &amp; &quot;boats&quot;"/);
    expect(card('talk')).toContain('<p class="prompt">the last question</p>');
    expect(card('edit')).toContain('<p class="prompt">make it night</p>');
    expect(card('street-sunny')).toContain('<p class="vars">mood=sunny</p>');
    expect(card('row-1')).toContain('<p class="vars">row=1</p>');
    expect(card('row-1')).toContain('alt="lighthouse at dawn"');
    const song = card('song');
    expect(song).toContain('<p class="prompt">indie folk, acoustic</p>');
    expect(song).toMatch(/<figure class="player"><figcaption>[^<]+ \(audio-1\.mp3\)<\/figcaption><audio controls="" preload="none" src="song\/audio-1\.mp3">/);
    expect(dom.match(/<article class="card">/g)).toHaveLength(9);
    // Times in the reader's local time, the ISO time kept as the title.
    const times = [...dom.matchAll(/<time datetime="([^"]+)" title="([^"]+)">([^<]+)<\/time>/g)];
    expect(times.length).toBeGreaterThanOrEqual(10);
    for (const t of times) {
      expect(t[2]).toBe(t[1]);
      expect(t[3]).not.toBe(t[1]);
      expect(t[3]).toMatch(/\b20\d\d\b/);
    }
    // Search (any input value) and filters, from the page's hash.
    const searched = renderedPage(join(out, 'report.html'), 'q=rainy');
    expect(searched.dom.match(/<article class="card"><h3 class="tok">[^<]+/g)).toEqual(['<article class="card"><h3 class="tok">street-rainy']);
    expect(searched.dom).toContain('1 of 9 jobs match');
    const chat = renderedPage(join(out, 'report.html'), 'model=vendora%2Fchat-5');
    expect(chat.dom.match(/<article class="card"><h3 class="tok">[^<]+/g)).toEqual(['<article class="card"><h3 class="tok">talk']);
    const audio = renderedPage(join(out, 'report.html'), 'kind=audio');
    expect(audio.dom.match(/<article class="card"><h3 class="tok">[^<]+/g)).toEqual(['<article class="card"><h3 class="tok">song']);
  }, 120_000);

  it.skipIf(!haveChromium)('report.html at 390 px and 1280 px: nothing reaches past the right edge (long URLs, ids and task ids wrap)', () => {
    for (const width of [390, 1280]) {
      const m = overflowAt(join(out, 'report.html'), width);
      expect(m.wide, `${width} px`).toEqual([]);
      expect(m.scrollWidth).toBe(m.viewport);
    }
  }, 120_000);
});

describe('promptOf and varsOf', () => {
  it('a chat prompt is the last user message, its text parts joined; music falls back to style, then title', () => {
    expect(promptOf({ messages: [{ role: 'user', content: 'a' }, { role: 'user', content: [{ type: 'text', text: 'b' }, { type: 'image_url' }, { text: 'c' }] }, { role: 'assistant', content: 'x' }] })).toBe('b\nc');
    expect(promptOf({ custom_mode: true, title: 'T' })).toBe('T');
    expect(promptOf({ prompt: '  ', style: 'S', title: 'T' })).toBe('S');
    expect(promptOf({ size: '1:1' })).toBeNull();
    expect(promptOf(null)).toBeNull();
  });

  it('reads matrix variables (values with commas and "=" included) and the row from where', () => {
    expect(varsOf('m.yaml:4, p.tsv:row 17, matrix mood=rainy, day, size=1:1, q=a=b')).toEqual({ row: '17', mood: 'rainy, day', size: '1:1', q: 'a=b' });
    expect(varsOf('jobs.csv:row 7')).toEqual({ row: '7' });
    expect(varsOf('m.yaml:4, shots/a.png, matrix n=2')).toEqual({ n: '2' });
    expect(varsOf('m.yaml:4')).toEqual({});
    expect(varsText({ row: '7', mood: 'rainy' })).toBe('row=7, mood=rainy');
  });
});
