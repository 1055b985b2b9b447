import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { CHAT_MODELS, listModels } from '../src/models/index.js';
import { ensureBuilt, genbatch, ROOT } from './fixtures/manifest/cli.js';

/** `genbatch models` run as a user would (the built CLI in a child process). */

beforeAll(() => {
  ensureBuilt();
  const pairs = [
    ['src/cli/commands/models.ts', 'dist/cli/commands/models.js'],
    ['src/cli/main.ts', 'dist/cli/main.js'],
    ['src/models/fields.ts', 'dist/models/fields.js'],
  ];
  const stale = pairs.some(([src, out]) => !existsSync(join(ROOT, out)) || statSync(join(ROOT, src)).mtimeMs > statSync(join(ROOT, out)).mtimeMs);
  if (stale) spawnSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', ROOT], { encoding: 'utf8' });
}, 180_000);

interface Field {
  name: string;
  type: string;
  enum?: string[];
  required: boolean;
  accepted: boolean;
  default?: unknown;
}
interface Catalogue {
  models: Array<{ id: string; kind: string; family: string; workflows: string[]; fields: Field[]; open_input: boolean; price_basis: string; price_known: boolean }>;
  chat_models: Array<{ id: string; group: string; protocols: string[]; price_basis: string; price_known: boolean }>;
}

describe('genbatch models', () => {
  it('prints each model with its workflows, fields and price basis, then the chat models with their protocols', async () => {
    const r = await genbatch(['models']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const block = r.stdout.split('\n\n').find((b) => b.startsWith('motion-1.6/pro '));
    expect(block).toBeDefined();
    expect(block).toContain('[video, family motion-1.6]');
    expect(block).toContain('workflows: text-to-video, image-to-video, elements');
    expect(block).toContain('prompt (string; required)');
    expect(block).toContain('duration (integer; required)');
    expect(block).toContain('price: 15 credits per second x duration (service price)');
    const flash = r.stdout.split('\n\n').find((b) => b.startsWith('vendora/dream-v5.0-flash/text-to-image '));
    expect(flash).toContain('size (1:1|4:3|3:4|16:9|9:16|2:3|3:2|21:9; default "1:1")');
    expect(flash).toContain('price: unknown:');
    expect(r.stdout).toMatch(/alpha-image-2 .*\n.*\n {2}workflows: text-to-image\n {2}fields: .*n: not accepted\n {2}price: quality x billed resolution table/);
    expect(r.stdout).toMatch(/\n {2}vendorb\/verse-4\.5 +chat-completions, messages/);
    expect(r.stdout).toContain('chat models (price unknown');
  });

  it('--json gives the same catalogue structured', async () => {
    const r = await genbatch(['models', '--json']);
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout) as Catalogue;
    const video = out.models.find((m) => m.id === 'imagine-video-1.5');
    expect(video).toMatchObject({ kind: 'video', workflows: ['text-to-video', 'image-to-video', 'reference-to-video'], open_input: false, price_known: true });
    expect(video?.price_basis).toMatch(/^per second by resolution \(480p 14.5, 720p 25, 1080p 45\) x duration .* \+ 2 per input or reference image \(service price\)$/);
    expect(video?.fields.find((f) => f.name === 'prompt')).toMatchObject({ type: 'string', required: true });
    expect(video?.fields.find((f) => f.name === 'resolution')).toMatchObject({ enum: ['480p', '720p', '1080p'], required: false, default: '720p' });
    const music = out.models.find((m) => m.id === 'generate-music');
    expect(music).toMatchObject({ kind: 'music', workflows: ['custom mode', 'non-custom mode'], price_known: false });
    expect(music?.price_basis).toMatch(/^unknown: /);
    expect(music?.fields.find((f) => f.name === 'custom_mode')).toMatchObject({ type: 'boolean', required: true });
    expect(out.models.find((m) => m.id === 'frame-2-pro')?.open_input).toBe(true);
    expect(out.models.map((m) => m.id)).toEqual(listModels().map((m) => m.id));
    const chat = out.chat_models.find((m) => m.id === 'vendorc/lumen-2.5-pro');
    expect(chat).toMatchObject({ protocols: ['chat-completions', 'gemini'], price_known: false });
    expect(chat?.price_basis).toMatch(/^unknown: /);
    expect(out.chat_models.map((m) => m.id)).toEqual(CHAT_MODELS.map((m) => m.id));
  });
});

describe('genbatch models filtered', () => {
  const ids = (stdout: string) => stdout.split('\n').filter((l) => /^\S/.test(l) && !l.startsWith('chat models')).map((l) => l.split('  ')[0]);
  const chatIds = (stdout: string) => stdout.split('\n').filter((l) => l.startsWith('  vendor')).map((l) => l.trim().split(/\s+/)[0]);

  it('an exact id shows that model alone; a prefix shows every model whose id starts with it', async () => {
    const [exact, prefix, chat] = await Promise.all([genbatch(['models', 'alpha-image-2']), genbatch(['models', 'motion-1.6/']), genbatch(['models', 'vendorb/'])]);
    expect(exact.code).toBe(0);
    expect(ids(exact.stdout)).toEqual(['alpha-image-2']);
    expect(exact.stdout).not.toContain('chat models');
    expect(ids(prefix.stdout)).toEqual(['motion-1.6/standard', 'motion-1.6/pro']);
    expect(ids(chat.stdout)).toEqual([]);
    expect(chatIds(chat.stdout)).toEqual(CHAT_MODELS.filter((m) => m.id.startsWith('vendorb/')).map((m) => m.id));
  });

  it('--kind keeps one kind; audio means every music and audio workflow; chat only the chat models', async () => {
    const [video, audio, chat] = await Promise.all([genbatch(['models', '--kind', 'video']), genbatch(['models', '--kind', 'audio']), genbatch(['models', '--kind', 'chat'])]);
    expect(ids(video.stdout)).toEqual(listModels().filter((m) => m.kind === 'video').map((m) => m.id));
    expect(video.stdout).not.toContain('chat models');
    expect(ids(audio.stdout)).toEqual(listModels().filter((m) => ['music', 'lyrics', 'audio'].includes(m.kind)).map((m) => m.id));
    expect(ids(chat.stdout)).toEqual([]);
    expect(chatIds(chat.stdout)).toEqual(CHAT_MODELS.map((m) => m.id));
    // The whole listing is far longer than any one kind.
    const all = await genbatch(['models']);
    expect(video.stdout.split('\n').length * 4).toBeLessThan(all.stdout.split('\n').length);
  });

  it('--json is filtered the same way', async () => {
    const r = await genbatch(['models', 'dream-4', '--json']);
    const out = JSON.parse(r.stdout) as Catalogue;
    expect(out.models.map((m) => m.id)).toEqual(['dream-4']);
    expect(out.chat_models).toEqual([]);
    const image = JSON.parse((await genbatch(['models', '--kind', 'image', '--json'])).stdout) as Catalogue;
    expect(image.models.map((m) => m.id)).toEqual(listModels().filter((m) => m.kind === 'image').map((m) => m.id));
    const both = JSON.parse((await genbatch(['models', 'kontext', '--kind', 'image', '--json'])).stdout) as Catalogue;
    expect(both.models.map((m) => m.id)).toEqual(['kontext-pro', 'kontext-pro-edit', 'kontext-max', 'kontext-max-edit']);
  });

  it('no match: exit 2 with a did-you-mean; a kind outside the list names the choices', async () => {
    const [typo, kind] = await Promise.all([genbatch(['models', 'alpha-imag-2x']), genbatch(['models', '--kind', 'sound'])]);
    expect(typo.code).toBe(2);
    expect(typo.stdout).toBe('');
    expect(typo.stderr).toBe('genbatch: no model id starts with "alpha-imag-2x"; did you mean "alpha-image-2"? (genbatch models lists them all)\n');
    expect(kind.code).toBe(2);
    expect(kind.stderr).toContain('Allowed choices are image, video, audio, music, lyrics, chat');
  });
});
