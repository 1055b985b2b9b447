import { mkdirSync, writeFileSync, copyFileSync } from 'node:fs';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { formatProblem } from '../src/errors.js';
import { openManifest, validateManifest, deriveId } from '../src/manifest/index.js';
import { readAll, writeIn } from './helpers/manifest.js';

/** YAML manifests: defaults, ids, rows, glob, matrix, templates, positions, every manifest-level problem. */

const FIX = join(import.meta.dirname, 'fixtures', 'manifest');
let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'genbatch-manifest-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const write = (name: string, text: string | Buffer): string => writeIn(dir, name, text);

const all = readAll;

describe('smallest manifest', () => {
  it('reads jobs: [{id, model, input}] with callback_url, applying schema defaults', async () => {
    const p = write('m.yaml', 'jobs:\n  - id: a\n    model: vendora/dream-v5.0-flash/text-to-image\n    callback_url: https://example.com/hook\n    input: {prompt: a cat}\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs).toHaveLength(1);
    expect(jobs[0]).toMatchObject({ id: 'a', kind: 'submit', callback_url: 'https://example.com/hook', dir, where: `${p}:2` });
    expect(jobs[0]?.input).toEqual({ prompt: 'a cat', size: '1:1', resolution: '1K', enable_safety_checker: true });
  });

  it('reads a flow-style jobs list, YAML anchors and merge keys (parsed whole)', async () => {
    const p = write('m.yaml', 'defaults: {input: &base {quality: high}}\njobs: [{id: a, model: alpha-image-2, input: {prompt: x, <<: *base}}, {id: b, model: alpha-image-2, input: *base}]\n');
    const { jobs, problems } = await all(p);
    expect(jobs.map((j) => j.id)).toEqual(['a', 'b']);
    expect(problems).toEqual([`job b (${p}:2) input.prompt: is required`]);
    expect(jobs[0]?.input).toMatchObject({ prompt: 'x', quality: 'high' });
  });

  it('reads budget and pricing', async () => {
    const p = write('m.yaml', 'budget: 12.5\npricing: {dream-4: 3}\njobs:\n  - {id: a, model: alpha-image-2, input: {prompt: x}}\n');
    const m = await openManifest(p);
    expect(m.budget).toBe(12.5);
    expect(m.pricing).toEqual({ 'dream-4': 3 });
  });

  it('reads chat jobs with a protocol and passes protocol options through', async () => {
    const p = write('m.yaml', 'jobs:\n  - id: c\n    model: vendorb/verse-4.5\n    protocol: messages\n    input: {stream: true, max_tokens: 50, messages: [{role: user, content: hi}]}\n  - id: d\n    model: vendora/chat-5\n    input: {messages: [{role: user, content: hi}]}\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs[0]).toMatchObject({ id: 'c', kind: 'chat', protocol: 'messages', input: { stream: true, max_tokens: 50 } });
    expect(jobs[1]).toMatchObject({ id: 'd', kind: 'chat', protocol: 'chat-completions' });
  });
});

describe('defaults', () => {
  it('deep-merges model, input and callback_url; the job wins and lists are replaced', async () => {
    const p = write(
      'm.yaml',
      'defaults:\n  model: dream-4\n  callback_url: https://example.com/d\n  input: {n: 2, image_urls: ["https://x/a.png"], size: "1:1"}\njobs:\n  - id: a\n    input: {prompt: one}\n  - id: b\n    input: {prompt: two, n: 3, image_urls: ["https://x/b.png", "https://x/c.png"]}\n',
    );
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs[0]).toMatchObject({ model: 'dream-4', callback_url: 'https://example.com/d', input: { prompt: 'one', n: 2, image_urls: ['https://x/a.png'], size: '1:1' } });
    expect(jobs[1]?.input).toMatchObject({ prompt: 'two', n: 3, image_urls: ['https://x/b.png', 'https://x/c.png'], size: '1:1' });
  });

  it('points a problem that comes from defaults at the defaults line', async () => {
    const p = write('m.yaml', 'defaults:\n  model: alpha-image-2\n  input:\n    quality: ultra\njobs:\n  - id: a\n    input: {prompt: x}\n');
    const { problems } = await all(p);
    expect(problems).toEqual([`job a (${p}:4) input.quality: quality "ultra" is not one of low, medium, high`]);
  });
});

describe('ids', () => {
  it('derives an id from the job content that does not change when unrelated jobs are added', async () => {
    const one = write('one.yaml', 'jobs:\n  - {model: alpha-image-2, input: {prompt: a fox}}\n');
    const two = write('two.yaml', 'jobs:\n  - {model: alpha-image-2, input: {prompt: a wolf}}\n  - {id: x, model: alpha-image-2, input: {prompt: z}}\n  - {model: alpha-image-2, input: {prompt: a fox}}\n');
    const a = (await all(one)).jobs[0]?.id;
    const b = (await all(two)).jobs[2]?.id;
    expect(a).toMatch(/^j-[0-9a-f]{12}$/);
    expect(b).toBe(a);
    expect(a).toBe(deriveId({ model: 'alpha-image-2', input: { prompt: 'a fox' } }));
  });

  it('gives identical jobs -2, -3 suffixes in file order', async () => {
    const p = write('m.yaml', 'jobs:\n' + '  - {model: alpha-image-2, input: {prompt: same}}\n'.repeat(3));
    const ids = (await all(p)).jobs.map((j) => j.id);
    expect(ids[1]).toBe(`${ids[0]}-2`);
    expect(ids[2]).toBe(`${ids[0]}-3`);
  });

  it('reports duplicate and malformed given ids', async () => {
    const p = write('m.yaml', 'jobs:\n  - {id: a, model: alpha-image-2, input: {prompt: x}}\n  - {id: a, model: alpha-image-2, input: {prompt: y}}\n  - {id: "bad id/1", model: alpha-image-2, input: {prompt: y}}\n');
    const { problems } = await all(p);
    expect(problems).toEqual([
      `job a (${p}:3) id: duplicate id (first used at ${p}:2)`,
      `job bad id/1 (${p}:4) id: must be 1 to 128 letters, digits, ".", "_" or "-", starting with a letter or digit`,
    ]);
  });

  it('shows control characters of a bad id escaped: one problem per line, nothing for the terminal to act on', async () => {
    const p = write('m.yaml', 'jobs:\n  - {id: "x\\e[2Jy\\nz", model: alpha-image-2, input: {prompt: x}}\n');
    const { problems } = await all(p);
    expect(problems).toEqual([`job x\\u001b[2Jy\\u000az (${p}:2) id: must be 1 to 128 letters, digits, ".", "_" or "-", starting with a letter or digit`]);
  });

  it('refuses ids that would share an output folder (trailing dots, letter case, device names)', async () => {
    const line = (id: string) => `  - {id: "${id}", model: alpha-image-2, input: {prompt: x}}\n`;
    const p = write('m.yaml', 'jobs:\n' + ['a', 'a.', 'B..', 'b', 'con', 'CON.', 'c.d', 'c.D'].map(line).join(''));
    const { jobs, problems } = await all(p);
    const rule = 'ids must differ in more than letter case and trailing dots';
    expect(problems).toEqual([
      `job a. (${p}:3) id: its output folder is the same as job a's (first used at ${p}:2): ${rule}`,
      `job b (${p}:5) id: its output folder is the same as job B..'s (first used at ${p}:4): ${rule}`,
      `job CON. (${p}:7) id: its output folder is the same as job con's (first used at ${p}:6): ${rule}`,
      `job c.D (${p}:9) id: its output folder is the same as job c.d's (first used at ${p}:8): ${rule}`,
    ]);
    expect(jobs).toHaveLength(8);
  });

  it('gives a derived id a suffix when an explicit id already has its folder in another case', async () => {
    const first = await all(write('d.yaml', 'jobs:\n  - {model: alpha-image-2, input: {prompt: same}}\n'));
    const derived = first.jobs[0]!.id;
    const p = write('m.yaml', `jobs:\n  - {id: "${derived.toUpperCase()}", model: alpha-image-2, input: {prompt: other}}\n  - {model: alpha-image-2, input: {prompt: same}}\n`);
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs.map((j) => j.id)).toEqual([derived.toUpperCase(), `${derived}-2`]);
  });
});

describe('rows sources', () => {
  it('turns each row of a TSV into a job, filling {{column}} and {{row}}', async () => {
    copyFileSync(join(FIX, 'parti50.tsv'), join(dir, 'parti50.tsv'));
    const p = write('m.yaml', 'jobs:\n  - id: "p{{row}}"\n    rows: {file: parti50.tsv}\n    model: alpha-image-2\n    input: {prompt: "{{Prompt}}", quality: low}\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs).toHaveLength(50);
    expect(jobs[0]).toMatchObject({ id: 'p1', input: { prompt: 'bond', quality: 'low' }, where: `${p}:2, parti50.tsv:2, row 1` });
    expect(jobs[49]?.id).toBe('p50');
  });

  it('reads the whole PartiPrompts file (1632 rows; cells may start with a quote)', async () => {
    const parti = join(import.meta.dirname, '..', 'manifests', 'data', 'PartiPrompts.tsv');
    const p = write('m.yaml', `jobs:\n  - rows: {file: ${JSON.stringify(parti)}}\n    model: alpha-image-2\n    input: {prompt: "{{Prompt}}"}\n`);
    const r = await validateManifest(p);
    expect(r).toEqual({ jobs: 1632, problems: [] });
  });

  it('types a whole-field template by the schema, leaves empty cells out, and honours limit', async () => {
    write('v.csv', 'p,d,neg\nwaves,10,\nclouds,5,no people\nrain,6,\n');
    const p = write('m.yaml', 'jobs:\n  - id: "v{{row}}"\n    rows: {file: v.csv, limit: 2}\n    model: vidmodel2.5-text-to-video\n    input: {prompt: "{{p}} at {{d}} s", duration: "{{d}}", negative_prompt: "{{neg}}"}\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs.map((j) => j.input)).toEqual([
      { prompt: 'waves at 10 s', duration: 10 },
      { prompt: 'clouds at 5 s', duration: 5, negative_prompt: 'no people' },
    ]);
  });

  it('reports a rows file with only a header', async () => {
    write('h.tsv', 'prompt\n');
    const p = write('m.yaml', 'jobs:\n  - rows: {file: h.tsv}\n    model: alpha-image-2\n    input: {prompt: "{{prompt}}"}\n');
    expect((await all(p)).problems).toEqual([`${p}:2 rows.file: h.tsv has no rows after its header line`]);
  });

  it('reports a missing rows file, a row with the wrong cell count and an unknown template variable', async () => {
    write('r.csv', 'prompt\nok\n"a","b"\n');
    const p = write('m.yaml', 'jobs:\n  - rows: {file: nope.tsv}\n    model: alpha-image-2\n    input: {prompt: "{{x}}"}\n  - id: "r{{row}}"\n    rows: {file: r.csv}\n    model: alpha-image-2\n    input: {prompt: "{{prompt}}"}\n  - id: "t{{row}}"\n    rows: {file: r.csv}\n    model: alpha-image-2\n    input: {prompt: "{{Prompt}}"}\n');
    const { jobs, problems } = await all(p);
    expect(jobs.map((j) => j.id)).toEqual(['r1']);
    expect(problems).toEqual([
      `${p}:2 rows.file: file not found: nope.tsv`,
      `${p}:5, r.csv:3, row 2: has 2 cells; the header has 1`,
      `${p}:12 input.prompt: template {{Prompt}} names no variable (available: prompt, row)`,
    ]);
  });

  it('reads rows column names without surrounding spaces, as a CSV job list does ({{ sec }} names sec)', async () => {
    write('s.csv', 'Prompt, sec \ncat,5\n');
    const p = write('m.yaml', 'jobs:\n  - id: "s{{row}}"\n    rows: {file: s.csv}\n    model: motion-1.6/pro\n    input: {prompt: "{{Prompt}}", duration: "{{ sec }}"}\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs[0]?.input).toEqual({ prompt: 'cat', duration: 5 });
  });

  it('matches template names and rows column names in one Unicode form (NFD header, NFC template)', async () => {
    write('u.csv', `${'Cate\u0301gorie'},sec\ncat,5\n`);
    const p = write('m.yaml', `jobs:\n  - id: "u{{row}}"\n    rows: {file: u.csv}\n    model: motion-1.6/pro\n    input: {prompt: "{{${'Cat\u00e9gorie'}}} x", negative_prompt: "{{ ${'Cat\u00e9gorie'} }}", duration: "{{sec}}"}\n`);
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs[0]?.input).toEqual({ prompt: 'cat x', negative_prompt: 'cat', duration: 5 });
  });

  it('refuses a template naming a column the rows file has twice (it would take one of them silently)', async () => {
    write('d.csv', 'Prompt,Prompt,sec,note,note\ncat,dog,5,x,y\n');
    const p = write('m.yaml', 'jobs:\n  - id: "d{{row}}"\n    rows: {file: d.csv}\n    model: motion-1.6/pro\n    input: {prompt: "{{Prompt}}", duration: "{{sec}}"}\n');
    const { jobs, problems } = await all(p);
    expect(jobs).toEqual([]);
    expect(problems).toEqual([`${p}:5 input.prompt: template {{Prompt}} is ambiguous: d.csv has 2 columns named "Prompt" (columns 1, 2)`]);
  });
});

describe('glob sources', () => {
  it('makes one job per matching file, sorted, with {{path}}, {{name}}, {{ext}}, {{index}}', async () => {
    mkdirSync(join(dir, 'refs'));
    copyFileSync(join(FIX, 'ref.png'), join(dir, 'refs', 'b.png'));
    copyFileSync(join(FIX, 'ref.png'), join(dir, 'refs', 'a.png'));
    writeFileSync(join(dir, 'refs', 'notes.txt'), 'x');
    const p = write('m.yaml', 'jobs:\n  - id: "edit-{{name}}-{{index}}"\n    glob: refs/*.png\n    model: alpha-image-2-edit\n    input: {prompt: "restyle {{name}}.{{ext}}", image_urls: ["{{path}}"]}\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs.map((j) => [j.id, j.input.prompt, j.input.image_urls, j.where])).toEqual([
      ['edit-a-1', 'restyle a.png', ['refs/a.png'], `${p}:2, refs/a.png`],
      ['edit-b-2', 'restyle b.png', ['refs/b.png'], `${p}:2, refs/b.png`],
    ]);
  });

  it('reports a glob that matches nothing', async () => {
    const p = write('m.yaml', 'jobs:\n  - glob: "none/*.png"\n    model: alpha-image-2-edit\n    input: {prompt: x, image_urls: ["{{path}}"]}\n');
    const { problems } = await all(p);
    expect(problems).toEqual([`${p}:2 glob: matched no files (patterns are relative to ${dir})`]);
  });
});

describe('matrix', () => {
  it('expands every combination (first key slowest) and keeps value types', async () => {
    const p = write('m.yaml', 'jobs:\n  - id: "d-{{animal}}-{{n}}"\n    matrix: {animal: [fox, owl], n: [1, 3]}\n    model: dream-4\n    input: {prompt: "a {{animal}}", n: "{{n}}"}\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([]);
    expect(jobs.map((j) => [j.id, j.input.n])).toEqual([
      ['d-fox-1', 1],
      ['d-fox-3', 3],
      ['d-owl-1', 1],
      ['d-owl-3', 3],
    ]);
    expect(jobs[1]?.where).toBe(`${p}:2, matrix animal=fox, n=3`);
  });

  it('combines rows and matrix (rows x matrix) and requires a templated id', async () => {
    write('p.csv', 'prompt\ncat\ndog\n');
    const p = write('m.yaml', 'jobs:\n  - id: "{{prompt}}-{{q}}"\n    rows: {file: p.csv}\n    matrix: {q: [low, high]}\n    model: alpha-image-2\n    input: {prompt: "{{prompt}}", quality: "{{q}}"}\n  - id: fixed\n    matrix: {q: [low, high]}\n    model: alpha-image-2\n    input: {prompt: x, quality: "{{q}}"}\n');
    const { jobs, problems } = await all(p);
    expect(jobs.map((j) => j.id)).toEqual(['cat-low', 'cat-high', 'dog-low', 'dog-high']);
    expect(problems).toEqual([`job fixed (${p}:7) id: this entry makes several jobs: use a {{variable}} in the id so each job gets its own, or leave the id out`]);
  });
});

describe('manifest-level problems', () => {
  it('reports YAML syntax errors with their line', async () => {
    const p = write('m.yaml', 'jobs:\n  - id: a\n    input: {prompt: [1,\n');
    const r = await validateManifest(p);
    expect(r.jobs).toBe(0);
    expect(r.problems.length).toBeGreaterThan(0);
    expect(formatProblem(r.problems[0]!)).toMatch(new RegExp(`^${p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+: YAML syntax: `));
  });

  it('reports duplicate keys, unknown keys (with a suggestion), graph keys of the wrong type and wrong types, all at once', async () => {
    const p = write('m.yaml', 'budjet: 5\njobs:\n  - id: a\n    model: alpha-image-2\n    inptu: {prompt: x}\n  - id: b\n    for_each: [1]\n    model: alpha-image-2\n    input: {prompt: y}\n  - model: 7\n    input: {prompt: y}\n');
    const r = await validateManifest(p);
    expect(r.problems.map(formatProblem)).toEqual([
      `${p}:1 budjet: unknown key "budjet" (did you mean "budget"?); allowed keys: budget, budget_per_invocation, pricing, defaults, jobs`,
      `job a (${p}:5) inptu: unknown key "inptu" (did you mean "input"?); allowed keys: id, model, input, callback_url, protocol, rehost, needs, for_each, rows, glob, matrix`,
      `job a (${p}:3) input.prompt: is required`,
      `job b (${p}:7) for_each: must be one reference to a list, e.g. \${{ jobs.song.audio }}`,
      expect.stringMatching(new RegExp(`^job j-[0-9a-f]{12} \\(${p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:10\\) model: must be a string \\(a model id\\)$`)),
    ]);
  });

  it('reports a bad defaults key once and still checks every job without it', async () => {
    const p = write('m.yaml', 'defaults:\n  modle: x\n  input: 5\njobs:\n  - {id: a, model: alpha-image-2, input: {prompt: x}}\n  - {id: b, model: alpha-image-2, input: {quality: top}}\n');
    const { jobs, problems } = await all(p);
    expect(jobs.map((j) => j.id)).toEqual(['a', 'b']);
    expect(problems).toEqual([
      `${p}:2 defaults.modle: unknown key "modle" (did you mean "model"?); allowed keys: model, input, callback_url, protocol, rehost`,
      `${p}:3 defaults.input: must be a mapping of model parameters`,
      `job b (${p}:6) input.prompt: is required`,
      `job b (${p}:6) input.quality: quality "top" is not one of low, medium, high`,
    ]);
  });

  it('reports an input that is not a mapping once, with its rule (not also "input: is required")', async () => {
    const p = write('m.yaml', 'jobs:\n  - {id: d, model: alpha-image-2, input: "text"}\n  - {id: c, model: vendora/chat-5, input: [x]}\n');
    const { problems } = await all(p);
    expect(problems).toEqual([`job d (${p}:2) input: must be a mapping of model parameters`, `job c (${p}:3) input: must be a mapping of model parameters`]);
  });

  it('reports a missing manifest file and a manifest that is not a mapping', async () => {
    expect((await validateManifest(join(dir, 'none.yaml'))).problems.map(formatProblem)).toEqual([`${join(dir, 'none.yaml')}: manifest file not found`]);
    const p = write('list.yaml', '- a\n- b\n');
    expect((await validateManifest(p)).problems.map(formatProblem)).toEqual([`${p}:1: a manifest is a mapping with a \`jobs:\` list (see manifests/README.md)`]);
    const none = write('nojobs.yaml', 'budget: 3\n');
    expect((await validateManifest(none)).problems.map(formatProblem)).toEqual([`${none}:1 jobs: is required (a list of jobs)`]);
    const scalar = write('scalar.yaml', 'budget: 3\njobs: 5\n');
    expect((await validateManifest(scalar)).problems.map(formatProblem)).toEqual([`${scalar}:2 jobs: must be a list of jobs`]);
    const e = write('empty.yaml', 'jobs: []\n');
    expect((await validateManifest(e)).problems.map(formatProblem)).toEqual([`${e}:1 jobs: must list at least one job`]);
  });

  it('reports unknown models with a suggestion, and unknown chat ids without a protocol', async () => {
    const p = write('m.yaml', 'jobs:\n  - {id: a, model: kontext-prro, input: {prompt: x}}\n  - {id: b, model: vendorz/thing, input: {messages: [{role: user, content: hi}]}}\n  - {id: c, model: vendorz/thing, protocol: responses, input: {messages: [{role: user, content: hi}]}}\n');
    const { jobs, problems } = await all(p);
    expect(problems).toEqual([
      `job a (${p}:2) model: unknown model "kontext-prro"; did you mean "kontext-pro"? (see \`genbatch models\`)`,
      `job b (${p}:3) model: unknown model "vendorz/thing" (see \`genbatch models\`; for a chat model outside the catalogue, set the job's protocol)`,
    ]);
    expect(jobs[2]).toMatchObject({ kind: 'chat', protocol: 'responses', problems: [] });
  });

  it('reports protocol mistakes: a protocol on a submit model, a protocol the chat model does not serve', async () => {
    const p = write('m.yaml', 'jobs:\n  - {id: a, model: alpha-image-2, protocol: responses, input: {prompt: x}}\n  - {id: b, model: vendora/chat-5, protocol: messages, input: {messages: [{role: user, content: hi}]}}\n');
    const { jobs, problems } = await all(p);
    expect(jobs.map((j) => j.kind)).toEqual(['submit', 'chat']);
    expect(problems).toHaveLength(2);
    expect(problems[0]).toBe(`job a (${p}:2) protocol: applies only to chat models; this is a submit model`);
    expect(problems[1]).toMatch(new RegExp(`^job b \\(.*:3\\) protocol: vendora/chat-5 does not support messages`));
  });

  it('reports every problem of every job, with the field line', async () => {
    const p = write('m.yaml', 'jobs:\n  - id: a\n    model: alpha-image-2\n    input:\n      prompt: x\n      size: 4000x2000\n      resolution: 4K\n  - id: b\n    model: alpha-image-2\n    input:\n      quality: best\n');
    const { problems } = await all(p);
    expect(problems).toEqual([
      `job a (${p}:6) input.size: custom size 4000x2000 has a longest edge over 3840`,
      `job b (${p}:10) input.prompt: is required`,
      `job b (${p}:11) input.quality: quality "best" is not one of low, medium, high`,
    ]);
  });

  it('checks callback_url: https only, at most 2048 characters, not on chat jobs', async () => {
    const long = `https://example.com/${'x'.repeat(2040)}`;
    const p = write('m.yaml', `jobs:\n  - {id: a, model: alpha-image-2, callback_url: "http://example.com", input: {prompt: x}}\n  - {id: b, model: alpha-image-2, callback_url: "${long}", input: {prompt: x}}\n  - {id: c, model: vendora/chat-5, callback_url: "https://example.com", input: {messages: [{role: user, content: hi}]}}\n`);
    const { problems } = await all(p);
    expect(problems).toEqual([
      `job a (${p}:2) callback_url: must be an https:// URL (the service calls back over HTTPS only)`,
      `job b (${p}:3) callback_url: must be at most 2048 characters (has 2060)`,
      `job c (${p}:4) callback_url: applies only to submit models; chat answers come back in the response`,
    ]);
  });

  it('can iterate jobs() twice with the same result', async () => {
    const p = write('m.yaml', 'jobs:\n  - {model: alpha-image-2, input: {prompt: x}}\n  - {model: alpha-image-2, input: {prompt: x}}\n');
    const m = await openManifest(p);
    const ids = async () => {
      const out: string[] = [];
      for await (const j of m.jobs()) out.push(j.id);
      return out;
    };
    const first = await ids();
    expect(await ids()).toEqual(first);
    expect(first[1]).toBe(`${first[0]}-2`);
  });
});
