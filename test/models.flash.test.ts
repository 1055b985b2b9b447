import { describe, expect, it } from 'vitest';
import { checkSubmit, getModel } from '../src/models/index.js';

const M = 'vendora/dream-v5.0-flash/text-to-image';

describe('flash text-to-image', () => {
  it('accepts a minimal prompt and applies defaults', () => {
    const r = checkSubmit({ model: M, input: { prompt: 'a red fox' } });
    expect(r.issues).toEqual([]);
    expect(r.input).toMatchObject({ size: '1:1', resolution: '1K', enable_safety_checker: true });
  });
  it('rejects a whitespace-only prompt', () => {
    const r = checkSubmit({ model: M, input: { prompt: '   ' } });
    expect(r.issues).toEqual([{ path: 'input.prompt', message: 'must contain at least one non-whitespace character', type: 'validation_error' }]);
  });
  it('an empty prompt is one mistake with one message', () => {
    const r = checkSubmit({ model: M, input: { prompt: '' } });
    expect(r.issues).toEqual([{ path: 'input.prompt', message: 'must not be empty', type: 'validation_error' }]);
  });
  it('every catalogued prompt helper reports an empty prompt once', () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ['alpha-image-2', {}],
      ['imagine-video-1.5', {}],
      ['vidmodel2.5-text-to-video', {}],
      ['boost-music-style', {}],
    ];
    for (const [model, rest] of cases) {
      const field = model === 'boost-music-style' ? 'content' : 'prompt';
      const r = checkSubmit({ model, input: { ...rest, [field]: '' } });
      expect(r.issues, model).toEqual([{ path: `input.${field}`, message: 'must not be empty', type: 'validation_error' }]);
    }
  });
  it('rejects a 5001-character prompt as content_too_long_error', () => {
    const r = checkSubmit({ model: M, input: { prompt: 'x'.repeat(5001) } });
    expect(r.issues[0]).toMatchObject({ path: 'input.prompt', type: 'content_too_long_error' });
    expect(checkSubmit({ model: M, input: { prompt: 'x'.repeat(5000) } }).issues).toEqual([]);
  });
  it('rejects unknown fields at the root and inside input', () => {
    const r = checkSubmit({ model: M, extra: 1, input: { prompt: 'p', seed: 3 } });
    expect(r.issues.map((i) => i.path).sort()).toEqual(['extra', 'input.seed']);
  });
  it('rejects a size outside the enum, naming the allowed values', () => {
    const r = checkSubmit({ model: M, input: { prompt: 'p', size: '5:4' } });
    expect(r.issues[0]?.message).toContain('1:1, 4:3');
  });
  it('an unknown model is an error, never a fallback', () => {
    expect(() => getModel('vendora/dream-v9')).toThrow(/unknown model/);
    expect(checkSubmit({ model: 'nope', input: {} }).issues[0]?.path).toBe('model');
  });
});

describe('flash edit sibling (fields not shown)', () => {
  const E = 'vendora/dream-v5.0-flash/edit';
  it('requires a prompt and reference images, passes other fields through', () => {
    expect(checkSubmit({ model: E, input: { prompt: 'p', image_urls: ['https://example.com/a.png'], seed: 1 } }).issues).toEqual([]);
    expect(checkSubmit({ model: E, input: { image_urls: ['https://example.com/a.png'] } }).issues).toEqual([
      { path: 'input.prompt', message: 'is required', type: 'validation_error' },
    ]);
    expect(checkSubmit({ model: E, input: { prompt: 'p' } }).issues).toEqual([{ path: 'input.image_urls', message: 'is required', type: 'validation_error' }]);
    expect(checkSubmit({ model: E, input: { prompt: 'p', image_urls: [] } }).issues[0]?.message).toBe('must have at least one image URL');
  });
  it('workflow edit, one image, no contract price', () => {
    const spec = getModel(E);
    const input = { prompt: 'p', image_urls: ['https://example.com/a.png'] };
    expect(spec.workflow(input)).toBe('edit');
    expect(spec.outputCount?.(input)).toBe(1);
    expect(spec.price(input).credits).toBeNull();
    expect(spec.imageFields).toEqual(['image_urls[]']);
  });
});

describe('flash text-to-image: remaining rules', () => {
  it('prompt is required; n is not a field (one image per request)', () => {
    expect(checkSubmit({ model: M, input: {} }).issues).toEqual([{ path: 'input.prompt', message: 'is required', type: 'validation_error' }]);
    expect(checkSubmit({ model: M, input: { prompt: 'p', n: 2 } }).issues.map((i) => i.path)).toEqual(['input.n']);
  });
  it('accepts every size, resolution and output_format; rejects others', () => {
    for (const size of ['1:1', '4:3', '3:4', '16:9', '9:16', '2:3', '3:2', '21:9']) expect(checkSubmit({ model: M, input: { prompt: 'p', size } }).issues).toEqual([]);
    for (const resolution of ['1K', '1.5K', '2K']) expect(checkSubmit({ model: M, input: { prompt: 'p', resolution } }).issues).toEqual([]);
    expect(checkSubmit({ model: M, input: { prompt: 'p', resolution: '4K' } }).issues[0]).toMatchObject({ path: 'input.resolution', message: 'resolution "4K" is not one of 1K, 1.5K, 2K' });
    for (const output_format of ['jpeg', 'png']) expect(checkSubmit({ model: M, input: { prompt: 'p', output_format } }).issues).toEqual([]);
    expect(checkSubmit({ model: M, input: { prompt: 'p', output_format: 'jpg' } }).issues[0]).toMatchObject({ path: 'input.output_format' });
    expect(checkSubmit({ model: M, input: { prompt: 'p', enable_safety_checker: 'no' } }).issues[0]).toMatchObject({ path: 'input.enable_safety_checker', message: 'must be a boolean' });
  });
  it('is priced per image with no number in the service', () => {
    const quote = getModel(M).price({ prompt: 'p' });
    expect(quote.credits).toBeNull();
    expect(quote.basis).toContain('per output image');
    expect(getModel(M).outputCount?.({ prompt: 'p' })).toBe(1);
  });
});
