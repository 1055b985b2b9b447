import * as z from 'zod';
import { oneOf, schemaOf } from './common.js';
import { IMAGE_SECONDS, SANDBOX_IMAGE_CREDITS, UNPRICED_IMAGE_BASIS, imageList, refused, requiredPrompt, unpriced } from './image-common.js';
import type { ModelSpec } from './types.js';

/**
 * kontext-pro, kontext-max (text-to-image) and their -edit siblings (image_urls
 * required, only the first URL used). Other upstream fields are not exposed,
 * so unknown fields are rejected.
 */

const SIZES = ['1:1', '4:3', '3:4', '16:9', '9:16', '21:9', '9:21'] as const;
const FORMATS = ['png', 'jpg'] as const;

function inputSchema(base: string, edit: boolean) {
  return z.strictObject({
    prompt: requiredPrompt(),
    size: oneOf(SIZES, 'size').optional().describe(`Aspect ratio: ${SIZES.join(', ')}`),
    output_format: oneOf(FORMATS, 'output_format').optional().describe('png or jpg'),
    image_urls: edit
      ? imageList().describe('Reference image; only the first URL is used')
      : refused(`is not accepted by ${base} (reference images need ${base}-edit)`),
  });
}

const CHOICES = [
  'prompt required, no length limit (not documented by the service)',
  'size and output_format have no default (system defaults apply)',
  'edit models accept more than one URL, as the service does, although only the first is used',
  'base models refuse image_urls; other upstream fields are not exposed, so unknown fields are rejected',
];

function spec(base: 'kontext-pro' | 'kontext-max', edit: boolean): ModelSpec {
  const id = edit ? `${base}-edit` : base;
  return {
    id,
    family: 'kontext',
    kind: 'image',
    summary: edit ? 'Edit of one reference image (the first of image_urls)' : 'Text-to-image, 7 aspect ratios, png or jpg',
    get input() {
      return schemaOf(this, () => inputSchema(base, edit));
    },
    workflows: [edit ? 'edit' : 'text-to-image'],
    workflow: () => (edit ? 'edit' : 'text-to-image'),
    priceBasis: UNPRICED_IMAGE_BASIS,
    price: () => unpriced(id, 1),
    imageFields: edit ? ['image_urls[]'] : [],
    urlOnlyFields: [],
    typicalSeconds: IMAGE_SECONDS,
    resultEndpoint: 'status',
    outputCount: () => 1,
    sandboxCredits: SANDBOX_IMAGE_CREDITS,
    choices: CHOICES,
  };
}

export const specs = [spec('kontext-pro', false), spec('kontext-pro', true), spec('kontext-max', false), spec('kontext-max', true)];
