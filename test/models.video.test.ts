import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { checkSubmit, getModel } from '../src/models/index.js';

const IMG = 'https://example.com/a.png';
const IMG2 = 'https://example.com/b.png';
const VID = 'https://example.com/source.mp4';

/** A valid input: no issues; returns the input after defaults. */
function ok(model: string, input: Record<string, unknown>): Record<string, unknown> {
  const r = checkSubmit({ model, input });
  expect(r.issues).toEqual([]);
  expect(r.input).not.toBeNull();
  return r.input as Record<string, unknown>;
}

/** An invalid input: among its issues, one at `path` whose message matches. */
function bad(model: string, input: Record<string, unknown>, path: string, message: RegExp): void {
  const r = checkSubmit({ model, input });
  expect(r.input).toBeNull();
  expect(r.issues).toContainEqual(expect.objectContaining({ path, message: expect.stringMatching(message) }));
}

function price(model: string, input: Record<string, unknown>) {
  return getModel(model).price(ok(model, input));
}

/** The inferred workflow, which must be one of the spec's listed workflows. */
function workflow(model: string, input: Record<string, unknown>): string {
  const spec = getModel(model);
  const w = spec.workflow(ok(model, input));
  expect(spec.workflows).toContain(w);
  return w;
}

const VIDEO_IDS = [
  'vidmodel2.5-text-to-video',
  'clip-2.3',
  'clip-02',
  'clip-02-pro',
  'clipgen-2',
  'videoh',
  'motion-1.6/standard',
  'motion-1.6/pro',
  'imagine-video-1.5',
  'imagine-video',
];

describe('video catalogue', () => {
  it('lists every video model with video timing, the status endpoint and a JSON Schema', () => {
    for (const id of VIDEO_IDS) {
      const spec = getModel(id);
      expect(spec.kind).toBe('video');
      expect(spec.typicalSeconds).toEqual([90, 300]);
      expect(spec.resultEndpoint).toBe('status');
      expect(() => z.toJSONSchema(spec.input)).not.toThrow();
    }
  });
  it('gives no price where the service gives none, and a sandbox-only price instead', () => {
    for (const id of ['vidmodel2.5-text-to-video', 'clip-2.3', 'clip-02', 'clip-02-pro', 'clipgen-2', 'videoh', 'imagine-video']) {
      const spec = getModel(id);
      const input = id === 'videoh' ? { prompt: 'p', resolution: '1080p' } : { prompt: 'p' };
      const quote = spec.price(input);
      expect(quote.credits).toBeNull();
      expect(quote.basis).toMatch(/service gives no price/);
      expect(spec.sandboxCredits).toBeGreaterThan(0);
    }
  });
  it('writes down a choice wherever the service is silent', () => {
    for (const id of VIDEO_IDS) expect(getModel(id).choices?.length ?? 0).toBeGreaterThan(0);
  });
});

describe('vidmodel2.5-text-to-video', () => {
  const M = 'vidmodel2.5-text-to-video';
  it('accepts every documented field', () => {
    ok(M, { prompt: 'a boat', aspect_ratio: '1920*1080', duration: 10, seed: 7, negative_prompt: 'blur', audio: 'https://example.com/a.mp3' });
    expect(workflow(M, { prompt: 'p' })).toBe('text-to-video');
  });
  it('requires a prompt (chosen) and fills in no defaults', () => {
    bad(M, { duration: 5 }, 'input.prompt', /is required/);
    expect(ok(M, { prompt: 'p' })).toEqual({ prompt: 'p' });
  });
  it('checks aspect_ratio, duration and seed', () => {
    for (const ar of ['832*480', '480*832', '1280*720', '720*1280', '1920*1080', '1080*1920']) ok(M, { prompt: 'p', aspect_ratio: ar });
    bad(M, { prompt: 'p', aspect_ratio: '16:9' }, 'input.aspect_ratio', /not one of 832\*480/);
    ok(M, { prompt: 'p', duration: 5 });
    bad(M, { prompt: 'p', duration: 6 }, 'input.duration', /not one of 5, 10/);
    bad(M, { prompt: 'p', seed: 1.5 }, 'input.seed', /integer/);
    bad(M, { prompt: 'p', negative_prompt: 3 }, 'input.negative_prompt', /string/);
  });
  it('rejects a boolean audio with a clear message', () => {
    ok(M, { prompt: 'p', audio: 'true' });
    bad(M, { prompt: 'p', audio: true }, 'input.audio', /must be a string, never a boolean/);
    bad(M, { prompt: 'p', audio: false }, 'input.audio', /never a boolean/);
  });
  it('rejects unknown fields', () => {
    bad(M, { prompt: 'p', resolution: '720p' }, 'input.resolution', /unknown field/);
  });
});

describe('clip-2.3', () => {
  const M = 'clip-2.3';
  it('fills defaults 6 s and 768p, and infers the workflow from start_image_url', () => {
    expect(ok(M, { prompt: 'p' })).toMatchObject({ duration: 6, resolution: '768p' });
    expect(workflow(M, { prompt: 'p' })).toBe('text-to-video');
    expect(workflow(M, { prompt: 'p', start_image_url: IMG, prompt_optimizer: true })).toBe('image-to-video');
    expect(getModel(M).imageFields).toEqual(['start_image_url']);
  });
  it('requires a prompt', () => {
    bad(M, {}, 'input.prompt', /is required/);
    bad(M, { prompt: ' ' }, 'input.prompt', /non-whitespace/);
  });
  it('checks duration, resolution and prompt_optimizer', () => {
    ok(M, { prompt: 'p', duration: 10, resolution: '768p' });
    bad(M, { prompt: 'p', duration: 5 }, 'input.duration', /not one of 6, 10/);
    bad(M, { prompt: 'p', resolution: '720p' }, 'input.resolution', /not one of 768p, 1080p/);
    bad(M, { prompt: 'p', prompt_optimizer: 'yes' }, 'input.prompt_optimizer', /boolean/);
  });
  it('allows 1080p only with duration 6', () => {
    ok(M, { prompt: 'p', resolution: '1080p' });
    ok(M, { prompt: 'p', resolution: '1080p', duration: 6 });
    bad(M, { prompt: 'p', resolution: '1080p', duration: 10 }, 'input.duration', /1080p supports only duration 6/);
  });
  it('rejects end_image_url with a clear message', () => {
    bad(M, { prompt: 'p', start_image_url: IMG, end_image_url: IMG2 }, 'input.end_image_url', /not supported by clip-2.3/);
  });
});

describe('clip-02 and clip-02-pro (parameter names chosen)', () => {
  it('clip-02 requires a prompt and checks duration and resolution when present', () => {
    const M = 'clip-02';
    ok(M, { prompt: 'p' });
    ok(M, { prompt: 'p', duration: 10, resolution: '512P', some_future_field: 1 });
    ok(M, { prompt: 'p', resolution: '768P', duration: 6 });
    bad(M, { duration: 6 }, 'input.prompt', /is required/);
    bad(M, { prompt: 'p', duration: 8 }, 'input.duration', /not one of 6, 10/);
    bad(M, { prompt: 'p', resolution: '1080P' }, 'input.resolution', /not one of 768P, 512P/);
  });
  it('clip-02 end frame needs a first frame', () => {
    const M = 'clip-02';
    expect(workflow(M, { prompt: 'p', start_image_url: IMG, end_image_url: IMG2, prompt_optimizer: false })).toBe('image-to-video');
    bad(M, { prompt: 'p', end_image_url: IMG2 }, 'input.end_image_url', /requires start_image_url/);
    bad(M, { prompt: 'p', prompt_optimizer: 1 }, 'input.prompt_optimizer', /boolean/);
  });
  it('clip-02-pro takes 1080P and 6 s only', () => {
    const M = 'clip-02-pro';
    ok(M, { prompt: 'p' });
    ok(M, { prompt: 'p', duration: 6, resolution: '1080P' });
    bad(M, { prompt: 'p', duration: 10 }, 'input.duration', /not one of 6$/);
    bad(M, { prompt: 'p', resolution: '768P' }, 'input.resolution', /not one of 1080P/);
    bad(M, {}, 'input.prompt', /is required/);
  });
});

describe('clipgen-2', () => {
  const M = 'clipgen-2';
  it('takes prompt, integer duration and a ratio string', () => {
    ok(M, { prompt: 'p', duration: 5, aspect_ratio: '16:9' });
    bad(M, { duration: 5 }, 'input.prompt', /is required/);
    bad(M, { prompt: 'p', duration: 5.5 }, 'input.duration', /integer/);
    bad(M, { prompt: 'p', duration: 0 }, 'input.duration', /at least 1/);
    bad(M, { prompt: 'p', aspect_ratio: 16 }, 'input.aspect_ratio', /string/);
    bad(M, { prompt: 'p', aspect_ratio: 'wide' }, 'input.aspect_ratio', /W:H/);
  });
});

describe('videoh', () => {
  const M = 'videoh';
  it('infers the workflow from the fields present', () => {
    expect(workflow(M, { prompt: 'p' })).toBe('text-to-video');
    expect(workflow(M, { image_urls: [IMG] })).toBe('image-to-video');
    expect(workflow(M, { prompt: 'character1 waves', reference_image_urls: [IMG, IMG2] })).toBe('reference-to-video');
    expect(workflow(M, { prompt: 'p', video_url: VID })).toBe('video-edit');
    expect(workflow(M, { prompt: '@Image1 replaces the car', video_url: VID, reference_image_urls: [IMG] })).toBe('video-edit');
  });
  it('requires a prompt except for image-to-video', () => {
    ok(M, { image_urls: [IMG], duration: 5 });
    bad(M, {}, 'input.prompt', /is required for text-to-video/);
    bad(M, { reference_image_urls: [IMG] }, 'input.prompt', /is required for reference-to-video/);
    bad(M, { video_url: VID }, 'input.prompt', /is required for video-edit/);
  });
  it('image_urls: a single URL, image-to-video only, not with reference_image_urls', () => {
    bad(M, { image_urls: [IMG, IMG2] }, 'input.image_urls', /exactly one/);
    bad(M, { image_urls: [] }, 'input.image_urls', /exactly one/);
    bad(M, { prompt: 'p', image_urls: [IMG], reference_image_urls: [IMG2] }, 'input.image_urls', /cannot be combined with reference_image_urls/);
    bad(M, { prompt: 'p', image_urls: [IMG], video_url: VID }, 'input.image_urls', /image-to-video only/);
  });
  it('reference_image_urls: 1 to 9 for reference, up to 5 for video-edit', () => {
    const nine = Array.from({ length: 9 }, (_, k) => `https://example.com/${k}.png`);
    ok(M, { prompt: 'p', reference_image_urls: nine });
    bad(M, { prompt: 'p', reference_image_urls: [...nine, IMG] }, 'input.reference_image_urls', /at most 9/);
    bad(M, { prompt: 'p', reference_image_urls: [] }, 'input.reference_image_urls', /at least 1/);
    ok(M, { prompt: 'p', video_url: VID, reference_image_urls: nine.slice(0, 5) });
    bad(M, { prompt: 'p', video_url: VID, reference_image_urls: nine.slice(0, 6) }, 'input.reference_image_urls', /at most 5 images for video-edit/);
  });
  it('video_url is a remote URL only: a local path is rejected', () => {
    expect(getModel(M).urlOnlyFields).toEqual(['video_url']);
    expect(getModel(M).imageFields).toEqual(['image_urls[]', 'reference_image_urls[]']);
    bad(M, { prompt: 'p', video_url: './clips/source.mp4' }, 'input.video_url', /http\(s\) URL/);
  });
  it('aspect_ratio only for text and reference workflows', () => {
    ok(M, { prompt: 'p', aspect_ratio: '9:16' });
    ok(M, { prompt: 'p', reference_image_urls: [IMG], aspect_ratio: '1:1' });
    bad(M, { prompt: 'p', aspect_ratio: '21:9' }, 'input.aspect_ratio', /not one of 16:9, 9:16, 1:1, 4:3, 3:4/);
    bad(M, { image_urls: [IMG], aspect_ratio: '16:9' }, 'input.aspect_ratio', /not image-to-video/);
    bad(M, { prompt: 'p', video_url: VID, aspect_ratio: '16:9' }, 'input.aspect_ratio', /not video-edit/);
  });
  it('resolution 720p or 1080p, default 1080p', () => {
    expect(ok(M, { prompt: 'p' }).resolution).toBe('1080p');
    ok(M, { prompt: 'p', resolution: '720p' });
    bad(M, { prompt: 'p', resolution: '480p' }, 'input.resolution', /not one of 720p, 1080p/);
  });
  it('duration 3 to 15 for text, image and reference workflows; any whole number for video-edit, which ignores it', () => {
    ok(M, { prompt: 'p', duration: 3 });
    ok(M, { prompt: 'p', duration: 15 });
    bad(M, { prompt: 'p', duration: 2 }, 'input.duration', /at least 3/);
    bad(M, { prompt: 'p', duration: 16 }, 'input.duration', /at most 15/);
    bad(M, { image_urls: [IMG], duration: 30 }, 'input.duration', /at most 15/);
    bad(M, { prompt: 'p', reference_image_urls: [IMG], duration: 1 }, 'input.duration', /at least 3/);
    bad(M, { prompt: 'p', duration: 5.5 }, 'input.duration', /integer/);
    ok(M, { prompt: 'p', video_url: VID, duration: 10 });
    expect(ok(M, { prompt: 'p', video_url: VID, duration: 30 }).duration).toBe(30);
    ok(M, { prompt: 'p', video_url: VID, duration: 1 });
    expect(getModel(M).price({ prompt: 'p', video_url: VID, duration: 30 }).credits).toBeNull();
  });
  it('audio_setting only for video-edit: auto or origin', () => {
    ok(M, { prompt: 'p', video_url: VID, audio_setting: 'origin' });
    ok(M, { prompt: 'p', video_url: VID, audio_setting: 'auto' });
    bad(M, { prompt: 'p', video_url: VID, audio_setting: 'mute' }, 'input.audio_setting', /not one of auto, origin/);
    bad(M, { prompt: 'p', audio_setting: 'auto' }, 'input.audio_setting', /video-edit only/);
  });
  it('seed 0 to 2147483647 and a boolean enable_safety_checker', () => {
    ok(M, { prompt: 'p', seed: 0, enable_safety_checker: false });
    ok(M, { prompt: 'p', seed: 2147483647 });
    bad(M, { prompt: 'p', seed: 2147483648 }, 'input.seed', /at most 2147483647/);
    bad(M, { prompt: 'p', seed: -1 }, 'input.seed', /at least 0/);
    bad(M, { prompt: 'p', enable_safety_checker: 'no' }, 'input.enable_safety_checker', /boolean/);
    bad(M, { prompt: 'p', mode: 'edit' }, 'input.mode', /unknown field/);
  });
});

describe('motion-1.6', () => {
  const S = 'motion-1.6/standard';
  const P = 'motion-1.6/pro';
  it('requires prompt and duration (whole seconds 1 to 60: values not shown, cap chosen)', () => {
    for (const M of [S, P]) {
      for (const duration of [1, 5, 7, 10, 60]) ok(M, { prompt: 'p', duration });
      bad(M, { duration: 5 }, 'input.prompt', /is required/);
      bad(M, { prompt: 'p' }, 'input.duration', /is required/);
      bad(M, { prompt: 'p', duration: 0 }, 'input.duration', /at least 1 second/);
      bad(M, { prompt: 'p', duration: 61 }, 'input.duration', /at most 60 seconds/);
      bad(M, { prompt: 'p', duration: 7.5 }, 'input.duration', /whole number/);
      bad(M, { prompt: 'p', duration: '5' }, 'input.duration', /must be a number/);
    }
  });
  it('infers text-to-video, image-to-video and elements', () => {
    for (const M of [S, P]) {
      expect(workflow(M, { prompt: 'p', duration: 5, aspect_ratio: '16:9', negative_prompt: 'n', cfg_scale: 0.5 })).toBe('text-to-video');
      expect(workflow(M, { prompt: 'p', duration: 5, start_image_url: IMG, cfg_scale: 0.5 })).toBe('image-to-video');
      expect(workflow(M, { prompt: 'p', duration: 5, aspect_ratio: '1:1', image_urls: [IMG, IMG2] })).toBe('elements');
    }
    expect(workflow(P, { prompt: 'p', duration: 5, aspect_ratio: '9:16', start_image_url: IMG, end_image_url: IMG2 })).toBe('image-to-video');
  });
  it('rejects inputs a workflow does not support', () => {
    bad(S, { prompt: 'p', duration: 5, start_image_url: IMG, aspect_ratio: '16:9' }, 'input.aspect_ratio', /not supported for standard image-to-video/);
    bad(P, { prompt: 'p', duration: 5, image_urls: [IMG], negative_prompt: 'n', aspect_ratio: '16:9', seed: 1 }, 'input.seed', /unknown field/);
    bad(S, { prompt: 'p', duration: 5, aspect_ratio: 16 }, 'input.aspect_ratio', /string/);
  });
  it('image_urls: 1 to 4, not with start_image_url, end_image_url or cfg_scale', () => {
    ok(S, { prompt: 'p', duration: 10, image_urls: [IMG, IMG, IMG, IMG] });
    bad(S, { prompt: 'p', duration: 10, image_urls: [IMG, IMG, IMG, IMG, IMG] }, 'input.image_urls', /at most 4/);
    bad(S, { prompt: 'p', duration: 10, image_urls: [] }, 'input.image_urls', /at least 1/);
    bad(P, { prompt: 'p', duration: 5, image_urls: [IMG], start_image_url: IMG2 }, 'input.start_image_url', /cannot be used with image_urls/);
    bad(P, { prompt: 'p', duration: 5, image_urls: [IMG], end_image_url: IMG2 }, 'input.end_image_url', /cannot be used with image_urls/);
    bad(S, { prompt: 'p', duration: 5, image_urls: [IMG], cfg_scale: 0.5 }, 'input.cfg_scale', /cannot be used with image_urls/);
  });
  it('end_image_url needs start_image_url and the pro model', () => {
    bad(P, { prompt: 'p', duration: 5, end_image_url: IMG2 }, 'input.end_image_url', /requires start_image_url/);
    bad(S, { prompt: 'p', duration: 5, start_image_url: IMG, end_image_url: IMG2 }, 'input.end_image_url', /only by motion-1.6\/pro/);
  });
  it('prices 9 (standard) and 15 (pro) credits per second', () => {
    expect(price(S, { prompt: 'p', duration: 5 }).credits).toBe(45);
    expect(price(S, { prompt: 'p', duration: 10, image_urls: [IMG] }).credits).toBe(90);
    expect(price(P, { prompt: 'p', duration: 5, start_image_url: IMG }).credits).toBe(75);
    expect(price(P, { prompt: 'p', duration: 10 })).toEqual({ credits: 150, basis: 'pro: 15 credits per second x 10 s' });
    expect(price(S, { prompt: 'p', duration: 7 }).credits).toBe(63);
    expect(price(P, { prompt: 'p', duration: 60 }).credits).toBe(900);
  });
});

describe('imagine-video-1.5 (the Grok-style video 1.5 model; id chosen)', () => {
  const M = 'imagine-video-1.5';
  it('infers text, image and reference modes', () => {
    expect(workflow(M, { prompt: 'p' })).toBe('text-to-video');
    expect(workflow(M, { prompt: 'p', image_urls: [IMG] })).toBe('image-to-video');
    expect(workflow(M, { prompt: '@1 and @2 dance', reference_image_urls: [IMG, IMG2] })).toBe('reference-to-video');
  });
  it('prompt required, up to 4096 characters', () => {
    ok(M, { prompt: 'x'.repeat(4096) });
    const r = checkSubmit({ model: M, input: { prompt: 'x'.repeat(4097) } });
    expect(r.issues[0]).toMatchObject({ path: 'input.prompt', type: 'content_too_long_error', message: 'must be at most 4096 characters' });
    const missing = checkSubmit({ model: M, input: {} });
    expect(missing.issues).toEqual([{ path: 'input.prompt', message: 'is required', type: 'validation_error' }]);
    bad(M, { prompt: 3 }, 'input.prompt', /^must be a string$/);
  });
  it('duration 1 to 15', () => {
    ok(M, { prompt: 'p', duration: 1 });
    ok(M, { prompt: 'p', duration: 15 });
    bad(M, { prompt: 'p', duration: 0 }, 'input.duration', /at least 1/);
    bad(M, { prompt: 'p', duration: 16 }, 'input.duration', /at most 15/);
  });
  it('resolution 480p/720p/1080p, default 720p; reference mode 480p or 720p only', () => {
    expect(ok(M, { prompt: 'p' }).resolution).toBe('720p');
    ok(M, { prompt: 'p', image_urls: [IMG], resolution: '1080p' });
    ok(M, { prompt: 'p', reference_image_urls: [IMG], resolution: '480p' });
    bad(M, { prompt: 'p', resolution: '4k' }, 'input.resolution', /not one of 480p, 720p, 1080p/);
    bad(M, { prompt: 'p', reference_image_urls: [IMG], resolution: '1080p' }, 'input.resolution', /480p and 720p only/);
  });
  it('aspect_ratio for text and reference modes, rejected for image-to-video', () => {
    for (const ar of ['16:9', '4:3', '3:2', '1:1', '2:3', '3:4', '9:16']) ok(M, { prompt: 'p', aspect_ratio: ar });
    ok(M, { prompt: 'p', reference_image_urls: [IMG], aspect_ratio: '1:1' });
    bad(M, { prompt: 'p', aspect_ratio: '21:9' }, 'input.aspect_ratio', /not one of 16:9/);
    bad(M, { prompt: 'p', image_urls: [IMG], aspect_ratio: '16:9' }, 'input.aspect_ratio', /not available for image-to-video/);
  });
  it('image_urls exactly one; reference_image_urls 1 to 7; not both; public HTTPS', () => {
    bad(M, { prompt: 'p', image_urls: [IMG, IMG2] }, 'input.image_urls', /exactly one/);
    ok(M, { prompt: 'p', reference_image_urls: Array(7).fill(IMG) });
    bad(M, { prompt: 'p', reference_image_urls: Array(8).fill(IMG) }, 'input.reference_image_urls', /at most 7/);
    bad(M, { prompt: 'p', reference_image_urls: [] }, 'input.reference_image_urls', /at least 1/);
    bad(M, { prompt: 'p', image_urls: [IMG], reference_image_urls: [IMG2] }, 'input.reference_image_urls', /cannot be used together with image_urls/);
    bad(M, { prompt: 'p', image_urls: ['http://example.com/a.png'] }, 'input.image_urls[0]', /https URL/);
    ok(M, { prompt: 'p', image_urls: ['./frames/first.png'] });
    ok(M, { prompt: 'p', image_urls: ['http://127.0.0.1:4010/files/temp/a.png'] });
  });
  it('prices 14.5, 25 and 45 credits per second by resolution', () => {
    expect(price(M, { prompt: 'p', resolution: '480p', duration: 10 })).toEqual({ credits: 145, basis: '480p: 14.5 credits per second x 10 s' });
    expect(price(M, { prompt: 'p', resolution: '480p', duration: 5 }).credits).toBe(72.5);
    expect(price(M, { prompt: 'p', resolution: '720p', duration: 4 }).credits).toBe(100);
    expect(price(M, { prompt: 'p', resolution: '1080p', duration: 15 }).credits).toBe(675);
  });
  it('uses the default duration when omitted: 6 s (text, image) or 8 s (reference)', () => {
    expect(price(M, { prompt: 'p' }).credits).toBe(150); // 720p default x 6 s
    expect(price(M, { prompt: 'p', resolution: '480p' }).credits).toBe(87);
    expect(price(M, { prompt: 'p', resolution: '1080p' }).credits).toBe(270);
    expect(price(M, { prompt: 'p', reference_image_urls: [IMG] }).credits).toBe(25 * 8 + 2);
  });
  it('adds 2 credits per input or reference image', () => {
    expect(price(M, { prompt: 'p', image_urls: [IMG], resolution: '1080p' })).toEqual({
      credits: 272,
      basis: '1080p: 45 credits per second x 6 s + 1 image(s) x 2',
    });
    expect(price(M, { prompt: 'p', reference_image_urls: Array(7).fill(IMG), resolution: '480p', duration: 2 }).credits).toBe(29 + 14);
  });
});

describe('imagine-video', () => {
  const M = 'imagine-video';
  it('text-to-video needs a prompt; image-to-video takes one image', () => {
    expect(workflow(M, { prompt: 'p', aspect_ratio: '2:3', duration: 10, mode: 'spicy' })).toBe('text-to-video');
    expect(workflow(M, { image_urls: [IMG], mode: 'fun' })).toBe('image-to-video');
    bad(M, { duration: 6 }, 'input.prompt', /is required for text-to-video/);
    bad(M, { prompt: 'p', image_urls: [IMG, IMG2] }, 'input.image_urls', /exactly one/);
  });
  it('checks aspect ratio, duration and style (mode, chosen name)', () => {
    for (const ar of ['1:1', '2:3', '3:2']) ok(M, { prompt: 'p', aspect_ratio: ar });
    for (const mode of ['fun', 'normal', 'spicy']) ok(M, { prompt: 'p', mode });
    bad(M, { prompt: 'p', aspect_ratio: '16:9' }, 'input.aspect_ratio', /not one of 1:1, 2:3, 3:2/);
    bad(M, { prompt: 'p', duration: 8 }, 'input.duration', /not one of 6, 10/);
    bad(M, { prompt: 'p', mode: 'wild' }, 'input.mode', /not one of fun, normal, spicy/);
  });
});
