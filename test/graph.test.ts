import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findCycles } from '../src/graph/collect.js';
import { lrc } from '../src/graph/lrc.js';
import { jsonItems, linesOf, outputShape, outputsOf, shapeAt } from '../src/graph/outputs.js';
import { findRefs, parseRef, substitute } from '../src/graph/refs.js';
import { openManifest, validateManifest } from '../src/manifest/index.js';
import { estimate } from '../src/pricing/index.js';
import { tempDir } from './helpers/tmp.js';

const t = tempDir('genbatch-graph-');
afterAll(() => t.cleanup());

let n = 0;
function manifest(yaml: string): string {
  const p = join(t.dir, `m${n++}.yaml`);
  writeFileSync(p, yaml);
  return p;
}

const SONG = `  - id: song
    model: generate-music
    input: {custom_mode: false, prompt: "a calm song"}
`;

describe('references: parsing', () => {
  it('reads jobs, item and index references with their paths', () => {
    expect(parseRef('jobs.song.audio[0].audio_id')).toEqual({ ref: { scope: 'jobs', job: 'song', path: ['audio', 0, 'audio_id'] } });
    expect(parseRef('item.audio_id')).toEqual({ ref: { scope: 'item', path: ['audio_id'] } });
    expect(parseRef('item')).toEqual({ ref: { scope: 'item', path: [] } });
    expect(parseRef('index')).toEqual({ ref: { scope: 'index' } });
    expect(parseRef('steps.song')).toHaveProperty('error');
    expect(parseRef('jobs.song.audio[x]')).toHaveProperty('error');
  });

  it('picks the longest known job id when ids contain dots', () => {
    expect(parseRef('jobs.a.b.task_id', new Set(['a', 'a.b']))).toEqual({ ref: { scope: 'jobs', job: 'a.b', path: ['task_id'] } });
    expect(parseRef('jobs.a.b.task_id', new Set(['a']))).toEqual({ ref: { scope: 'jobs', job: 'a', path: ['b', 'task_id'] } });
  });

  it('finds references with the field they sit in, whole or embedded', () => {
    const refs = findRefs({ prompt: 'a ${{ jobs.c.text }} b', urls: ['${{ jobs.i.files[0].file_url }}'] }, 'input');
    expect(refs.map((r) => [r.field, r.expr, r.whole])).toEqual([
      ['input.prompt', 'jobs.c.text', false],
      ['input.urls[0]', 'jobs.i.files[0].file_url', true],
    ]);
  });

  it('a whole-field reference keeps the value type; embedded ones are stringified', () => {
    const values: Record<string, unknown> = { 'jobs.a.n': 7, 'jobs.a.list': [1, 2], 'jobs.a.s': 'x' };
    const out = substitute({ n: '${{ jobs.a.n }}', l: '${{jobs.a.list}}', t: 'n=${{ jobs.a.n }} l=${{ jobs.a.list }} s=${{ jobs.a.s }}' }, (_r, expr) => values[expr]);
    expect(out).toEqual({ n: 7, l: [1, 2], t: 'n=7 l=[1,2] s=x' });
  });
});

describe('output shapes', () => {
  it('one shape per model kind; unknown fields are named with what exists', () => {
    const song = outputShape('generate-music', 'submit')!;
    expect(shapeAt(song, ['audio', 0, 'audio_id'])).toEqual({ shape: { type: 'string' } });
    expect(shapeAt(song, ['audio', 'audio_id'])).toHaveProperty('error');
    expect(shapeAt(outputShape('alpha-image-2', 'submit')!, ['files', 0, 'file_url'])).toEqual({ shape: { type: 'string' } });
    expect(shapeAt(outputShape('stem-split', 'submit')!, ['stems', 'drums_url'])).toEqual({ shape: { type: 'string' } });
    expect(shapeAt(outputShape('any/chat-model', 'chat')!, ['lines'])).toEqual({ shape: { type: 'list', item: { type: 'string' } } });
    const bad = shapeAt(outputShape('generate-persona', 'submit')!, ['persona']);
    expect('error' in bad && bad.error).toContain('available: task_id, items, persona_id');
  });

  it('reads the values of a finished music task, JSON-string fields parsed', () => {
    const stems = Object.fromEntries(['backing_vocals_url', 'bass_url', 'brass_url', 'drums_url', 'fx_url', 'guitar_url', 'keyboard_url', 'percussion_url', 'strings_url', 'synth_url', 'vocal_url', 'woodwinds_url'].map((k) => [k, `https://x.test/${k}.mp3`]));
    const out = outputsOf('stem-split', 'submit', JSON.stringify({ task_id: 't1', status: 'finished', files: [{ stem_split: JSON.stringify(stems) }] }));
    expect(out.task_id).toBe('t1');
    expect((out.stems as Record<string, string>).drums_url).toBe('https://x.test/drums_url.mp3');
    const song = outputsOf('generate-music', 'submit', JSON.stringify({ task_id: 't2', files: [{ audio_id: 'a1', audio_url: 'https://x.test/a.mp3', title: 'T' }] }));
    expect(song.audio).toEqual([{ audio_id: 'a1', audio_url: 'https://x.test/a.mp3', image_url: null, title: 'T', tags: null, duration: null, prompt: null }]);
  });

  it('chat text as lines and as JSON items', () => {
    expect(linesOf('1. a red fox\n\n- a blue owl\n  * green frog  \n')).toEqual(['a red fox', 'a blue owl', 'green frog']);
    expect(jsonItems('```json\n["a", {"b": 1}]\n```')).toEqual(['a', { b: 1 }]);
    expect(() => jsonItems('not json')).toThrow(/not JSON/);
    expect(() => jsonItems('{"a": 1}')).toThrow(/not a list/);
  });

  it('timestamped lyrics become LRC lines at the start of their first word', () => {
    const words = [
      { word: '[Verse]\nBoats', start_s: 1.5, end_s: 2 },
      { word: 'come\n', start_s: 2.1, end_s: 2.5 },
      { word: '[Chorus]\nHarbour', start_s: 65.25, end_s: 66 },
      { word: 'lights', start_s: 66.1, end_s: 67 },
    ];
    expect(lrc(words)).toBe('[00:01.50]Boats come\n[01:05.25]Harbour lights\n');
  });
});

describe('cycles', () => {
  it('names each cycle once, in waiting order', () => {
    const links = new Map([
      ['a', { parents: ['b'], forEach: null }],
      ['b', { parents: ['c'], forEach: null }],
      ['c', { parents: ['a'], forEach: null }],
      ['d', { parents: ['a'], forEach: null }],
    ]);
    expect(findCycles(links)).toEqual([['a', 'b', 'c']]);
    expect(findCycles(new Map([['c', { parents: ['a'], forEach: null }], ['a', { parents: ['b'], forEach: null }], ['b', { parents: ['a'], forEach: null }]]))).toEqual([['a', 'b']]);
    expect(findCycles(new Map([['x', { parents: ['y'], forEach: null }]]))).toEqual([]);
  });
});

describe('manifest validation of job graphs', () => {
  it('accepts a valid chain and records links', async () => {
    const m = await openManifest(
      manifest(`jobs:
${SONG}  - id: wav
    for_each: \${{ jobs.song.audio }}
    model: convert-to-wav
    input: {task_id: "\${{ jobs.song.task_id }}", audio_id: "\${{ item.audio_id }}"}
  - id: after
    needs: [wav]
    model: alpha-image-2
    input: {prompt: "cover"}
`),
    );
    const jobs = [];
    for await (const j of m.jobs()) jobs.push(j);
    expect(m.problems.concat(jobs.flatMap((j) => j.problems))).toEqual([
      expect.objectContaining({ job: 'after', path: 'needs[0]', message: expect.stringContaining('wav is a for_each job') }),
    ]);
    expect(m.links.get('wav')).toEqual({ parents: ['song'], forEach: { parent: 'song', path: ['audio'], expr: 'jobs.song.audio' } });
    expect(jobs[1]!.input).toEqual({ task_id: '${{ jobs.song.task_id }}', audio_id: '${{ item.audio_id }}' });
  });

  it('reports unknown ids, unknown fields, for_each over a non-list, item outside for_each and cycles, naming job, field and line', async () => {
    const p = manifest(`jobs:
${SONG}  - id: a
    model: convert-to-wav
    input:
      task_id: \${{ jobs.sng.task_id }}
      audio_id: \${{ jobs.song.audio[0].nope }}
  - id: b
    for_each: \${{ jobs.song.task_id }}
    model: convert-to-wav
    input: {task_id: "\${{ item }}", audio_id: x}
  - id: c
    model: convert-to-wav
    input: {task_id: "\${{ jobs.d.task_id }}", audio_id: "\${{ index }}"}
  - id: d
    model: convert-to-wav
    needs: [c]
    input: {task_id: t, audio_id: "y"}
`);
    const { problems } = await validateManifest(p);
    const short = problems.map((x) => `${x.job} ${x.where.replace(/^.*\//, '')} ${x.path}: ${x.message}`);
    expect(short).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^a m\d+\.yaml:8 input\.task_id: .*no job with id "sng".*did you mean "song"/),
        expect.stringMatching(/^a m\d+\.yaml:9 input\.audio_id: .*generate-music jobs never return that: no field "nope" in audio\[0\]/),
        expect.stringMatching(/^b m\d+\.yaml:11 for_each: .*is a string, not a list/),
        expect.stringMatching(/^c m\d+\.yaml:16 input\.audio_id: .*only defined inside a for_each job/),
        expect.stringMatching(/^(c m\d+\.yaml:15 input\.task_id: jobs form a cycle: c -> d -> c|d m\d+\.yaml:\d+ needs\[0\]: jobs form a cycle: d -> c -> d)/),
      ]),
    );
    expect(problems).toHaveLength(5);
  });

  it('checks the model schema with placeholders, and refuses type errors that do not depend on the reference', async () => {
    const p = manifest(`jobs:
${SONG}  - id: img
    model: alpha-image-2
    input: {prompt: "\${{ jobs.song.audio[0].title }} poster", quality: ultra}
`);
    const { problems } = await validateManifest(p);
    expect(problems.map((x) => `${x.job} ${x.path}`)).toEqual(['img input.quality']);
  });

  it('estimates a fan-out with the documented count of its parent, or says the children are unknown', async () => {
    const p = manifest(`pricing: {convert-to-wav: 3, generate-music: 10}
jobs:
${SONG}  - id: wav
    for_each: \${{ jobs.song.audio }}
    model: convert-to-wav
    input: {task_id: "\${{ jobs.song.task_id }}", audio_id: "\${{ item.audio_id }}"}
  - id: caption
    model: vendorb/verse-4.5-fast
    protocol: messages
    input: {max_tokens: 100, messages: [{role: user, content: "three prompts"}]}
  - id: pics
    for_each: \${{ jobs.caption.lines }}
    model: alpha-image-2
    input: {prompt: "\${{ item }}"}
`);
    const m = await openManifest(p);
    const est = await estimate(m.jobs(), { 'convert-to-wav': 3, 'generate-music': 10 }, { keepJobs: true });
    const wav = est.jobs!.find((j) => j.id === 'wav')!;
    expect(wav.credits).toBe(6);
    expect(wav.basis).toContain('2 children: the documented count of song.audio (generate-music)');
    const pics = est.jobs!.find((j) => j.id === 'pics')!;
    expect(pics.credits).toBeNull();
    expect(pics.basis).toContain('children unknown until caption runs (a chat answer has no documented number of lines)');
  });
});
