import * as z from 'zod';
import { oneOf, schemaOf } from './common.js';
import { IMAGE_SECONDS, imageList, refused, requiredPrompt } from './image-common.js';
import type { ModelSpec, PriceQuote } from './types.js';

/**
 * alpha-image-2 (text-to-image) and alpha-image-2-edit (reference images).
 * One image per request; `n` is refused. Priced by quality and billed resolution,
 * with the contract's four resolution rules deciding the billed resolution.
 */

const QUALITIES = ['low', 'medium', 'high'] as const;
const RESOLUTIONS = ['1K', '2K', '4K'] as const;
const PRESET_SIZES = ['auto', '1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '16:9', '9:16', '21:9'] as const;
/** Preset sizes billed at 4K when resolution is 4K (rule 3). */
const FOUR_K_SIZES: readonly string[] = ['16:9', '9:16', '21:9'];

type Quality = (typeof QUALITIES)[number];
type Resolution = (typeof RESOLUTIONS)[number];

/** Credits by quality and billed resolution (the contract's table). */
export const ALPHA_IMAGE_2_CREDITS: Record<Quality, Record<Resolution, number>> = {
  low: { '1K': 2, '2K': 4, '4K': 8 },
  medium: { '1K': 3, '2K': 6, '4K': 12 },
  high: { '1K': 12, '2K': 24, '4K': 48 },
};

const MAX_EDGE = 3840;
const MIN_PIXELS = 655_360;
const MAX_PIXELS = 8_294_400;

/** Width and height of a custom `WIDTHxHEIGHT` size, or null for a preset (or anything else). */
export function customSize(size: unknown): { width: number; height: number } | null {
  if (typeof size !== 'string') return null;
  const m = /^([1-9]\d*)x([1-9]\d*)$/.exec(size);
  return m ? { width: Number(m[1]), height: Number(m[2]) } : null;
}

const grouped = (v: number) => v.toLocaleString('en-US');

const size = z
  .string({ error: 'must be a string: a preset such as 16:9, or a custom WIDTHxHEIGHT' })
  .superRefine((value, ctx) => {
    const custom = customSize(value);
    if (!custom) {
      if (!(PRESET_SIZES as readonly string[]).includes(value)) {
        ctx.addIssue({ code: 'custom', message: `size ${JSON.stringify(value)} is not one of ${PRESET_SIZES.join(', ')}, nor a custom WIDTHxHEIGHT such as 2048x1152` });
      }
      return;
    }
    const { width, height } = custom;
    const label = `custom size ${width}x${height}`;
    const fail = (message: string) => ctx.addIssue({ code: 'custom', message });
    if (width % 16 !== 0) fail(`${label} has a width not divisible by 16`);
    if (height % 16 !== 0) fail(`${label} has a height not divisible by 16`);
    const longest = Math.max(width, height);
    const shortest = Math.min(width, height);
    if (longest > MAX_EDGE) fail(`${label} has a longest edge over ${MAX_EDGE}`);
    if (longest > 3 * shortest) fail(`${label} has an aspect ratio over 3:1`);
    const pixels = width * height;
    if (pixels < MIN_PIXELS) fail(`${label} has ${grouped(pixels)} pixels, under the minimum of ${grouped(MIN_PIXELS)}`);
    if (pixels > MAX_PIXELS) fail(`${label} has ${grouped(pixels)} pixels, over the maximum of ${grouped(MAX_PIXELS)}`);
  })
  .describe(`One of ${PRESET_SIZES.join(', ')}, or a custom WIDTHxHEIGHT (sides divisible by 16, longest edge at most 3840, aspect at most 3:1, 655,360 to 8,294,400 pixels)`);

/** Rules 2 and 4: what a custom size demands of `resolution`. */
function checkResolution(input: { size?: string | undefined; resolution?: string | undefined }, ctx: z.RefinementCtx): void {
  const custom = customSize(input.size);
  if (!custom) return;
  const label = `custom size ${custom.width}x${custom.height}`;
  const given = input.resolution === undefined ? 'no resolution' : `resolution ${input.resolution}`;
  if (Math.max(custom.width, custom.height) === MAX_EDGE) {
    if (input.resolution !== '4K') {
      ctx.addIssue({ code: 'custom', path: ['resolution'], message: `${label} has a ${MAX_EDGE}-pixel edge and must use resolution 4K (got ${given})` });
    }
  } else if (input.resolution !== '2K' && input.resolution !== '4K') {
    ctx.addIssue({ code: 'custom', path: ['resolution'], message: `${label} requires resolution 2K or 4K (got ${given})` });
  }
}

function inputSchema(edit: boolean) {
  return z
    .strictObject({
      prompt: requiredPrompt(4000),
      quality: oneOf(QUALITIES, 'quality').default('low').describe('low, medium or high; default low'),
      size: size.optional(),
      resolution: oneOf(RESOLUTIONS, 'resolution').optional().describe('1K, 2K or 4K; see the resolution rules'),
      image_urls: edit ? imageList() : refused('is not accepted by alpha-image-2 (reference images need alpha-image-2-edit)'),
      n: refused('n is not supported: one image per request'),
    })
    .superRefine(checkResolution);
}

/** Rule 1 for the sandbox's image: size omitted or auto is made at 1K; otherwise at the resolution given. */
function processedResolution(input: Record<string, unknown>): string | undefined {
  if (input.size === undefined || input.size === 'auto') return '1K';
  return typeof input.resolution === 'string' ? input.resolution : undefined;
}

/** The resolution a valid input is billed at, and the rule that decided it. */
export function billedResolution(input: Record<string, unknown>): { resolution: Resolution; rule: string } {
  const size = typeof input.size === 'string' ? input.size : undefined;
  const asked = typeof input.resolution === 'string' ? input.resolution : undefined;
  if (size === undefined || size === 'auto') {
    const what = size === undefined ? 'size omitted' : 'size auto';
    return {
      resolution: '1K',
      rule: asked !== undefined && asked !== '1K' ? `rule 1: ${what}, processed and billed as 1K although resolution ${asked} was given` : `rule 1: ${what}, processed and billed as 1K`,
    };
  }
  if (asked === undefined) return { resolution: '1K', rule: 'no resolution given, billed as 1K' };
  if (asked === '4K') {
    const custom = customSize(size);
    if (custom) {
      return Math.max(custom.width, custom.height) === MAX_EDGE
        ? { resolution: '4K', rule: `rule 3: custom size ${size} has a ${MAX_EDGE}-pixel edge, billed as 4K` }
        : { resolution: '2K', rule: `rule 3: custom size ${size} has no ${MAX_EDGE}-pixel edge, 4K billed as 2K` };
    }
    return FOUR_K_SIZES.includes(size)
      ? { resolution: '4K', rule: `rule 3: size ${size} is billed as 4K` }
      : { resolution: '2K', rule: `rule 3: 4K billing applies only to 16:9, 9:16, 21:9 or a ${MAX_EDGE}-pixel custom edge; size ${size} at 4K is billed as 2K` };
  }
  return { resolution: asked === '2K' ? '2K' : '1K', rule: `resolution ${asked} as given` };
}

function price(input: Record<string, unknown>): PriceQuote {
  const quality: Quality = input.quality === 'medium' || input.quality === 'high' ? input.quality : 'low';
  const { resolution, rule } = billedResolution(input);
  const credits = ALPHA_IMAGE_2_CREDITS[quality][resolution];
  return { credits, basis: `${quality} quality, billed at ${resolution}: ${credits} credits (${rule})` };
}

const PRICE_BASIS = 'quality x billed resolution table, 2 to 48 credits per image, billed resolution by rules 1-4 (service price)';

const CHOICES = [
  'resolution omitted with a preset size: processed and billed as 1K (the service gives no default)',
  'custom size format: WIDTHxHEIGHT with a lowercase x and positive integers without leading zeros',
  'no limit on the number of image_urls for the edit model (the service gives none)',
  'a custom size that breaks a size constraint and a resolution rule gets both issues (input.size and input.resolution)',
];

export const alphaImage2: ModelSpec = {
  id: 'alpha-image-2',
  family: 'alpha-image-2',
  kind: 'image',
  summary: 'Text-to-image, one image per request, priced by quality and billed resolution (2 to 48 credits)',
  get input() {
    return schemaOf(this, () => inputSchema(false));
  },
  workflows: ['text-to-image'],
  workflow: () => 'text-to-image',
  priceBasis: PRICE_BASIS,
  price,
  imageFields: [],
  urlOnlyFields: [],
  typicalSeconds: IMAGE_SECONDS,
  resultEndpoint: 'status',
  outputCount: () => 1,
  imageResolution: processedResolution,
  choices: CHOICES,
};

export const alphaImage2Edit: ModelSpec = {
  id: 'alpha-image-2-edit',
  family: 'alpha-image-2',
  kind: 'image',
  summary: 'Edit with reference images (image_urls required), one image per request, priced as alpha-image-2',
  get input() {
    return schemaOf(this, () => inputSchema(true));
  },
  workflows: ['edit'],
  workflow: () => 'edit',
  priceBasis: PRICE_BASIS,
  price,
  imageFields: ['image_urls[]'],
  urlOnlyFields: [],
  typicalSeconds: IMAGE_SECONDS,
  resultEndpoint: 'status',
  outputCount: () => 1,
  imageResolution: processedResolution,
  choices: CHOICES,
};

export const specs = [alphaImage2, alphaImage2Edit];
