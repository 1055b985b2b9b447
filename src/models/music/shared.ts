import * as z from 'zod';
import { charCount, oneOf, weight01 } from '../common.js';
import type { ModelKind, ModelSpec } from '../types.js';
import { ADD_MODEL_VERSIONS, DEFAULT_MV, MUSIC_VERSIONS, TEXT_LIMITS, type MusicVersion, type TextLimits } from './limits.js';

/**
 * Shared zod pieces and cross-field rule helpers of the music workflows.
 * Field-level rules are zod fields; rules that depend on other fields (custom_mode,
 * default_param_flag, instrumental, mv) run in one superRefine per workflow that
 * reads the raw object defensively, so it reports alongside field errors.
 */

type Raw = Record<string, unknown>;

/** The part of a zod refinement context the helpers use. */
export type Sink = Pick<z.core.$RefinementCtx<Raw>, 'addIssue'>;

/** A required non-empty text with at least one non-whitespace character. */
export function requiredText(what = 'a string') {
  return z
    .string({ error: (iss) => (iss.input === undefined ? 'is required' : `must be ${what}`) })
    .min(1, { error: 'must not be empty', abort: true })
    .refine((s) => s.trim().length > 0, { error: 'must contain at least one non-whitespace character' });
}

/** An optional text; required-ness and length are decided by the workflow's rules. */
export const optionalText = z.string({ error: 'must be a string' }).optional();

/** A required boolean switch such as custom_mode or default_param_flag. */
export function requiredFlag() {
  return z.boolean({ error: (iss) => (iss.input === undefined ? 'is required (true or false)' : 'must be true or false') });
}

/** Version as `mv`; defaults to DEFAULT_MV. */
export const mvField = oneOf(MUSIC_VERSIONS, 'mv').default(DEFAULT_MV).describe(`Model version; default ${DEFAULT_MV}`);

/** Version as `model` (add-instrumental, add-vocals): V4_5PLUS (default) or V5. */
export const addModelField = oneOf(ADD_MODEL_VERSIONS, 'model').default('V4_5PLUS').describe('Model version; V4_5PLUS (default) or V5');

/** `instrumental`: default false (choice: the contract shows no default). */
export const instrumentalField = z.boolean({ error: 'must be true or false' }).default(false).describe('Instrumental only (no lyrics); default false');

/** Seconds from the start of the track: at least 0, at most two decimals. */
export const secondsField = z
  .number({ error: (iss) => (iss.input === undefined ? 'is required' : 'must be a number of seconds') })
  .min(0, { error: 'must be at least 0' })
  .refine((v) => Math.abs(v * 100 - Math.round(v * 100)) < 1e-9, { error: 'must have at most two decimals' });

export const vocalGenderField = oneOf(['m', 'f'] as const, 'vocal_gender').optional().describe('m or f; raises the probability only');

/** Shared optional parameters (without persona_id, which is per workflow). */
export const sharedOptional = {
  negative_tags: optionalText.describe('Styles to exclude'),
  vocal_gender: vocalGenderField,
  style_weight: weight01.optional().describe('0 to 1, up to 2 decimals'),
  weirdness_constraint: weight01.optional().describe('0 to 1, up to 2 decimals'),
  audio_weight: weight01.optional().describe('0 to 1, up to 2 decimals'),
};

/** upload_url / audio_url: a remote http(s) URL only (local files cannot be sent). */
export const audioUrlField = z
  .string({ error: (iss) => (iss.input === undefined ? 'is required (an http(s) URL)' : 'must be a string URL') })
  .refine((s) => /^https?:\/\//i.test(s), { error: 'must be an http(s) URL; the service cannot take a local file here (upload it somewhere public first)' });

/** A strict music input object with its cross-field rules. */
export function musicInput<S extends z.core.$ZodLooseShape>(shape: S, rules: (v: Raw, ctx: Sink) => void) {
  return z.strictObject(shape).superRefine((v, ctx) => rules(v as Raw, ctx), {
    when: (payload) => typeof payload.value === 'object' && payload.value !== null && !Array.isArray(payload.value),
  });
}

/** True when a field holds a value (not undefined, null or an empty string). */
export function present(v: Raw, key: string): boolean {
  const x = v[key];
  return x !== undefined && x !== null && x !== '';
}

/** The field is required under a condition ("when custom_mode is true"). */
export function requireWhen(ctx: Sink, v: Raw, key: string, when: string): void {
  const x = v[key];
  if (!present(v, key)) ctx.addIssue({ code: 'custom', path: [key], message: `is required ${when}`, input: x });
  else if (typeof x === 'string' && x.trim() === '') ctx.addIssue({ code: 'custom', path: [key], message: 'must contain at least one non-whitespace character', input: x });
}

/** The field must be left empty under a condition. */
export function emptyWhen(ctx: Sink, v: Raw, key: string, when: string): void {
  if (present(v, key)) ctx.addIssue({ code: 'custom', path: [key], message: `must be left empty ${when}`, input: v[key] });
}

/** A string over `max` characters (code points, as charCount): a too_big issue (content_too_long_error). */
export function maxChars(ctx: Sink, v: Raw, key: string, max: number, why: string): void {
  const x = v[key];
  if (typeof x !== 'string' || x.length <= max) return; // a code point is 1 or 2 units: within max units is within max characters
  const chars = charCount(x);
  if (chars > max) {
    ctx.addIssue({ code: 'too_big', origin: 'string', maximum: max, inclusive: true, path: [key], input: x, message: `must be at most ${max} characters ${why} (got ${chars})` });
  }
}

/** The version named by `field` when it is valid, else null (its own field issue reports it). */
export function versionOf(v: Raw, field = 'mv'): MusicVersion | null {
  const x = v[field];
  return typeof x === 'string' && (MUSIC_VERSIONS as readonly string[]).includes(x) ? (x as MusicVersion) : null;
}

/** Check prompt / style / title (or their renamed fields) against a version's limits. */
export function versionLimits(ctx: Sink, v: Raw, mv: MusicVersion | null, fields: Partial<Record<keyof TextLimits, string>>, titleMax?: number): void {
  if (mv === null) return;
  const limits = TEXT_LIMITS[mv];
  if (fields.prompt) maxChars(ctx, v, fields.prompt, limits.prompt, `for ${mv}`);
  if (fields.style) maxChars(ctx, v, fields.style, limits.style, `for ${mv}`);
  if (fields.title) maxChars(ctx, v, fields.title, titleMax ?? limits.title, titleMax === undefined ? `for ${mv}` : 'for generate-music titles (every version)');
}

/** What every music spec shares. */
export function musicSpec(
  parts: Pick<ModelSpec, 'id' | 'summary' | 'input' | 'typicalSeconds' | 'sandboxCredits'> & {
    kind: Extract<ModelKind, 'music' | 'audio' | 'lyrics'>;
    count: number | ((input: Raw) => number);
    urlOnlyFields?: string[];
    /** Values of workflow(); with no workflow function, the one workflow is the id. */
    workflow?: { values: readonly string[]; of: (input: Raw) => string };
    choices?: string[];
  },
): ModelSpec {
  const { count, workflow, urlOnlyFields, ...rest } = parts;
  return {
    ...rest,
    family: 'music',
    workflows: workflow?.values ?? [parts.id],
    workflow: workflow?.of ?? (() => parts.id),
    priceBasis: 'unknown: the service gives no price for music workflows; a user-supplied price is per request',
    price: () => ({ credits: null, basis: 'the service gives no price for music workflows' }),
    imageFields: [],
    urlOnlyFields: urlOnlyFields ?? [],
    resultEndpoint: 'music',
    outputCount: typeof count === 'number' ? () => count : count,
  };
}
