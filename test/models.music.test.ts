import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkSubmit, findModel, listModels } from '../src/models/index.js';
import {
  MUSIC_RESULT_FIELDS,
  MUSIC_WORKFLOWS,
  STEM_SPLIT_KEYS,
  checkAgainstTrack,
  musicResultTexts,
  musicResultUrls,
  parseMusicResult,
  parseTimestampedLyrics,
  specs,
} from '../src/models/music/index.js';

type Input = Record<string, unknown>;
const check = (model: string, input: Input) => checkSubmit({ model, input });
const issuesOf = (model: string, input: Input) => check(model, input).issues;
const URL = 'https://example.com/song.mp3';

/** Exactly one issue, at `path`, whose message contains `text`. */
function expectOne(model: string, input: Input, path: string, text: string, type = 'validation_error') {
  const issues = issuesOf(model, input);
  expect(issues).toHaveLength(1);
  expect(issues[0]).toMatchObject({ path, type });
  expect(issues[0]?.message).toContain(text);
}

describe('music catalogue', () => {
  it('registers all 17 workflows, reading results from the music endpoint, with no contract price', () => {
    expect(specs.map((s) => s.id)).toEqual([...MUSIC_WORKFLOWS]);
    for (const id of MUSIC_WORKFLOWS) {
      const spec = findModel(id);
      expect(spec?.resultEndpoint).toBe('music');
      expect(['music', 'audio', 'lyrics']).toContain(spec?.kind);
      expect(spec?.price({}).credits).toBeNull();
      expect(spec?.sandboxCredits).toBeGreaterThan(0);
      expect(spec?.typicalSeconds[0]).toBeLessThan(spec?.typicalSeconds[1] ?? 0);
    }
    expect(listModels().filter((s) => s.family === 'music')).toHaveLength(17);
  });
  it('every input schema converts to JSON Schema (for the manifest schema)', () => {
    for (const spec of specs) {
      const schema = z.toJSONSchema(spec.input, { io: 'input' }) as { properties?: Record<string, unknown> };
      expect(Object.keys(schema.properties ?? {}).length).toBeGreaterThan(0);
    }
  });
  it('documents output counts', () => {
    const count = (id: string) => findModel(id)?.outputCount?.({}) ?? null;
    expect(count('generate-music')).toBe(2);
    expect(count('separate-vocals')).toBe(2);
    expect(count('stem-split')).toBe(12);
    expect(count('upload-and-separate-vocals')).toBe(7);
  });
  it('marks upload_url and audio_url as remote-URL-only fields', () => {
    expect(findModel('upload-and-cover-audio')?.urlOnlyFields).toEqual(['upload_url']);
    expect(findModel('upload-and-separate-vocals')?.urlOnlyFields).toEqual(['audio_url']);
    expectOne('add-vocals', { upload_url: './song.mp3', prompt: 'p', title: 't', style: 's', negative_tags: 'n' }, 'input.upload_url', 'http(s) URL');
    expectOne('upload-and-separate-vocals', { audio_url: '/tmp/a.wav' }, 'input.audio_url', 'http(s) URL');
  });
});

describe('generate-music', () => {
  const M = 'generate-music';
  it('non-custom: prompt only, defaults applied', () => {
    const r = check(M, { custom_mode: false, prompt: 'a calm piano piece' });
    expect(r.issues).toEqual([]);
    expect(r.input).toMatchObject({ mv: 'V4_5PLUS', instrumental: false });
  });
  it('custom_mode is required', () => {
    expectOne(M, { prompt: 'x' }, 'input.custom_mode', 'is required');
  });
  it('non-custom: prompt required and at most 500 characters', () => {
    expectOne(M, { custom_mode: false }, 'input.prompt', 'is required when custom_mode is false');
    expect(issuesOf(M, { custom_mode: false, prompt: 'x'.repeat(500) })).toEqual([]);
    expectOne(M, { custom_mode: false, prompt: 'x'.repeat(501) }, 'input.prompt', 'at most 500 characters', 'content_too_long_error');
  });
  it('non-custom: style, title and the other parameters must be empty', () => {
    const issues = issuesOf(M, { custom_mode: false, prompt: 'p', style: 'rock', title: 'T', persona_id: 'p1', vocal_gender: 'f', style_weight: 0.5 });
    expect(issues.map((i) => i.path).sort()).toEqual(['input.persona_id', 'input.style', 'input.style_weight', 'input.title', 'input.vocal_gender']);
    expect(issues[0]?.message).toContain('must be left empty when custom_mode is false');
    expect(issuesOf(M, { custom_mode: false, prompt: 'p', style: '' })).toEqual([]);
  });
  it('custom: style and title required; prompt required unless instrumental', () => {
    expect(issuesOf(M, { custom_mode: true, style: 'jazz', title: 'Night', prompt: '[Verse] la la' })).toEqual([]);
    expect(issuesOf(M, { custom_mode: true, instrumental: true, style: 'jazz', title: 'Night' })).toEqual([]);
    expectOne(M, { custom_mode: true, style: 'jazz', title: 'Night' }, 'input.prompt', 'when custom_mode is true and instrumental is false');
    const missing = issuesOf(M, { custom_mode: true, instrumental: true });
    expect(missing.map((i) => i.path).sort()).toEqual(['input.style', 'input.title']);
    expect(missing[0]?.message).toBe('is required when custom_mode is true');
    expectOne(M, { custom_mode: true, style: 'jazz', title: 'Night', prompt: '  ' }, 'input.prompt', 'non-whitespace');
  });
  it('custom: persona_id accepted', () => {
    expect(issuesOf(M, { custom_mode: true, instrumental: true, style: 's', title: 't', persona_id: 'persona-1' })).toEqual([]);
  });
  it('prompt and style limits follow mv', () => {
    const base = { custom_mode: true, title: 't' };
    expect(issuesOf(M, { ...base, mv: 'V4', prompt: 'x'.repeat(3000), style: 's'.repeat(200) })).toEqual([]);
    expectOne(M, { ...base, mv: 'V4', prompt: 'x'.repeat(3001), style: 's' }, 'input.prompt', 'at most 3000 characters for V4', 'content_too_long_error');
    expectOne(M, { ...base, mv: 'V4', prompt: 'x', style: 's'.repeat(201) }, 'input.style', 'at most 200 characters for V4', 'content_too_long_error');
    expect(issuesOf(M, { ...base, mv: 'V5', prompt: 'x'.repeat(5000), style: 's'.repeat(1000) })).toEqual([]);
    expectOne(M, { ...base, mv: 'V5', prompt: 'x'.repeat(5001), style: 's' }, 'input.prompt', 'at most 5000 characters for V5', 'content_too_long_error');
    expectOne(M, { ...base, mv: 'V4_5ALL', prompt: 'x', style: 's'.repeat(1001) }, 'input.style', 'at most 1000', 'content_too_long_error');
  });
  it('title is at most 80 characters for every version', () => {
    const base = { custom_mode: true, instrumental: true, style: 's' };
    expect(issuesOf(M, { ...base, mv: 'V5', title: 't'.repeat(80) })).toEqual([]);
    expectOne(M, { ...base, mv: 'V5', title: 't'.repeat(81) }, 'input.title', 'at most 80 characters', 'content_too_long_error');
  });
  it('mv must be a known version', () => {
    expectOne(M, { custom_mode: false, prompt: 'p', mv: 'V3' }, 'input.mv', 'V4, V4_5, V4_5PLUS, V4_5ALL, V5');
  });
  it('shared optional parameters: vocal_gender m|f and weights 0..1 with two decimals', () => {
    const base = { custom_mode: true, instrumental: true, style: 's', title: 't' };
    expect(issuesOf(M, { ...base, vocal_gender: 'm', style_weight: 0.65, weirdness_constraint: 1, audio_weight: 0, negative_tags: 'metal' })).toEqual([]);
    expectOne(M, { ...base, vocal_gender: 'x' }, 'input.vocal_gender', 'not one of m, f');
    expectOne(M, { ...base, style_weight: 1.5 }, 'input.style_weight', 'must be at most 1');
    expectOne(M, { ...base, weirdness_constraint: 0.123 }, 'input.weirdness_constraint', 'at most two decimals');
    expectOne(M, { ...base, audio_weight: -0.1 }, 'input.audio_weight', 'must be at least 0');
  });
  it('unknown fields are rejected; several issues are reported at once', () => {
    expectOne(M, { custom_mode: false, prompt: 'p', seed: 1 }, 'input.seed', 'unknown field');
    const issues = issuesOf(M, { custom_mode: true, vocal_gender: 'x', instrumental: true });
    expect(issues.map((i) => i.path).sort()).toEqual(['input.style', 'input.title', 'input.vocal_gender']);
  });
  it('workflow label follows custom_mode', () => {
    const spec = findModel(M);
    expect(spec?.workflow({ custom_mode: true })).toBe('custom mode');
    expect(spec?.workflow({ custom_mode: false })).toBe('non-custom mode');
  });
});

describe('extend-music', () => {
  const M = 'extend-music';
  it('default_param_flag true requires prompt, style, title, continue_at', () => {
    expect(issuesOf(M, { default_param_flag: true, audio_id: 'a1', prompt: 'p', style: 's', title: 't', continue_at: 61.5 })).toEqual([]);
    const issues = issuesOf(M, { default_param_flag: true, audio_id: 'a1' });
    expect(issues.map((i) => i.path).sort()).toEqual(['input.continue_at', 'input.prompt', 'input.style', 'input.title']);
    expect(issues[0]?.message).toBe('is required when default_param_flag is true');
  });
  it('default_param_flag false needs audio_id and mv (defaulted); own parameters must be empty', () => {
    const r = check(M, { default_param_flag: false, audio_id: 'a1' });
    expect(r.issues).toEqual([]);
    expect(r.input?.mv).toBe('V4_5PLUS');
    expectOne(M, { default_param_flag: false }, 'input.audio_id', 'is required');
    expectOne(M, { default_param_flag: false, audio_id: 'a1', mv: null }, 'input.mv', 'not one of');
    expectOne(M, { default_param_flag: false, audio_id: 'a1', style: 'rock' }, 'input.style', 'must be left empty when default_param_flag is false');
  });
  it('limits follow mv; continue_at is a non-negative number', () => {
    const base = { default_param_flag: true, audio_id: 'a1', prompt: 'p', style: 's', continue_at: 10 };
    expectOne(M, { ...base, mv: 'V4', title: 't'.repeat(81) }, 'input.title', 'at most 80 characters for V4', 'content_too_long_error');
    expect(issuesOf(M, { ...base, mv: 'V5', title: 't'.repeat(100) })).toEqual([]);
    expectOne(M, { ...base, title: 't', continue_at: -1 }, 'input.continue_at', 'at least 0');
  });
});

describe('upload workflows', () => {
  it('upload-and-cover-audio: non-custom prompt max 500, style and title empty', () => {
    const M = 'upload-and-cover-audio';
    expect(issuesOf(M, { upload_url: URL, custom_mode: false, prompt: 'make it jazz' })).toEqual([]);
    expectOne(M, { upload_url: URL, custom_mode: false, prompt: 'x'.repeat(501) }, 'input.prompt', 'at most 500', 'content_too_long_error');
    expectOne(M, { upload_url: URL, custom_mode: false, prompt: 'p', title: 'T' }, 'input.title', 'must be left empty when custom_mode is false');
    expectOne(M, { custom_mode: false, prompt: 'p' }, 'input.upload_url', 'is required');
  });
  it('upload-and-cover-audio: custom mode needs style, title, prompt unless instrumental; version title limit', () => {
    const M = 'upload-and-cover-audio';
    expect(issuesOf(M, { upload_url: URL, custom_mode: true, style: 's', title: 't'.repeat(100), prompt: 'lyrics' })).toEqual([]);
    expectOne(M, { upload_url: URL, custom_mode: true, style: 's', title: 't' }, 'input.prompt', 'instrumental is false');
    expectOne(M, { upload_url: URL, custom_mode: true, mv: 'V4_5ALL', instrumental: true, style: 's', title: 't'.repeat(81) }, 'input.title', 'at most 80 characters for V4_5ALL', 'content_too_long_error');
  });
  it('upload-and-extend-audio: flag true needs style, title, continue_at (+prompt unless instrumental); false takes only upload_url', () => {
    const M = 'upload-and-extend-audio';
    expect(issuesOf(M, { upload_url: URL, default_param_flag: true, instrumental: true, style: 's', title: 't', continue_at: 30 })).toEqual([]);
    const issues = issuesOf(M, { upload_url: URL, default_param_flag: true });
    expect(issues.map((i) => i.path).sort()).toEqual(['input.continue_at', 'input.prompt', 'input.style', 'input.title']);
    expect(issuesOf(M, { upload_url: URL, default_param_flag: false })).toEqual([]);
    expectOne(M, { upload_url: URL, default_param_flag: false, prompt: 'words' }, 'input.prompt', 'must be left empty when default_param_flag is false');
  });
  it('upload-and-extend-audio: flag false takes only upload_url (with instrumental and mv, chosen); every other parameter is rejected', () => {
    const M = 'upload-and-extend-audio';
    expect(issuesOf(M, { upload_url: URL, default_param_flag: false, instrumental: true, mv: 'V5' })).toEqual([]);
    const others = { persona_id: 'p1', negative_tags: 'metal', vocal_gender: 'f', style_weight: 0.5, weirdness_constraint: 0.5, audio_weight: 0.5, style: 's', title: 't', continue_at: 3 };
    const issues = issuesOf(M, { upload_url: URL, default_param_flag: false, ...others });
    expect(issues.map((i) => i.path).sort()).toEqual(Object.keys(others).map((k) => `input.${k}`).sort());
    for (const i of issues) expect(i.message).toContain('must be left empty when default_param_flag is false');
  });
  it('add-instrumental: upload_url, title, tags, negative_tags required; model V4_5PLUS default or V5', () => {
    const M = 'add-instrumental';
    const r = check(M, { upload_url: URL, title: 't', tags: 'lofi', negative_tags: 'metal' });
    expect(r.issues).toEqual([]);
    expect(r.input?.model).toBe('V4_5PLUS');
    expect(issuesOf(M, { upload_url: URL, title: 't', tags: 'lofi', negative_tags: 'metal', model: 'V5' })).toEqual([]);
    expectOne(M, { upload_url: URL, title: 't', tags: 'lofi', negative_tags: 'metal', model: 'V4' }, 'input.model', 'not one of V4_5PLUS, V5');
    expectOne(M, { upload_url: URL, title: 't', tags: 'lofi' }, 'input.negative_tags', 'is required');
    expectOne(M, { upload_url: URL, title: 't', tags: 'l', negative_tags: 'n', mv: 'V5' }, 'input.mv', 'unknown field');
    expectOne(M, { upload_url: URL, title: 't', tags: 'l'.repeat(1001), negative_tags: 'n' }, 'input.tags', 'at most 1000', 'content_too_long_error');
  });
  it('add-vocals: upload_url, prompt, title, style, negative_tags required; optional model and vocal_gender', () => {
    const M = 'add-vocals';
    const ok = { upload_url: URL, prompt: 'lyrics', title: 't', style: 'pop', negative_tags: 'rap' };
    expect(issuesOf(M, { ...ok, model: 'V5', vocal_gender: 'f' })).toEqual([]);
    expectOne(M, { ...ok, prompt: undefined }, 'input.prompt', 'is required');
    expectOne(M, { ...ok, title: 't'.repeat(101) }, 'input.title', 'at most 100 characters for V4_5PLUS', 'content_too_long_error');
  });
  it('upload-and-separate-vocals: model_name and output_type enums with defaults', () => {
    const M = 'upload-and-separate-vocals';
    const r = check(M, { audio_url: URL, title: 'x' });
    expect(r.issues).toEqual([]);
    expect(r.input).toMatchObject({ model_name: 'base', output_type: 'general' });
    expect(issuesOf(M, { audio_url: URL, model_name: 'enhanced', output_type: 'drums' })).toEqual([]);
    expectOne(M, { audio_url: URL, model_name: 'pro' }, 'input.model_name', 'base, enhanced, instrumental');
    expectOne(M, { audio_url: URL, output_type: 'flute' }, 'input.output_type', 'general, bass, drums');
  });
});

describe('replace-section', () => {
  const M = 'replace-section';
  const ok = { task_id: 't1', audio_id: 'a1', prompt: 'new words', tags: 'pop', title: 'T', infill_start_s: 10.25, infill_end_s: 20 };
  it('accepts the required fields and optional negative_tags, full_lyrics, callback_url', () => {
    expect(issuesOf(M, { ...ok, negative_tags: 'n', full_lyrics: 'all', callback_url: 'https://hooks.example.com/x' })).toEqual([]);
  });
  it('each required field is required', () => {
    for (const key of Object.keys(ok)) {
      const input: Input = { ...ok };
      delete input[key];
      expectOne(M, input, `input.${key}`, 'is required');
    }
  });
  it('infill_start_s is at least 0 with at most two decimals; end is greater than start', () => {
    expectOne(M, { ...ok, infill_start_s: -1 }, 'input.infill_start_s', 'at least 0');
    expectOne(M, { ...ok, infill_start_s: 1.234 }, 'input.infill_start_s', 'at most two decimals');
    expectOne(M, { ...ok, infill_end_s: 10.25 }, 'input.infill_end_s', 'greater than infill_start_s');
  });
  it('callback_url must be https', () => {
    expectOne(M, { ...ok, callback_url: 'http://hooks.example.com' }, 'input.callback_url', 'https');
  });
  it('the service checks the section lies inside the track', () => {
    expect(checkAgainstTrack('replace-section', ok, { trackSeconds: 120 })).toEqual([]);
    expect(checkAgainstTrack('replace-section', { ...ok, infill_end_s: 130 }, { trackSeconds: 120 })).toEqual([
      { path: 'input.infill_end_s', message: 'must be inside the track (at most 120 seconds)', type: 'validation_error' },
    ]);
    expect(checkAgainstTrack('replace-section', { ...ok, infill_start_s: 125, infill_end_s: 130 }, { trackSeconds: 120 }).map((i) => i.path)).toEqual([
      'input.infill_start_s',
      'input.infill_end_s',
    ]);
  });
});

describe('service-side checks', () => {
  it('uploaded audio: 8 minutes, 1 minute for V4_5ALL', () => {
    expect(checkAgainstTrack('upload-and-cover-audio', { mv: 'V5' }, { uploadSeconds: 480 })).toEqual([]);
    expect(checkAgainstTrack('upload-and-cover-audio', { mv: 'V5' }, { uploadSeconds: 481 })[0]?.message).toContain('at most 8 minutes');
    expect(checkAgainstTrack('upload-and-extend-audio', { mv: 'V4_5ALL' }, { uploadSeconds: 61 })[0]).toMatchObject({ path: 'input.upload_url' });
    expect(checkAgainstTrack('upload-and-separate-vocals', {}, { uploadSeconds: 481 })[0]?.path).toBe('input.audio_url');
  });
  it('timestamped lyrics need vocals; continue_at inside the track', () => {
    expect(checkAgainstTrack('get-timestamped-lyrics', {}, { trackHasVocals: true })).toEqual([]);
    expect(checkAgainstTrack('get-timestamped-lyrics', {}, { trackHasVocals: false })[0]?.path).toBe('input.audio_id');
    expect(checkAgainstTrack('extend-music', { continue_at: 200 }, { trackSeconds: 180 })[0]?.path).toBe('input.continue_at');
    expect(checkAgainstTrack('extend-music', { continue_at: 170 }, { trackSeconds: 180 })).toEqual([]);
    expect(checkAgainstTrack('upload-and-extend-audio', { continue_at: 90 }, { uploadSeconds: 60 })[0]?.path).toBe('input.continue_at');
  });
});

describe('text and track operations', () => {
  it('boost-music-style takes content', () => {
    expect(issuesOf('boost-music-style', { content: 'lofi, chill' })).toEqual([]);
    expectOne('boost-music-style', {}, 'input.content', 'is required');
    expectOne('boost-music-style', { content: '   ' }, 'input.content', 'non-whitespace');
  });
  it('generate-lyrics prompt is at most 200 words', () => {
    expect(issuesOf('generate-lyrics', { prompt: Array(200).fill('word').join(' ') })).toEqual([]);
    expectOne('generate-lyrics', { prompt: Array(201).fill('word').join(' ') }, 'input.prompt', 'at most 200 words (got 201)', 'content_too_long_error');
  });
  it('task_id + audio_id workflows', () => {
    for (const id of ['get-timestamped-lyrics', 'convert-to-wav', 'separate-vocals', 'stem-split', 'create-music-video']) {
      expect(issuesOf(id, { task_id: 't', audio_id: 'a' })).toEqual([]);
      expectOne(id, { task_id: 't' }, 'input.audio_id', 'is required');
      expectOne(id, { task_id: 't', audio_id: 7 }, 'input.audio_id', 'must be a string');
    }
  });
  it('create-music-video author and domain_name at most 50', () => {
    const ok = { task_id: 't', audio_id: 'a', author: 'a'.repeat(50), domain_name: 'd'.repeat(50) };
    expect(issuesOf('create-music-video', ok)).toEqual([]);
    expectOne('create-music-video', { ...ok, author: 'a'.repeat(51) }, 'input.author', 'at most 50', 'content_too_long_error');
    expectOne('create-music-video', { ...ok, domain_name: 'd'.repeat(51) }, 'input.domain_name', 'at most 50', 'content_too_long_error');
  });
  it('generate-music-cover takes task_id; generate-persona needs name and description', () => {
    expect(issuesOf('generate-music-cover', { task_id: 't' })).toEqual([]);
    expectOne('generate-music-cover', { task_id: 't', audio_id: 'a' }, 'input.audio_id', 'unknown field');
    expect(issuesOf('generate-persona', { task_id: 't', audio_id: 'a', name: 'N', description: 'D' })).toEqual([]);
    expectOne('generate-persona', { task_id: 't', audio_id: 'a', name: 'N' }, 'input.description', 'is required');
  });
});

describe('music results', () => {
  const track = { audio_id: 'a1', audio_url: 'https://cdn.example.com/a1.mp3', image_url: 'https://cdn.example.com/a1.jpg', title: 'T', tags: 'pop', duration: 123.4, prompt: 'p' };
  it('documents the result fields per workflow', () => {
    expect(MUSIC_RESULT_FIELDS['generate-music'].map((f) => f.name)).toEqual(['audio_id', 'audio_url', 'image_url', 'title', 'tags', 'duration', 'prompt']);
    expect(MUSIC_RESULT_FIELDS['get-timestamped-lyrics'][0]?.name).toBe('timestampe_lyrics');
    expect(STEM_SPLIT_KEYS).toHaveLength(12);
    expect(Object.keys(MUSIC_RESULT_FIELDS).sort()).toEqual([...MUSIC_WORKFLOWS].sort());
  });
  it('track items: audio and image URLs', () => {
    expect(musicResultUrls('generate-music', track)).toEqual([
      { name: 'audio', url: track.audio_url },
      { name: 'image', url: track.image_url },
    ]);
    expect(() => musicResultUrls('generate-music', { ...track, audio_url: 'ftp://x' })).toThrow(/audio_url: must be an http\(s\) URL/);
    expect(() => musicResultUrls('generate-music', { audio_id: 'a' })).toThrow(/audio_url/);
  });
  it('JSON-string fields are parsed: separate_vocals, stem_split, vocal_removal, generate_cover', () => {
    const sep = { separate_vocals: JSON.stringify({ vocal_url: 'https://c/v.mp3', instrumental_url: 'https://c/i.mp3' }) };
    expect(musicResultUrls('separate-vocals', sep).map((u) => u.name)).toEqual(['vocal', 'instrumental']);
    const stems = Object.fromEntries(STEM_SPLIT_KEYS.map((k) => [k, `https://c/${k}.mp3`]));
    const split = musicResultUrls('stem-split', { stem_split: JSON.stringify(stems) });
    expect(split).toHaveLength(12);
    expect(split[0]).toEqual({ name: 'backing_vocals', url: 'https://c/backing_vocals_url.mp3' });
    const removal = { bass: 'https://c/b', drums: 'https://c/d', piano: 'https://c/p', guitar: 'https://c/g', vocals: 'https://c/v', other: 'https://c/o' };
    expect(musicResultUrls('upload-and-separate-vocals', { vocal_removal: JSON.stringify(removal) }).map((u) => u.name)).toEqual(['bass', 'drums', 'piano', 'guitar', 'vocals', 'other']);
    const cover = { generate_cover: JSON.stringify([{ file_url: 'https://c/1.png', file_type: 'image' }, { file_url: 'https://c/2.png', file_type: 'image' }]) };
    expect(musicResultUrls('generate-music-cover', cover).map((u) => u.name)).toEqual(['cover-1', 'cover-2']);
    expect(() => musicResultUrls('separate-vocals', { separate_vocals: '{not json' })).toThrow(/JSON string/);
    const { drums_url: _d, ...missing } = stems;
    expect(() => musicResultUrls('stem-split', { stem_split: JSON.stringify(missing) })).toThrow(/drums_url/);
  });
  it('wav, video and text results', () => {
    expect(musicResultUrls('convert-to-wav', { wav_url: 'https://c/a.wav' })).toEqual([{ name: 'wav', url: 'https://c/a.wav' }]);
    expect(musicResultUrls('create-music-video', { video_url: 'https://c/a.mp4' })).toEqual([{ name: 'video', url: 'https://c/a.mp4' }]);
    expect(musicResultUrls('generate-lyrics', { title: 'T', text: 'la la' })).toEqual([]);
    expect(musicResultTexts('generate-lyrics', { title: 'T', text: 'la la' })).toEqual([
      { name: 'title', text: 'T' },
      { name: 'lyrics', text: 'la la' },
    ]);
    expect(musicResultTexts('generate-persona', { persona_id: 'p1' })).toEqual([{ name: 'persona_id', text: 'p1' }]);
    expect(() => parseMusicResult('boost-music-style', {})).toThrow(/style/);
    expect(() => parseMusicResult('nope', {})).toThrow(/unknown music workflow/);
  });
  it('timestamped lyrics content', () => {
    const content = {
      aligned_words: [{ word: '[Verse]\nHello', start_s: 1.2, end_s: 1.8, success: true, palign: 0 }],
      waveform_data: [0.1, 0.5],
      hoot_cer: 0.12,
      is_streamed: false,
    };
    const item = { timestampe_lyrics: JSON.stringify(content) };
    expect(parseMusicResult('get-timestamped-lyrics', item)).toEqual(item);
    expect(parseTimestampedLyrics(item.timestampe_lyrics)).toEqual(content);
    expect(parseTimestampedLyrics(JSON.stringify({ ...content, hoot_cer: 'low' }))).toBeNull();
    expect(() => parseMusicResult('get-timestamped-lyrics', { timestamp_lyrics: 'x' })).toThrow(/timestampe_lyrics/);
  });
});
