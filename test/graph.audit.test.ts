import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findCycles } from '../src/graph/collect.js';
import { lrc } from '../src/graph/lrc.js';
import { timestamped } from '../src/sandbox/music/lyrics.js';
import { validateManifest } from '../src/manifest/index.js';
import { tempDir } from './helpers/tmp.js';

/** Gaps found by the job-graph audit: long chains, where cycles are reported, references outside input. */

const t = tempDir('genbatch-graph-audit-');
afterAll(() => t.cleanup());

let n = 0;
function manifest(yaml: string): string {
  const p = join(t.dir, `m${n++}.yaml`);
  writeFileSync(p, yaml);
  return p;
}

describe('cycles', () => {
  it('findCycles walks a 20,000-job chain and a 20,000-job ring without a RangeError', () => {
    const N = 20_000;
    const chain = new Map<string, { parents: string[]; forEach: null }>();
    // Each job waits for the NEXT one: the search from j0 walks the whole chain.
    for (let i = 0; i < N; i++) chain.set(`j${i}`, { parents: i < N - 1 ? [`j${i + 1}`] : [], forEach: null });
    expect(findCycles(chain)).toEqual([]);
    chain.set(`j${N - 1}`, { parents: ['j0'], forEach: null });
    const cycles = findCycles(chain);
    expect(cycles).toHaveLength(1);
    expect(cycles[0]).toHaveLength(N);
  });

  it('a manifest with a 20,000-job needs chain validates', async () => {
    const lines = ['jobs:'];
    for (let i = 0; i < 20_000; i++) lines.push(`  - id: j${i}`, '    model: alpha-image-2', `    input: {prompt: "p${i}"}`, ...(i < 19_999 ? [`    needs: [j${i + 1}]`] : []));
    const { problems } = await validateManifest(manifest(lines.join('\n') + '\n'));
    expect(problems).toEqual([]);
  }, 60_000);

  it('a cycle closed by input.prompt is reported at that field and its line', async () => {
    const p = manifest(`jobs:
  - id: a
    model: vendorb/verse-4.5-fast
    protocol: messages
    input: {max_tokens: 50, messages: [{role: user, content: "\${{ jobs.b.text }}"}]}
  - id: b
    model: vendorb/verse-4.5-fast
    protocol: messages
    input:
      max_tokens: 50
      messages:
        - role: user
          content: "write about \${{ jobs.a.text }}"
`);
    const { problems } = await validateManifest(p);
    expect(problems).toHaveLength(1);
    const c = problems[0]!;
    expect(c.message).toMatch(/jobs form a cycle: (a -> b -> a|b -> a -> b)/);
    if (c.job === 'b') {
      expect(c.path).toBe('input.messages[0].content');
      expect(c.where).toMatch(/m\d+\.yaml:13$/);
    } else {
      expect(c.path).toBe('input.messages[0].content');
      expect(c.where).toMatch(/m\d+\.yaml:5$/);
    }
    expect(c.path).not.toBe('needs');
  });
});

describe('references outside input', () => {
  it('refuses a reference in callback_url, model or protocol, naming the field', async () => {
    const p = manifest(`jobs:
  - id: song
    model: generate-music
    input: {custom_mode: false, prompt: "a calm song"}
  - id: wav
    model: convert-to-wav
    callback_url: "https://example.com/\${{ jobs.song.task_id }}"
    input: {task_id: "\${{ jobs.song.task_id }}", audio_id: "\${{ jobs.song.audio[0].audio_id }}"}
  - id: pic
    model: "\${{ jobs.song.audio[0].title }}"
    input: {prompt: x}
  - id: talk
    model: vendorb/verse-4.5-fast
    protocol: "\${{ jobs.song.task_id }}"
    input: {max_tokens: 10, messages: [{role: user, content: hi}]}
`);
    const { problems } = await validateManifest(p);
    const short = problems.map((x) => `${x.job} ${x.path}: ${x.message}`);
    expect(short).toEqual([
      'wav callback_url: references (${{ ... }}) are allowed only in input; write this field out in full',
      'pic model: references (${{ ... }}) are allowed only in input; write this field out in full',
      'talk protocol: references (${{ ... }}) are allowed only in input; write this field out in full',
      'talk protocol: "${{ jobs.song.task_id }}" is not one of chat-completions, responses, messages, gemini',
    ]);
  });

  it('an unclosed ${{ is named once, with the text it is in', async () => {
    const p = manifest(`jobs:
  - id: a
    model: generate-music
    input: {custom_mode: false, prompt: "a calm song"}
  - id: b
    model: alpha-image-2
    input: {prompt: "cover for \${{ jobs.a.task_id"}
`);
    const { problems } = await validateManifest(p);
    expect(problems.map((x) => `${x.job} ${x.path}: ${x.message}`)).toEqual(['b input.prompt: an unclosed "${{" in "cover for ${{ jobs.a.task_id" (write ${{ jobs.<id>.<field> }})']);
  });
});

describe('LRC', () => {
  it('a 13-word line is cut 7 + 6, not 12 + 1; 25 words 9 + 8 + 8', () => {
    const line = (n: number, from: number) => Array.from({ length: n }, (_, i) => ({ word: `w${from + i}${i === n - 1 ? '\n' : ''}`, start_s: from + i, end_s: from + i + 0.5 }));
    const out = lrc([...line(13, 0), ...line(25, 20)]).trimEnd().split('\n');
    expect(out.map((l) => l.replace(/^\[[^\]]+\]/, '').split(' ').length)).toEqual([7, 6, 9, 8, 8]);
    expect(out[1]).toBe('[00:07.00]w7 w8 w9 w10 w11 w12');
  });

  it("the sandbox's aligned words keep the lyric's line breaks, so its LRC has the song's lines", () => {
    const words = timestamped('[Verse]\nBoats come home when the tide is low\nLanterns swaying, soft and slow\n[Chorus]\nHarbour lights, guide me back tonight', 120, 3).aligned_words;
    expect(words.map((w) => w.word).filter((w) => w.includes('\n'))).toEqual(['[Verse]\nBoats', 'low\n', 'slow\n', '[Chorus]\nHarbour']);
    expect(lrc(words).split('\n').map((l) => l.replace(/^\[\d\d:\d\d\.\d\d\]/, ''))).toEqual([
      'Boats come home when the tide is low',
      'Lanterns swaying, soft and slow',
      'Harbour lights, guide me back tonight',
      '',
    ]);
  });
});
