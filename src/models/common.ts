import * as z from 'zod';

/**
 * Shared zod pieces for the model families. Messages are plain words: they
 * reach users as `job <id> (<file>:<line>) input.<field>: <message>`.
 */

/**
 * Length in characters as the contract counts them: Unicode code points, so an
 * emoji is one character (not two UTF-16 units). Every character limit uses this
 * count: hand-written checks call it, and zod 4's string min/max count code points too.
 */
export function charCount(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** A prompt of 1..max characters (code points) with at least one non-whitespace character. */
export function prompt(max: number) {
  return z
    .string({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a string') })
    .min(1, { error: 'must not be empty', abort: true })
    .max(max, { error: `must be at most ${max} characters` })
    .refine((s) => s.trim().length > 0, { error: 'must contain at least one non-whitespace character' })
    .describe(`Prompt, 1 to ${max} characters`);
}

/** A string from a fixed list, with the list in the message. */
export function oneOf<const T extends readonly [string, ...string[]]>(values: T, what = 'value') {
  return z.enum(values, { error: (iss) => `${what} ${JSON.stringify(iss.input)} is not one of ${values.join(', ')}` });
}

/** An integer from a fixed list. */
export function intOneOf(values: readonly number[]) {
  return z
    .number({ error: 'must be a number' })
    .int({ error: 'must be an integer' })
    .refine((v) => values.includes(v), { error: (iss) => `${String(iss.input)} is not one of ${values.join(', ')}` });
}

/** An integer in [min, max]. */
export function intRange(min: number, max: number) {
  return z
    .number({ error: 'must be a number' })
    .int({ error: 'must be an integer' })
    .min(min, { error: `must be at least ${min}` })
    .max(max, { error: `must be at most ${max}` });
}

/** A number in [0, 1] with at most two decimals (music weights). */
export const weight01 = z
  .number({ error: 'must be a number' })
  .min(0, { error: 'must be at least 0' })
  .max(1, { error: 'must be at most 1' })
  .refine((v) => Math.abs(v * 100 - Math.round(v * 100)) < 1e-9, { error: 'must have at most two decimals' });

/**
 * An image reference: an http(s) URL for the service; in a manifest also a
 * local file path (checked and uploaded by genbatch). The sandbox requires a URL.
 */
export const imageRef = z
  .string({ error: 'must be a string (an image URL or a local image path)' })
  .min(1, { error: 'must not be empty' })
  .describe('Image URL (http/https), or in a manifest a local JPEG/PNG/GIF/WebP path that genbatch uploads');

/** A remote URL only (audio or video sources): local paths are not uploadable. */
export const remoteUrl = z
  .string({ error: 'must be a string URL' })
  .refine((s) => /^https?:\/\//i.test(s), { error: 'must be an http(s) URL; the service cannot take a local file here (upload it somewhere public first)' })
  .describe('Remote http(s) URL');

/** True when a value looks like a URL the service can fetch (not a local path). */
export function isRemoteRef(s: string): boolean {
  return /^(https?:\/\/|data:)/i.test(s);
}

/** A required prompt with at least one non-whitespace character, for models whose length limit is not shown. */
export function promptText() {
  return z
    .string({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a string') })
    .min(1, { error: 'must not be empty', abort: true })
    .refine((s) => s.trim().length > 0, { error: 'must contain at least one non-whitespace character' })
    .describe('Prompt (length limit not documented by the service)');
}

/**
 * An image reference where the service requires public HTTPS URLs: an https URL,
 * or in a manifest a local path that genbatch uploads. http:// and data: are rejected,
 * except http on a loopback host (the local sandbox serves its uploads over plain http).
 */
export const httpsImageRef = imageRef.refine(
  (s) => !/^(http|data):/i.test(s) || /^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(\/|$)/i.test(s),
  { error: 'must be an https URL (this model takes public HTTPS image URLs only) or a local image path' },
);

/** A field this model does not take, with a message that says why (instead of a generic "unknown field"). */
export function unsupported(message: string) {
  return z.never({ error: message }).optional();
}

/** An aspect ratio string of the form W:H (e.g. 16:9), for models whose allowed values are not shown. */
export const ratioString = z
  .string({ error: 'must be a string such as 16:9' })
  .regex(/^[1-9]\d*:[1-9]\d*$/, { error: 'must be a ratio of the form W:H, such as 16:9' });

/** The part of a superRefine context that records issues. */
export interface IssueSink {
  addIssue(issue: { code: 'custom'; path: PropertyKey[]; message: string }): void;
}

/** Add a custom issue at `field` in a superRefine. */
export function fieldIssue(ctx: IssueSink, field: string, message: string): void {
  ctx.addIssue({ code: 'custom', path: [field], message });
}

type InputSchema = z.ZodType<Record<string, unknown>>;
const built = new WeakMap<object, InputSchema>();

/**
 * A model's input schema, built on its first use and kept (per spec object): every command loads all the model
 * families, but a manifest checks few of them, and building zod schemas was most of the model modules' load
 * (36 ms of a 290 ms `genbatch validate` of one model, profiled).
 */
export function schemaOf(spec: object, build: () => InputSchema): InputSchema {
  let schema = built.get(spec);
  if (schema === undefined) built.set(spec, (schema = build()));
  return schema;
}
