import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkSubmit, getModel, listModels } from '../src/models/index.js';
import { perImageTotal } from '../src/models/image-common.js';

type Input = Record<string, unknown>;
const URL1 = 'https://example.com/a.png';
const urls = (k: number) => Array.from({ length: k }, (_, i) => `https://example.com/${i}.png`);

/** Issues of one submit as [path, message] pairs. */
function issues(model: string, input: Input): Array<[string, string]> {
  return checkSubmit({ model, input }).issues.map((i) => [i.path, i.message]);
}
function ok(model: string, input: Input): void {
  expect(issues(model, input)).toEqual([]);
}
function fails(model: string, input: Input, path: string, message: string | RegExp): void {
  const found = issues(model, input);
  expect(found).toHaveLength(1);
  expect(found[0]?.[0]).toBe(path);
  if (typeof message === 'string') expect(found[0]?.[1]).toBe(message);
  else expect(found[0]?.[1]).toMatch(message);
}
/** Parsed (defaulted) input of a valid submit. */
function parsed(model: string, input: Input): Input {
  const r = checkSubmit({ model, input });
  expect(r.issues).toEqual([]);
  return r.input ?? {};
}
function price(model: string, input: Input) {
  return getModel(model).price(parsed(model, input));
}
/** The inferred workflow, which must be one of the spec's listed workflows. */
function workflow(model: string, input: Input): string {
  const spec = getModel(model);
  const w = spec.workflow(parsed(model, input));
  expect(spec.workflows).toContain(w);
  return w;
}

describe('alpha-image-2 and alpha-image-2-edit: fields', () => {
  const A = 'alpha-image-2';
  const E = 'alpha-image-2-edit';
  it('accepts a minimal prompt, quality defaults to low', () => {
    expect(parsed(A, { prompt: 'a fox' })).toMatchObject({ quality: 'low' });
    expect(parsed(E, { prompt: 'a fox', image_urls: [URL1] })).toMatchObject({ quality: 'low' });
  });
  it('prompt is required, up to 4000 characters', () => {
    fails(A, {}, 'input.prompt', 'is required');
    ok(A, { prompt: 'x'.repeat(4000) });
    fails(A, { prompt: 'x'.repeat(4001) }, 'input.prompt', 'must be at most 4000 characters');
    expect(checkSubmit({ model: A, input: { prompt: 'x'.repeat(4001) } }).issues[0]?.type).toBe('content_too_long_error');
  });
  it('quality is low, medium or high', () => {
    for (const quality of ['low', 'medium', 'high']) ok(A, { prompt: 'p', quality });
    fails(A, { prompt: 'p', quality: 'ultra' }, 'input.quality', 'quality "ultra" is not one of low, medium, high');
  });
  it('size is a preset or a custom WIDTHxHEIGHT', () => {
    for (const size of ['auto', '1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '16:9', '9:16', '21:9']) ok(A, { prompt: 'p', size });
    ok(A, { prompt: 'p', size: '2048x1152', resolution: '2K' });
    fails(A, { prompt: 'p', size: '7:3' }, 'input.size', /^size "7:3" is not one of auto, 1:1, .*21:9, nor a custom WIDTHxHEIGHT/);
    fails(A, { prompt: 'p', size: '2048*1152', resolution: '2K' }, 'input.size', /nor a custom WIDTHxHEIGHT/);
  });
  it('resolution is 1K, 2K or 4K', () => {
    for (const resolution of ['1K', '2K', '4K']) ok(A, { prompt: 'p', size: '16:9', resolution });
    fails(A, { prompt: 'p', resolution: '8K' }, 'input.resolution', 'resolution "8K" is not one of 1K, 2K, 4K');
  });
  it('custom size: each side divisible by 16', () => {
    fails(A, { prompt: 'p', size: '1000x1008', resolution: '2K' }, 'input.size', 'custom size 1000x1008 has a width not divisible by 16');
    fails(A, { prompt: 'p', size: '1008x1000', resolution: '2K' }, 'input.size', 'custom size 1008x1000 has a height not divisible by 16');
  });
  it('custom size: longest edge at most 3840', () => {
    fails(A, { prompt: 'p', size: '4000x2000', resolution: '4K' }, 'input.size', 'custom size 4000x2000 has a longest edge over 3840');
    ok(A, { prompt: 'p', size: '2160x3840', resolution: '4K' });
  });
  it('custom size: aspect ratio at most 3:1', () => {
    ok(A, { prompt: 'p', size: '3072x1024', resolution: '2K' });
    fails(A, { prompt: 'p', size: '1008x3072', resolution: '2K' }, 'input.size', 'custom size 1008x3072 has an aspect ratio over 3:1');
  });
  it('custom size: 655,360 to 8,294,400 pixels', () => {
    ok(A, { prompt: 'p', size: '1024x640', resolution: '2K' });
    fails(A, { prompt: 'p', size: '640x1008', resolution: '2K' }, 'input.size', 'custom size 640x1008 has 645,120 pixels, under the minimum of 655,360');
    ok(A, { prompt: 'p', size: '3840x2160', resolution: '4K' });
    fails(A, { prompt: 'p', size: '3840x2176', resolution: '4K' }, 'input.size', 'custom size 3840x2176 has 8,355,840 pixels, over the maximum of 8,294,400');
  });
  it('rule 2: a custom size requires resolution 2K or 4K', () => {
    fails(A, { prompt: 'p', size: '2048x1152' }, 'input.resolution', 'custom size 2048x1152 requires resolution 2K or 4K (got no resolution)');
    fails(A, { prompt: 'p', size: '2048x1152', resolution: '1K' }, 'input.resolution', 'custom size 2048x1152 requires resolution 2K or 4K (got resolution 1K)');
    ok(A, { prompt: 'p', size: '2048x1152', resolution: '4K' });
  });
  it('a size constraint and a resolution rule broken together give both issues', () => {
    expect(issues(A, { prompt: 'p', size: '1000x1008' })).toEqual([
      ['input.size', 'custom size 1000x1008 has a width not divisible by 16'],
      ['input.resolution', 'custom size 1000x1008 requires resolution 2K or 4K (got no resolution)'],
    ]);
  });
  it('rule 4: a custom size with a 3840 edge must use 4K', () => {
    fails(A, { prompt: 'p', size: '3840x2160', resolution: '2K' }, 'input.resolution', 'custom size 3840x2160 has a 3840-pixel edge and must use resolution 4K (got resolution 2K)');
    fails(E, { prompt: 'p', image_urls: [URL1], size: '1280x3840' }, 'input.resolution', /1280x3840 has a 3840-pixel edge and must use resolution 4K \(got no resolution\)/);
  });
  it('image_urls: required for -edit, refused for the base model', () => {
    fails(A, { prompt: 'p', image_urls: [URL1] }, 'input.image_urls', 'is not accepted by alpha-image-2 (reference images need alpha-image-2-edit)');
    fails(E, { prompt: 'p' }, 'input.image_urls', 'is required');
    fails(E, { prompt: 'p', image_urls: [] }, 'input.image_urls', 'must have at least one image URL');
    fails(E, { prompt: 'p', image_urls: 'https://x/y.png' }, 'input.image_urls', 'must be an array of image URLs');
  });
  it('n is refused on both models', () => {
    fails(A, { prompt: 'p', n: 1 }, 'input.n', 'n is not supported: one image per request');
    fails(E, { prompt: 'p', image_urls: [URL1], n: 2 }, 'input.n', 'n is not supported: one image per request');
  });
  it('unknown fields are rejected; workflow and output count', () => {
    fails(A, { prompt: 'p', seed: 1 }, 'input.seed', 'unknown field (not accepted by this model)');
    expect(workflow(A, { prompt: 'p' })).toBe('text-to-image');
    expect(workflow(E, { prompt: 'p', image_urls: [URL1] })).toBe('edit');
    expect(getModel(A).outputCount?.({ prompt: 'p' })).toBe(1);
  });
});

describe('alpha-image-2 prices', () => {
  const table: Record<string, [number, number, number]> = { low: [2, 4, 8], medium: [3, 6, 12], high: [12, 24, 48] };
  for (const [quality, credits] of Object.entries(table)) {
    (['1K', '2K', '4K'] as const).forEach((resolution, i) => {
      it(`${quality} ${resolution} (16:9) costs ${credits[i]} on both models`, () => {
        expect(price('alpha-image-2', { prompt: 'p', quality, size: '16:9', resolution }).credits).toBe(credits[i]);
        expect(price('alpha-image-2-edit', { prompt: 'p', quality, size: '16:9', resolution, image_urls: [URL1] }).credits).toBe(credits[i]);
      });
    });
  }
  it('quality defaults to low in the price', () => {
    expect(price('alpha-image-2', { prompt: 'p', size: '1:1', resolution: '2K' })).toMatchObject({ credits: 4, basis: expect.stringContaining('low quality') });
  });
  it('rule 1: size omitted or auto is billed as 1K even with a resolution', () => {
    const omitted = price('alpha-image-2', { prompt: 'p', quality: 'high', resolution: '4K' });
    expect(omitted.credits).toBe(12);
    expect(omitted.basis).toMatch(/rule 1: size omitted.*1K although resolution 4K/);
    const auto = price('alpha-image-2', { prompt: 'p', quality: 'medium', size: 'auto', resolution: '2K' });
    expect(auto).toMatchObject({ credits: 3, basis: expect.stringContaining('rule 1: size auto') });
  });
  it('rule 3: 4K is billed as 4K only for 16:9, 9:16, 21:9 or a 3840 custom edge', () => {
    for (const size of ['16:9', '9:16', '21:9']) {
      expect(price('alpha-image-2', { prompt: 'p', quality: 'high', size, resolution: '4K' })).toMatchObject({ credits: 48, basis: expect.stringContaining('rule 3') });
    }
    expect(price('alpha-image-2', { prompt: 'p', quality: 'high', size: '3840x2160', resolution: '4K' })).toMatchObject({ credits: 48, basis: expect.stringContaining('rule 3: custom size 3840x2160 has a 3840-pixel edge') });
    for (const size of ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4']) {
      expect(price('alpha-image-2', { prompt: 'p', quality: 'high', size, resolution: '4K' })).toMatchObject({ credits: 24, basis: expect.stringContaining('billed as 2K') });
    }
    expect(price('alpha-image-2', { prompt: 'p', quality: 'low', size: '2048x2048', resolution: '4K' })).toMatchObject({ credits: 4, basis: expect.stringContaining('4K billed as 2K') });
  });
  it('rules 2 and 4 priced: custom 2K and custom 3840 at 4K', () => {
    expect(price('alpha-image-2', { prompt: 'p', quality: 'medium', size: '2048x1152', resolution: '2K' }).credits).toBe(6);
    expect(price('alpha-image-2', { prompt: 'p', quality: 'medium', size: '1280x3840', resolution: '4K' }).credits).toBe(12);
  });
  it('a preset size without resolution is billed as 1K', () => {
    expect(price('alpha-image-2', { prompt: 'p', quality: 'medium', size: '16:9' })).toMatchObject({ credits: 3, basis: expect.stringContaining('no resolution given') });
  });
});

describe('dream-4 and dream-4-edit', () => {
  const D = 'dream-4';
  const E = 'dream-4-edit';
  it('resolution defaults to 2K; size and resolution enums', () => {
    expect(parsed(D, { prompt: 'p' })).toMatchObject({ resolution: '2K' });
    for (const size of ['1:1', '3:4', '4:3', '16:9', '9:16', '3:2', '2:3', '21:9']) ok(D, { prompt: 'p', size });
    fails(D, { prompt: 'p', size: '5:4' }, 'input.size', /^size "5:4" is not one of 1:1, 3:4/);
    for (const resolution of ['1K', '2K', '4K']) ok(D, { prompt: 'p', resolution });
    fails(D, { prompt: 'p', resolution: '3K' }, 'input.resolution', 'resolution "3K" is not one of 1K, 2K, 4K');
  });
  it('n is an integer 1 to 15', () => {
    ok(D, { prompt: 'p', n: 1 });
    ok(D, { prompt: 'p', n: 15 });
    fails(D, { prompt: 'p', n: 0 }, 'input.n', 'must be at least 1');
    fails(D, { prompt: 'p', n: 16 }, 'input.n', 'must be at most 15');
    fails(D, { prompt: 'p', n: 2.5 }, 'input.n', 'must be an integer');
  });
  it('image_urls count plus n must not exceed 15', () => {
    ok(D, { prompt: 'p', image_urls: urls(10), n: 5 });
    fails(D, { prompt: 'p', image_urls: urls(2), n: 16 }, 'input.n', 'must be at most 15');
    fails(D, { prompt: 'p', image_urls: urls(10), n: 6 }, 'input.image_urls', 'image_urls count (10) plus n (6) is 16, over the limit of 15');
    ok(E, { prompt: 'p', image_urls: urls(14) });
    fails(E, { prompt: 'p', image_urls: urls(15) }, 'input.image_urls', 'image_urls count (15) plus n (omitted, so 1) is 16, over the limit of 15');
  });
  it('image_urls required for the edit model, optional for dream-4', () => {
    fails(E, { prompt: 'p' }, 'input.image_urls', 'is required');
    fails(E, { prompt: 'p', image_urls: [] }, 'input.image_urls', 'must have at least one image URL');
    expect(workflow(D, { prompt: 'p' })).toBe('text-to-image');
    expect(workflow(D, { prompt: 'p', image_urls: [URL1] })).toBe('image-to-image');
    expect(workflow(E, { prompt: 'p', image_urls: [URL1] })).toBe('edit');
  });
  it('prompt required, unknown fields rejected', () => {
    fails(D, { size: '1:1' }, 'input.prompt', 'is required');
    fails(D, { prompt: 'p', seed: 3 }, 'input.seed', 'unknown field (not accepted by this model)');
  });
  it('output count is n; no price, per image', () => {
    const input = parsed(D, { prompt: 'p', n: 3 });
    expect(getModel(D).outputCount?.(input)).toBe(3);
    expect(getModel(D).price(input)).toEqual({ credits: null, basis: expect.stringContaining('multiply by 3') });
    expect(getModel(D).outputCount?.(parsed(D, { prompt: 'p' }))).toBe(1);
  });
});

describe('dream-5.0-lite and dream-5.0-lite-edit', () => {
  const L = 'dream-5.0-lite';
  const E = 'dream-5.0-lite-edit';
  it('prompt up to 2000 characters', () => {
    ok(L, { prompt: 'x'.repeat(2000) });
    fails(L, { prompt: 'x'.repeat(2001) }, 'input.prompt', 'must be at most 2000 characters');
    fails(L, {}, 'input.prompt', 'is required');
  });
  it('n is 1 to 15', () => {
    ok(L, { prompt: 'p', n: 15 });
    fails(L, { prompt: 'p', n: 16 }, 'input.n', 'must be at most 15');
    fails(L, { prompt: 'p', n: 0 }, 'input.n', 'must be at least 1');
  });
  it('image_urls 1 to 10; required for the edit model', () => {
    ok(L, { prompt: 'p', image_urls: urls(10) });
    fails(L, { prompt: 'p', image_urls: urls(11) }, 'input.image_urls', 'must have at most 10 image URLs');
    fails(L, { prompt: 'p', image_urls: [] }, 'input.image_urls', 'must have at least one image URL');
    ok(E, { prompt: 'p', image_urls: [URL1] });
    fails(E, { prompt: 'p' }, 'input.image_urls', 'is required');
    fails(E, { prompt: 'p', image_urls: urls(11) }, 'input.image_urls', 'must have at most 10 image URLs');
    expect(workflow(L, { prompt: 'p', image_urls: [URL1] })).toBe('image-to-image');
    expect(workflow(L, { prompt: 'p' })).toBe('text-to-image');
    expect(workflow(E, { prompt: 'p', image_urls: [URL1] })).toBe('edit');
  });
  it('edit references must be JPEG or PNG when the name shows a format', () => {
    ok(E, { prompt: 'p', image_urls: ['https://x.example/a.JPG?sig=1', 'https://x.example/b.png', 'https://x.example/render', 'photos/c.jpeg'] });
    fails(E, { prompt: 'p', image_urls: [URL1, 'https://x.example/b.webp'] }, 'input.image_urls[1]', 'is a WebP image by its name; this model takes JPEG or PNG only');
    fails(E, { prompt: 'p', image_urls: ['data:image/gif;base64,R0lGOD'] }, 'input.image_urls[0]', 'is a GIF image by its name; this model takes JPEG or PNG only');
    ok(L, { prompt: 'p', image_urls: ['https://x.example/b.webp'] });
  });
  it('size: resolution presets, ratio presets, custom string, object (both models)', () => {
    for (const size of ['1K', '2K', '3K', '4K', '1:1', '4:3', '3:4', '16:9', '9:16', '3:2', '2:3', '21:9', '2048x1536']) ok(L, { prompt: 'p', size });
    ok(L, { prompt: 'p', size: { width: 2048, height: 1536 } });
    ok(E, { prompt: 'p', image_urls: [URL1], size: { width: 1024, height: 1024 } });
  });
  it('size: bad forms name the rule', () => {
    fails(L, { prompt: 'p', size: '5K' }, 'input.size', /^size "5K" is not a resolution preset \(1K, 2K, 3K, 4K\), a ratio preset/);
    fails(L, { prompt: 'p', size: '2048*1536' }, 'input.size', /custom <W>x<H>/);
    fails(L, { prompt: 'p', size: { width: 1.5, height: 2 } }, 'input.size', 'width must be an integer');
    fails(L, { prompt: 'p', size: { width: 2 } }, 'input.size', 'height is required');
    fails(L, { prompt: 'p', size: { width: 0, height: 2 } }, 'input.size.width', 'must be at least 1');
    fails(L, { prompt: 'p', size: 42 }, 'input.size', 'must be a preset string, a custom <W>x<H> string, or an object {width, height}');
    expect(issues(L, { prompt: 'p', size: { width: 1, height: 1, depth: 1 } }).map((i) => i[0])).toEqual(['input.size.depth']);
  });
  it('output count is n', () => {
    expect(getModel(L).outputCount?.(parsed(L, { prompt: 'p', n: 4 }))).toBe(4);
  });
});

describe('kontext models', () => {
  for (const base of ['kontext-pro', 'kontext-max']) {
    const edit = `${base}-edit`;
    it(`${base}: sizes, output_format, no image_urls`, () => {
      for (const size of ['1:1', '4:3', '3:4', '16:9', '9:16', '21:9', '9:21']) ok(base, { prompt: 'p', size });
      fails(base, { prompt: 'p', size: '2:3' }, 'input.size', /^size "2:3" is not one of 1:1, 4:3, 3:4, 16:9, 9:16, 21:9, 9:21$/);
      ok(base, { prompt: 'p', output_format: 'png' });
      ok(base, { prompt: 'p', output_format: 'jpg' });
      fails(base, { prompt: 'p', output_format: 'jpeg' }, 'input.output_format', 'output_format "jpeg" is not one of png, jpg');
      fails(base, { prompt: 'p', image_urls: [URL1] }, 'input.image_urls', `is not accepted by ${base} (reference images need ${edit})`);
      fails(base, { prompt: 'p', seed: 1 }, 'input.seed', 'unknown field (not accepted by this model)');
      expect(workflow(base, { prompt: 'p' })).toBe('text-to-image');
    });
    it(`${edit}: image_urls required, only the first used`, () => {
      fails(edit, { prompt: 'p' }, 'input.image_urls', 'is required');
      ok(edit, { prompt: 'p', image_urls: [URL1], size: '9:21', output_format: 'jpg' });
      ok(edit, { prompt: 'p', image_urls: urls(3) });
      expect(workflow(edit, { prompt: 'p', image_urls: [URL1] })).toBe('edit');
    });
  }
});

describe('imagine-image', () => {
  const I = 'imagine-image';
  it('size is optional, from five ratios', () => {
    ok(I, { prompt: 'p' });
    for (const size of ['2:3', '3:2', '1:1', '9:16', '16:9']) ok(I, { prompt: 'p', size });
    fails(I, { prompt: 'p', size: '4:3' }, 'input.size', /^size "4:3" is not one of 2:3, 3:2, 1:1, 9:16, 16:9$/);
  });
  it('image_urls with exactly one URL means image-to-image', () => {
    expect(workflow(I, { prompt: 'p' })).toBe('text-to-image');
    expect(workflow(I, { prompt: 'p', image_urls: [URL1] })).toBe('image-to-image');
    fails(I, { prompt: 'p', image_urls: urls(2) }, 'input.image_urls', 'must have at most 1 image URL');
    fails(I, { prompt: 'p', image_urls: [] }, 'input.image_urls', 'must have at least one image URL');
    ok(I, { prompt: 'p', image_urls: ['https://x.example/a.webp'] });
    fails(I, { prompt: 'p', image_urls: ['https://x.example/a.gif'] }, 'input.image_urls[0]', 'is a GIF image by its name; this model takes JPEG, PNG or WebP only');
  });
});

describe('other image models (fields not shown)', () => {
  const TEXT = ['frame-2-pro', 'frame-2-flex', 'zed-image'];
  const BOTH = ['alpha-image-4o', 'alpha-image-1.5', 'fast-image', 'fast-image-2', 'fast-image-2-new', 'dream-4.5'];
  const EDIT = ['frame-2-pro-edit', 'frame-2-flex-edit', 'alpha-image-4o-edit', 'alpha-image-1.5-edit', 'fast-image-edit', 'fast-image-2-edit', 'fast-image-2-new-edit', 'dream-4.5-edit'];
  it('every id requires a prompt and passes other fields through', () => {
    for (const id of [...TEXT, ...BOTH, ...EDIT]) {
      const refs = EDIT.includes(id) ? { image_urls: [URL1] } : {};
      fails(id, { ...refs }, 'input.prompt', 'is required');
      expect(parsed(id, { prompt: 'p', size: '1:1', style: 'x', ...refs })).toMatchObject({ style: 'x' });
    }
  });
  it('text-to-image models refuse image_urls', () => {
    for (const id of TEXT) {
      fails(id, { prompt: 'p', image_urls: [URL1] }, 'input.image_urls', `is not accepted by ${id}, a text-to-image model`);
      expect(workflow(id, { prompt: 'p' })).toBe('text-to-image');
    }
  });
  it('text-and-image models infer the workflow from image_urls', () => {
    for (const id of BOTH) {
      expect(workflow(id, { prompt: 'p' })).toBe('text-to-image');
      expect(workflow(id, { prompt: 'p', image_urls: [URL1] })).toBe('image-to-image');
    }
  });
  it('edit models require image_urls', () => {
    for (const id of EDIT) {
      fails(id, { prompt: 'p' }, 'input.image_urls', 'is required');
      expect(workflow(id, { prompt: 'p', image_urls: [URL1] })).toBe('edit');
    }
  });
  it('reference limits: 8 (frame-2 edits), 14 (fast-image-2-new and its edit), 10 (dream-4.5-edit)', () => {
    const limits: Record<string, number> = { 'frame-2-pro-edit': 8, 'frame-2-flex-edit': 8, 'fast-image-2-new': 14, 'fast-image-2-new-edit': 14, 'dream-4.5-edit': 10 };
    for (const [id, max] of Object.entries(limits)) {
      ok(id, { prompt: 'p', image_urls: urls(max) });
      fails(id, { prompt: 'p', image_urls: urls(max + 1) }, 'input.image_urls', `must have at most ${max} image URLs`);
    }
    ok('fast-image-2', { prompt: 'p', image_urls: urls(20) });
  });
  it('alpha-image-4o quick start (prompt, size, n) is accepted; n counts images', () => {
    const input = parsed('alpha-image-4o', { prompt: 'p', size: '1:1', n: 1 });
    expect(getModel('alpha-image-4o').outputCount?.(input)).toBe(1);
    expect(getModel('alpha-image-4o').outputCount?.(parsed('alpha-image-4o', { prompt: 'p', n: 2 }))).toBe(2);
    fails('alpha-image-4o', { prompt: 'p', n: 0 }, 'input.n', 'must be at least 1');
  });
});

describe('image catalogue as a whole', () => {
  const mine = listModels().filter((s) => s.kind === 'image');
  it('lists every required id', () => {
    const ids = new Set(mine.map((s) => s.id));
    for (const id of [
      'vendora/dream-v5.0-flash/text-to-image', 'vendora/dream-v5.0-flash/edit', 'alpha-image-2', 'alpha-image-2-edit', 'dream-4', 'dream-4-edit',
      'dream-5.0-lite', 'dream-5.0-lite-edit', 'kontext-pro', 'kontext-pro-edit', 'kontext-max', 'kontext-max-edit', 'imagine-image',
      'frame-2-pro', 'frame-2-flex', 'frame-2-pro-edit', 'frame-2-flex-edit', 'alpha-image-4o', 'alpha-image-4o-edit', 'alpha-image-1.5',
      'alpha-image-1.5-edit', 'fast-image', 'fast-image-2', 'fast-image-2-new', 'fast-image-edit', 'fast-image-2-edit', 'fast-image-2-new-edit',
      'dream-4.5', 'dream-4.5-edit', 'zed-image',
    ]) expect(ids.has(id), id).toBe(true);
  });
  it('shared settings: 15-60 s, status endpoint, a JSON Schema', () => {
    for (const spec of mine) {
      expect(spec.typicalSeconds, spec.id).toEqual([15, 60]);
      expect(spec.resultEndpoint, spec.id).toBe('status');
      expect(() => z.toJSONSchema(spec.input, { io: 'input', unrepresentable: 'any' }), spec.id).not.toThrow();
    }
  });
  it('only alpha-image-2 has prices; the rest are unknown (never 0), with a sandbox price', () => {
    for (const spec of mine) {
      const input: Input = { prompt: 'p', image_urls: [URL1], n: 2 };
      if (spec.family === 'alpha-image-2') continue;
      const quote = spec.price(input);
      expect(quote.credits, spec.id).toBeNull();
      expect(quote.basis, spec.id).toMatch(/service gives no (price|number)/);
      expect(spec.sandboxCredits, spec.id).toBeGreaterThan(0);
    }
  });
  it('a per-image price multiplies by the output count', () => {
    const spec = getModel('dream-4');
    expect(perImageTotal(5, spec.outputCount?.({ prompt: 'p', n: 3 }) ?? 1)).toBe(15);
  });
});
