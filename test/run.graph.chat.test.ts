import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSandbox, type Sandbox } from '../src/sandbox/index.js';
import { ROOT, ensureBuilt, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { checkFiles, readJobs } from './helpers/verify.js';

/**
 * Chat to image: a chat job's answer fills image prompts, one image job per
 * line of the answer (for_each over `lines`), and whole text into a prompt.
 * The sandbox's chat models echo the last user message line by line
 * (`Echo: a\nb\nc <sentence>`), and answer a JSON list of {"prompt": line}
 * when the message asks for a "JSON list": 3 lines make 3 children.
 */
const SCALE = '0.005';
const KEY = 'sk-test-graph-chat-0123456789';

let sb: Sandbox;
const t = tempDir('genbatch-run-graph-chat-');

beforeAll(async () => {
  ensureBuilt();
  sb = await startSandbox({ port: 0, keys: { [KEY]: 100_000 }, timeScale: Number(SCALE), seed: 5 });
}, 120_000);
afterAll(async () => {
  await sb?.close();
  t.cleanup();
});

const run = (manifest: string, out: string) => runCli(['run', manifest, '--base-url', sb.url, '--time-scale', SCALE, '--out', out, '--yes'], { GENBATCH_API_KEY: KEY });

function inputOf(out: string, id: string): Record<string, unknown> {
  return (JSON.parse(readFileSync(join(out, id, 'result.json'), 'utf8')) as { input: Record<string, unknown> }).input;
}

describe('chat to image', () => {
  it('one image job per line of a chat answer, the line as its prompt; the whole answer embedded in an image prompt and in another chat job', async () => {
    const manifest = join(t.dir, 'c2i.yaml');
    writeFileSync(
      manifest,
      `jobs:
  - id: caption
    model: vendorb/verse-4.5-fast
    protocol: messages
    input:
      max_tokens: 200
      messages: [{role: user, content: "1. a red fox in snow\\n2. a blue owl at night\\n3. a green frog on a leaf"}]
  - id: pics
    for_each: \${{ jobs.caption.lines }}
    model: alpha-image-2
    input: {prompt: "\${{ item }} (picture \${{ index }})", quality: low}
  - id: poster
    model: alpha-image-2
    input: {prompt: "A poster of: \${{ jobs.caption.text }}"}
  - id: refine
    model: vendorb/verse-4.5-fast
    protocol: messages
    input:
      max_tokens: 200
      messages: [{role: user, content: "Shorter: \${{ jobs.caption.text }}"}]
`,
    );
    const out = join(t.dir, 'out');
    const r = await run(manifest, out);
    expect(r.code, r.stderr).toBe(0);
    const jobs = readJobs(join(out, 'state.db'));
    const answer = readFileSync(join(out, 'caption', 'response.txt'), 'utf8');
    const lines = answer.split('\n').map((l) => l.trim().replace(/^\d+\.\s+/, '')).filter((l) => l !== '');
    expect(lines).toHaveLength(3);
    expect(lines[0]).toBe('Echo: 1. a red fox in snow');
    expect(lines[1]).toBe('a blue owl at night');
    expect(lines[2]).toMatch(/^a green frog on a leaf \S/);
    expect(jobs.map((j) => j.id)).toEqual(['caption', 'pics', 'poster', 'refine', 'pics.0', 'pics.1', 'pics.2']);
    expect(jobs.every((j) => j.state === 'done')).toBe(true);
    lines.forEach((line, i) => expect(inputOf(out, `pics.${i}`).prompt).toBe(`${line} (picture ${i})`));
    expect(inputOf(out, 'poster').prompt).toBe(`A poster of: ${answer.trim()}`);
    // A chat job fed by another chat job's answer.
    expect(readFileSync(join(out, 'refine', 'response.txt'), 'utf8')).toContain('Shorter: Echo: 1. a red fox in snow');
    expect(checkFiles(join(out, 'state.db'), out)).toBeGreaterThanOrEqual(lines.length + 1);
  }, 120_000);

  it('one image job per item of a JSON list answer, ${{ item.prompt }} filling the prompt', async () => {
    const manifest = join(t.dir, 'json.yaml');
    writeFileSync(
      manifest,
      `jobs:
  - id: ideas
    model: vendora/chat-5
    input:
      messages: [{role: user, content: "Answer with a JSON list of objects with a prompt field:\\na lighthouse in fog\\na kite over dunes\\na tram in rain\\na lantern festival"}]
  - id: pics
    for_each: \${{ jobs.ideas.items }}
    model: alpha-image-2
    input: {prompt: "\${{ item.prompt }}, photo \${{ index }}", quality: low}
`,
    );
    const out = join(t.dir, 'out-json');
    const r = await run(manifest, out);
    expect(r.code, r.stderr).toBe(0);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.map((j) => j.id)).toEqual(['ideas', 'pics', 'pics.0', 'pics.1', 'pics.2', 'pics.3']);
    expect(jobs.every((j) => j.state === 'done')).toBe(true);
    expect(['a lighthouse in fog', 'a kite over dunes', 'a tram in rain', 'a lantern festival'].map((p, i) => inputOf(out, `pics.${i}`).prompt)).toEqual([
      'a lighthouse in fog, photo 0',
      'a kite over dunes, photo 1',
      'a tram in rain, photo 2',
      'a lantern festival, photo 3',
    ]);
  }, 120_000);

  it('runs manifests/chat-to-image.yaml: a chat job and its images for each of the 12 PartiPrompts categories', async () => {
    const out = join(t.dir, 'shipped');
    const r = await run(join(ROOT, 'manifests', 'chat-to-image.yaml'), out);
    expect(r.code, r.stderr).toBe(0);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.filter((j) => j.id.startsWith('prompts-'))).toHaveLength(12);
    const children = jobs.filter((j) => /^images-[a-z-]+\.\d+$/.test(j.id));
    expect(children).toHaveLength(36);
    for (const p of jobs.filter((j) => j.id.startsWith('prompts-'))) expect(children.filter((c) => c.id.startsWith(`images-${p.id.slice('prompts-'.length)}.`))).toHaveLength(3);
    expect(jobs.every((j) => j.state === 'done')).toBe(true);
    expect(String(inputOf(out, 'images-animals.0').prompt)).toBe('Echo: A dignified beaver wearing glasses, a vest, and colorful neck tie. He stands next to a tall stack of books in a library.');
    expect(String(inputOf(out, 'images-animals.1').prompt)).toContain('Painted as a watercolour.');
    expect(String(inputOf(out, 'images-animals.2').prompt)).toMatch(/Seen at night\. \S/);
  }, 120_000);
});
