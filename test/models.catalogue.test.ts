import { describe, expect, it } from 'vitest';
import { checkSubmit, getModel, inputFields, listModels } from '../src/models/index.js';

/** Catalogue metadata for `genbatch models`: workflows, fields from the zod schema, price basis. */

describe('catalogue metadata', () => {
  it('every model lists its workflows and a price basis that says its source', () => {
    for (const spec of listModels()) {
      expect(spec.workflows.length, spec.id).toBeGreaterThan(0);
      expect(new Set(spec.workflows).size, spec.id).toBe(spec.workflows.length);
      expect(spec.priceBasis, spec.id).toMatch(/^unknown: |\(service price\)$/);
    }
  });

  it('a service price basis only where price() gives numbers; unknown ones give null', () => {
    const priced = listModels().filter((s) => !s.priceBasis.startsWith('unknown')).map((s) => s.id);
    expect(priced).toEqual(['alpha-image-2', 'alpha-image-2-edit', 'motion-1.6/standard', 'motion-1.6/pro', 'imagine-video-1.5']);
    const samples: Array<[string, Record<string, unknown>]> = [
      ['dream-4', { prompt: 'p' }],
      ['kontext-pro', { prompt: 'p' }],
      ['clip-2.3', { prompt: 'p' }],
      ['videoh', { prompt: 'p' }],
      ['generate-music', { custom_mode: false, prompt: 'p' }],
      ['alpha-image-2', { prompt: 'p' }],
      ['motion-1.6/pro', { prompt: 'p', duration: 4 }],
      ['imagine-video-1.5', { prompt: 'p' }],
    ];
    for (const [model, input] of samples) {
      const r = checkSubmit({ model, input });
      expect(r.issues, model).toEqual([]);
      const credits = getModel(model).price(r.input ?? {}).credits;
      if (priced.includes(model)) expect(credits, model).toBeGreaterThan(0);
      else expect(credits, model).toBeNull();
    }
  });

  it('music workflows: the custom_mode and default_param_flag labels, else the id', () => {
    expect(getModel('generate-music').workflows).toEqual(['custom mode', 'non-custom mode']);
    expect(getModel('upload-and-cover-audio').workflows).toEqual(['custom mode', 'non-custom mode']);
    expect(getModel('extend-music').workflows).toEqual(['new parameters', 'original parameters']);
    expect(getModel('upload-and-extend-audio').workflow({ default_param_flag: false })).toBe('original parameters');
    expect(getModel('stem-split').workflows).toEqual(['stem-split']);
  });

  it('fields come from the input schema: type or enum, required (a default makes a field optional), refused fields, open inputs', () => {
    const flash = inputFields(getModel('vendora/dream-v5.0-flash/text-to-image'));
    expect(flash.open).toBe(false);
    expect(flash.fields.map((f) => f.name)).toEqual(['prompt', 'size', 'resolution', 'output_format', 'enable_safety_checker']);
    expect(flash.fields[0]).toMatchObject({ name: 'prompt', type: 'string', required: true, accepted: true });
    expect(flash.fields[1]).toMatchObject({ name: 'size', required: false, default: '1:1', enum: ['1:1', '4:3', '3:4', '16:9', '9:16', '2:3', '3:2', '21:9'] });
    const alpha = inputFields(getModel('alpha-image-2'));
    expect(alpha.fields.find((f) => f.name === 'n')).toMatchObject({ accepted: false, type: 'not accepted' });
    expect(inputFields(getModel('frame-2-pro')).open).toBe(true);
    const motion = inputFields(getModel('motion-1.6/standard'));
    expect(motion.fields.filter((f) => f.required).map((f) => f.name)).toEqual(['prompt', 'duration']);
    expect(motion.fields.find((f) => f.name === 'image_urls')?.type).toBe('array of string');
    expect(inputFields(getModel('dream-5.0-lite')).fields.find((f) => f.name === 'size')?.type).toBe('string | object');
    for (const spec of listModels()) expect(inputFields(spec).fields.length, spec.id).toBeGreaterThan(0);
  });
});
