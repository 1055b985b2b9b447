import { describe, expect, it } from 'vitest';
import { checkSubmit } from '../src/models/index.js';

/** The contract's music character-limit table, every version x field, and the smaller rules around it. */

type Input = Record<string, unknown>;
const URL = 'https://example.com/song.mp3';
const issuesOf = (model: string, input: Input) => checkSubmit({ model, input }).issues;

function expectOne(model: string, input: Input, path: string, text: string, type = 'validation_error'): void {
  const issues = issuesOf(model, input);
  expect(issues, `${model} ${path}`).toHaveLength(1);
  expect(issues[0]).toMatchObject({ path, type });
  expect(issues[0]?.message).toContain(text);
}

/** The contract's table, written out again here (not read from src) so a wrong number in src fails. */
const TABLE: Array<[version: string, prompt: number, style: number, title: number]> = [
  ['V4', 3000, 200, 80],
  ['V4_5', 5000, 1000, 100],
  ['V4_5PLUS', 5000, 1000, 100],
  ['V4_5ALL', 5000, 1000, 80],
  ['V5', 5000, 1000, 100],
];

/** Workflows that take mv with prompt, style and title, and a valid input of each (with the version's fields filled in). */
const WORKFLOWS: Array<[model: string, base: Input]> = [
  ['extend-music', { default_param_flag: true, audio_id: 'a1', continue_at: 12.5 }],
  ['upload-and-cover-audio', { upload_url: URL, custom_mode: true }],
  ['upload-and-extend-audio', { upload_url: URL, default_param_flag: true, continue_at: 12.5 }],
];

describe('music character limits per version', () => {
  for (const [version, promptMax, styleMax, titleMax] of TABLE) {
    const limits = { prompt: promptMax, style: styleMax, title: titleMax };
    for (const [model, base] of WORKFLOWS) {
      for (const field of ['prompt', 'style', 'title'] as const) {
        it(`${model} ${version} ${field}: at most ${limits[field]}`, () => {
          const input = { ...base, mv: version, prompt: 'p', style: 's', title: 't' };
          expect(issuesOf(model, { ...input, [field]: 'x'.repeat(limits[field]) })).toEqual([]);
          expectOne(model, { ...input, [field]: 'x'.repeat(limits[field] + 1) }, `input.${field}`, `at most ${limits[field]} characters for ${version}`, 'content_too_long_error');
        });
      }
    }
    it(`generate-music ${version}: prompt ${promptMax}, style ${styleMax}, title 80 (every version)`, () => {
      const input = { custom_mode: true, mv: version, prompt: 'p', style: 's', title: 't' };
      expect(issuesOf('generate-music', { ...input, prompt: 'x'.repeat(promptMax), style: 'x'.repeat(styleMax), title: 'x'.repeat(80) })).toEqual([]);
      expectOne('generate-music', { ...input, prompt: 'x'.repeat(promptMax + 1) }, 'input.prompt', `at most ${promptMax} characters for ${version}`, 'content_too_long_error');
      expectOne('generate-music', { ...input, style: 'x'.repeat(styleMax + 1) }, 'input.style', `at most ${styleMax} characters for ${version}`, 'content_too_long_error');
      expectOne('generate-music', { ...input, title: 'x'.repeat(81) }, 'input.title', 'at most 80 characters for generate-music titles', 'content_too_long_error');
    });
  }

  it('add-instrumental and add-vocals: tags/style and title follow `model` (V4_5PLUS default, V5)', () => {
    const instrumental = { upload_url: URL, title: 't', tags: 'lofi', negative_tags: 'metal' };
    const vocals = { upload_url: URL, prompt: 'p', title: 't', style: 'pop', negative_tags: 'rap' };
    for (const model of [undefined, 'V4_5PLUS', 'V5']) {
      const v = model === undefined ? {} : { model };
      const name = model ?? 'V4_5PLUS';
      expect(issuesOf('add-instrumental', { ...instrumental, ...v, tags: 'x'.repeat(1000), title: 'x'.repeat(100) })).toEqual([]);
      expectOne('add-instrumental', { ...instrumental, ...v, tags: 'x'.repeat(1001) }, 'input.tags', `at most 1000 characters for ${name}`, 'content_too_long_error');
      expectOne('add-instrumental', { ...instrumental, ...v, title: 'x'.repeat(101) }, 'input.title', `at most 100 characters for ${name}`, 'content_too_long_error');
      expect(issuesOf('add-vocals', { ...vocals, ...v, prompt: 'x'.repeat(5000), style: 'x'.repeat(1000), title: 'x'.repeat(100) })).toEqual([]);
      expectOne('add-vocals', { ...vocals, ...v, prompt: 'x'.repeat(5001) }, 'input.prompt', `at most 5000 characters for ${name}`, 'content_too_long_error');
      expectOne('add-vocals', { ...vocals, ...v, style: 'x'.repeat(1001) }, 'input.style', `at most 1000 characters for ${name}`, 'content_too_long_error');
    }
  });
});

describe('music rules without a test before', () => {
  it('replace-section: infill_end_s has at most two decimals', () => {
    const ok = { task_id: 't1', audio_id: 'a1', prompt: 'p', tags: 'pop', title: 'T', infill_start_s: 1 };
    expect(issuesOf('replace-section', { ...ok, infill_end_s: 20.25 })).toEqual([]);
    expectOne('replace-section', { ...ok, infill_end_s: 20.255 }, 'input.infill_end_s', 'at most two decimals');
  });

  it('custom_mode is required for upload-and-cover-audio', () => {
    expectOne('upload-and-cover-audio', { upload_url: URL, prompt: 'p' }, 'input.custom_mode', 'is required (true or false)');
    expectOne('upload-and-cover-audio', { upload_url: URL, prompt: 'p', custom_mode: 'no' }, 'input.custom_mode', 'must be true or false');
  });

  it('default_param_flag is required for extend-music and upload-and-extend-audio', () => {
    expectOne('extend-music', { audio_id: 'a1' }, 'input.default_param_flag', 'is required (true or false)');
    expectOne('upload-and-extend-audio', { upload_url: URL }, 'input.default_param_flag', 'is required (true or false)');
    expectOne('extend-music', { audio_id: 'a1', default_param_flag: 1 }, 'input.default_param_flag', 'must be true or false');
  });

  it('add-vocals: vocal_gender is m or f', () => {
    const ok = { upload_url: URL, prompt: 'p', title: 't', style: 'pop', negative_tags: 'rap' };
    expect(issuesOf('add-vocals', { ...ok, vocal_gender: 'm' })).toEqual([]);
    expectOne('add-vocals', { ...ok, vocal_gender: 'male' }, 'input.vocal_gender', 'not one of m, f');
  });

  it('add-instrumental and add-vocals: the three weights are 0 to 1 with at most two decimals', () => {
    const cases: Array<[string, Input]> = [
      ['add-instrumental', { upload_url: URL, title: 't', tags: 'lofi', negative_tags: 'metal' }],
      ['add-vocals', { upload_url: URL, prompt: 'p', title: 't', style: 'pop', negative_tags: 'rap' }],
    ];
    for (const [model, ok] of cases) {
      expect(issuesOf(model, { ...ok, style_weight: 0.25, weirdness_constraint: 1, audio_weight: 0 })).toEqual([]);
      for (const field of ['style_weight', 'weirdness_constraint', 'audio_weight']) {
        expectOne(model, { ...ok, [field]: 1.01 }, `input.${field}`, 'must be at most 1');
        expectOne(model, { ...ok, [field]: -0.5 }, `input.${field}`, 'must be at least 0');
        expectOne(model, { ...ok, [field]: 0.333 }, `input.${field}`, 'at most two decimals');
        expectOne(model, { ...ok, [field]: '0.5' }, `input.${field}`, 'must be a number');
      }
    }
  });
});
