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
 * The sandbox's chat models echo the last user message with its whitespace
 * collapsed, so an answer there is one line: one child (several lines make
 * several children: see the unit tests of `lines` and the music fan-out tests).
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
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('a red fox in snow');
    expect(jobs.map((j) => j.id)).toEqual(['caption', 'pics', 'poster', 'refine', ...lines.map((_, i) => `pics.${i}`)]);
    expect(jobs.every((j) => j.state === 'done')).toBe(true);
    lines.forEach((line, i) => expect(inputOf(out, `pics.${i}`).prompt).toBe(`${line} (picture ${i})`));
    expect(inputOf(out, 'pics.0').prompt).toMatch(/^Echo: 1\. a red fox in snow 2\. a blue owl at night .* \(picture 0\)$/);
    expect(inputOf(out, 'poster').prompt).toBe(`A poster of: ${answer.trim()}`);
    // A chat job fed by another chat job's answer.
    expect(readFileSync(join(out, 'refine', 'response.txt'), 'utf8')).toContain('Shorter: Echo: 1. a red fox in snow');
    expect(checkFiles(join(out, 'state.db'), out)).toBeGreaterThanOrEqual(lines.length + 1);
  }, 120_000);

  it('runs manifests/chat-to-image.yaml: a chat job and its images for each of the 12 PartiPrompts categories', async () => {
    const out = join(t.dir, 'shipped');
    const r = await run(join(ROOT, 'manifests', 'chat-to-image.yaml'), out);
    expect(r.code, r.stderr).toBe(0);
    const jobs = readJobs(join(out, 'state.db'));
    expect(jobs.filter((j) => j.id.startsWith('prompts-'))).toHaveLength(12);
    const children = jobs.filter((j) => /^images-[a-z-]+\.\d+$/.test(j.id));
    expect(children.length).toBeGreaterThanOrEqual(12);
    expect(jobs.every((j) => j.state === 'done')).toBe(true);
    expect(String(inputOf(out, 'images-animals.0').prompt)).toContain('Animals');
  }, 120_000);
});
