import { describe, expect, it } from 'vitest';
import { checkSubmit } from '../src/models/index.js';
import { charCount } from '../src/models/common.js';

/**
 * Character limits count Unicode code points (the contract says "characters"):
 * an emoji is one character although it is two UTF-16 units. Every limit, the
 * zod-based prompt helpers and the music maxChars checks alike, counts the same way.
 */

const EMOJI = '\u{1F3B5}'; // one code point, two UTF-16 units
const emoji = (n: number) => EMOJI.repeat(n);
const URL = 'https://example.com/song.mp3';

function issues(model: string, input: Record<string, unknown>) {
  return checkSubmit({ model, input }).issues;
}

function tooLong(model: string, input: Record<string, unknown>, path: string, max: number): void {
  const found = issues(model, input);
  expect(found).toHaveLength(1);
  expect(found[0]).toMatchObject({ path, type: 'content_too_long_error' });
  expect(found[0]?.message).toContain(`at most ${max} characters`);
}

describe('character limits count code points', () => {
  it('charCount counts an emoji once and a combining mark as its own code point', () => {
    expect(EMOJI.length).toBe(2);
    expect(charCount(EMOJI)).toBe(1);
    expect(charCount(`a${EMOJI}b`)).toBe(3);
    expect(charCount('e\u0301')).toBe(2);
    expect(charCount('')).toBe(0);
  });

  it('prompt helpers (zod): flash 5000, video 1.5 4096, alpha-image-2 4000, dream-5.0-lite 2000', () => {
    const cases: Array<[string, number]> = [
      ['vendora/dream-v5.0-flash/text-to-image', 5000],
      ['imagine-video-1.5', 4096],
      ['alpha-image-2', 4000],
      ['dream-5.0-lite', 2000],
    ];
    for (const [model, max] of cases) {
      expect(issues(model, { prompt: emoji(max) }), model).toEqual([]);
      tooLong(model, { prompt: emoji(max + 1) }, 'input.prompt', max);
    }
  });

  it('music version limits (maxChars): V4 prompt 3000, style 200; generate-music title 80', () => {
    const base = { custom_mode: true, mv: 'V4', title: 't', style: 's', prompt: 'p' };
    expect(issues('generate-music', { ...base, prompt: emoji(3000), style: emoji(200), title: emoji(80) })).toEqual([]);
    tooLong('generate-music', { ...base, prompt: emoji(3001) }, 'input.prompt', 3000);
    tooLong('generate-music', { ...base, style: emoji(201) }, 'input.style', 200);
    tooLong('generate-music', { ...base, title: emoji(81) }, 'input.title', 80);
    expect(issues('generate-music', { ...base, title: emoji(81) })[0]?.message).toContain('(got 81)');
  });

  it('music non-custom prompt 500, add-vocals title 100, replace-section tags 1000, boost content 1000', () => {
    expect(issues('generate-music', { custom_mode: false, prompt: emoji(500) })).toEqual([]);
    tooLong('generate-music', { custom_mode: false, prompt: emoji(501) }, 'input.prompt', 500);
    const vocals = { upload_url: URL, prompt: 'lyrics', style: 'pop', negative_tags: 'rap' };
    expect(issues('add-vocals', { ...vocals, title: emoji(100) })).toEqual([]);
    tooLong('add-vocals', { ...vocals, title: emoji(101) }, 'input.title', 100);
    const section = { task_id: 't', audio_id: 'a', prompt: 'p', title: 'T', infill_start_s: 0, infill_end_s: 5 };
    expect(issues('replace-section', { ...section, tags: emoji(1000) })).toEqual([]);
    tooLong('replace-section', { ...section, tags: emoji(1001) }, 'input.tags', 1000);
    expect(issues('boost-music-style', { content: emoji(1000) })).toEqual([]);
    tooLong('boost-music-style', { content: emoji(1001) }, 'input.content', 1000);
  });

  it('replace-section callback_url: at most 2048 characters', () => {
    const section = { task_id: 't', audio_id: 'a', prompt: 'p', tags: 'pop', title: 'T', infill_start_s: 0, infill_end_s: 5 };
    const prefix = 'https://hooks.example.com/';
    expect(issues('replace-section', { ...section, callback_url: prefix + emoji(2048 - prefix.length) })).toEqual([]);
    expect(issues('replace-section', { ...section, callback_url: prefix + emoji(2049 - prefix.length) })[0]?.path).toBe('input.callback_url');
  });

  it('create-music-video author and domain_name: 50 characters', () => {
    const base = { task_id: 't', audio_id: 'a' };
    expect(issues('create-music-video', { ...base, author: emoji(50), domain_name: emoji(50) })).toEqual([]);
    tooLong('create-music-video', { ...base, author: emoji(51) }, 'input.author', 50);
  });
});
