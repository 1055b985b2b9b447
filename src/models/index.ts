import * as z from 'zod';
import { UnknownModelError } from '../errors.js';
import * as flash from './flash.js';
import * as alphaImage2 from './alpha-image-2.js';
import * as dream4 from './dream-4.js';
import * as dream5Lite from './dream-5-lite.js';
import * as kontext from './kontext.js';
import * as imagineImage from './imagine-image.js';
import * as otherImage from './other-image.js';
import * as vidmodel from './vidmodel.js';
import * as clip from './clip.js';
import * as videoh from './videoh.js';
import * as motion from './motion.js';
import * as video15 from './video-1-5.js';
import * as imagineVideo from './imagine-video.js';
import * as music from './music/index.js';
import type { FieldIssue, ModelSpec } from './types.js';
import { fieldNamesAt } from './fields.js';
import { nearest } from '../lib/nearest.js';
import { MAX_INPUT_FIELDS, countFields, tooManyFieldsMessage } from './limits.js';

export type { FieldIssue, ModelKind, ModelSpec, PriceQuote, ResultEndpoint } from './types.js';
export { isRemoteRef } from './common.js';
export { inputFields, type FieldInfo, type InputFields } from './fields.js';
export { MAX_INPUT_FIELDS, countFields } from './limits.js';

/** Every family module, in catalogue order. Add a family here and nowhere else. */
const FAMILIES: ReadonlyArray<{ specs: ModelSpec[] }> = [flash, alphaImage2, dream4, dream5Lite, kontext, imagineImage, otherImage, vidmodel, clip, videoh, motion, video15, imagineVideo, music];

const BY_ID = new Map<string, ModelSpec>();
for (const family of FAMILIES) {
  for (const spec of family.specs) {
    if (BY_ID.has(spec.id)) throw new Error(`duplicate model id in catalogue: ${spec.id}`);
    BY_ID.set(spec.id, spec);
  }
}

/** All submit models and music workflows, in catalogue order. */
export function listModels(): ModelSpec[] {
  return [...BY_ID.values()];
}

/** The spec of a model id, or undefined. */
export function findModel(id: string): ModelSpec | undefined {
  return BY_ID.get(id);
}

/** The spec of a model id; an unknown id is an error, never a fallback. */
export function getModel(id: string): ModelSpec {
  const spec = BY_ID.get(id);
  if (!spec) throw new UnknownModelError(id);
  return spec;
}

export interface SubmitCheck {
  spec: ModelSpec | null;
  /** The input after defaults are applied, when valid. */
  input: Record<string, unknown> | null;
  issues: FieldIssue[];
}

const ROOT_FIELDS = new Set(['model', 'callback_url', 'input']);

/**
 * Check a submit body `{model, callback_url?, input}` against the catalogue.
 * Returns every issue found (not just the first), with paths from the root.
 */
export function checkSubmit(body: Record<string, unknown>): SubmitCheck {
  const model = body.model;
  if (typeof model !== 'string' || model.length === 0) {
    return { spec: null, input: null, issues: [{ path: 'model', message: 'is required (a model id string)', type: 'validation_error' }] };
  }
  const spec = BY_ID.get(model);
  if (!spec) {
    return { spec: null, input: null, issues: [{ path: 'model', message: `unknown model "${model}"`, type: 'validation_error' }] };
  }
  // Counted before anything walks them: a schema would list one issue per unknown field.
  if (Object.keys(body).length > MAX_INPUT_FIELDS) {
    return { spec, input: null, issues: [{ path: 'body', message: tooManyFieldsMessage('model, input, callback_url'), type: 'validation_error' }] };
  }
  if (countFields(body.input, MAX_INPUT_FIELDS) > MAX_INPUT_FIELDS) {
    return { spec, input: null, issues: [{ path: 'input', message: tooManyFieldsMessage('keys and list items, counted at every depth'), type: 'validation_error' }] };
  }
  const issues: FieldIssue[] = [];
  if (spec.strictRoot) {
    for (const key of Object.keys(body)) {
      if (!ROOT_FIELDS.has(key)) issues.push({ path: key, message: 'unknown field (this model accepts no additional fields)', type: 'validation_error' });
    }
  }
  if (body.callback_url !== undefined && typeof body.callback_url !== 'string') {
    issues.push({ path: 'callback_url', message: 'must be a string URL', type: 'validation_error' });
  }
  if (body.input === undefined || body.input === null || typeof body.input !== 'object' || Array.isArray(body.input)) {
    issues.push({ path: 'input', message: 'is required (an object of model parameters)', type: 'validation_error' });
    return { spec, input: null, issues };
  }
  const parsed = spec.input.safeParse(body.input);
  if (!parsed.success) {
    for (const iss of zodIssues(parsed.error, 'input', (path) => fieldNamesAt(spec, path))) issues.push(iss);
    return { spec, input: null, issues };
  }
  return { spec, input: issues.length === 0 ? parsed.data : null, issues };
}

/** Convert zod issues to FieldIssues with dotted paths under `prefix`; `fieldsAt` names the accepted fields at a path, for "did you mean". */
export function zodIssues(error: z.ZodError, prefix: string, fieldsAt?: (path: ReadonlyArray<PropertyKey>) => string[]): FieldIssue[] {
  const out: FieldIssue[] = [];
  for (const iss of error.issues) {
    if (iss.code === 'unrecognized_keys') {
      const known = fieldsAt?.(iss.path) ?? [];
      for (const key of iss.keys) {
        const near = nearest(key, known);
        const message = `unknown field (not accepted by this model${near ? `; did you mean "${near}"?` : ''})`;
        out.push({ path: joinPath(prefix, [...iss.path, key]), message, type: 'validation_error' });
      }
      continue;
    }
    const tooLong = iss.code === 'too_big' && iss.origin === 'string';
    out.push({ path: joinPath(prefix, iss.path), message: iss.message, type: tooLong ? 'content_too_long_error' : 'validation_error' });
  }
  return out;
}

/** ["image_urls", 2, "x"] under "input" -> "input.image_urls[2].x" */
export function joinPath(prefix: string, path: ReadonlyArray<PropertyKey>): string {
  let out = prefix;
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

export {
  CHAT_MODELS,
  CHAT_PRICE,
  CHAT_PROTOCOLS,
  SANDBOX_CHAT_CREDITS_PER_1K_TOKENS,
  chatInput,
  chatProtocolsFor,
  checkChatJob,
  findChatModel,
  isChatModelId,
  isChatProtocol,
  type ChatJobCheck,
  type ChatModel,
  type ChatProtocol,
} from './chat.js';
