import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { findCycles } from '../src/graph/collect.js';
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
