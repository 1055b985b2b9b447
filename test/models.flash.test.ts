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
