import { findModel, inputFields, type FieldInfo, type ModelSpec } from '../models/index.js';

/**
 * Price classes: which jobs the service can be expected to charge the same. A class is the model,
 * its workflow, and the value of every input field that can change a price: numbers, booleans and
 * fields with a fixed set of values (resolution, duration, quality, n, size, mode ...), plus the
 * length of every list (reference images). Free text (prompts, titles, URLs, ids) and seeds are
 * not part of it. Chat models form one class each: their price follows the tokens, so an observed
 * chat price is a price per request for requests like the one measured.
 */

export interface PriceClass {
  /** Stable key, e.g. `alpha-image-2|text-to-image|quality=high;resolution=4K;size=16:9`. */
  key: string;
  model: string;
  /** What a person reads: `alpha-image-2 (text-to-image, quality=high, resolution=4K, size=16:9)`. */
  label: string;
}

const IGNORED = /seed/i;

function fieldMap(spec: ModelSpec): Map<string, FieldInfo> {
  return new Map(inputFields(spec).fields.map((f) => [f.name, f]));
}

const maps = new WeakMap<ModelSpec, Map<string, FieldInfo>>();

function priced(info: FieldInfo | undefined, value: unknown): string | null {
  if (Array.isArray(value)) return `[${value.length}]`;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'string' && info?.enum !== undefined) return value;
  return null;
}

/** The price class of a valid job. */
export function priceClass(job: { model: string; kind: 'submit' | 'chat'; input: Record<string, unknown> }): PriceClass {
  const spec = job.kind === 'submit' ? findModel(job.model) : undefined;
  if (!spec) return { key: `${job.model}|request`, model: job.model, label: `${job.model} (per request)` };
  let fields = maps.get(spec);
  if (!fields) {
    fields = fieldMap(spec);
    maps.set(spec, fields);
  }
  const parts: string[] = [];
  for (const name of Object.keys(job.input).sort()) {
    if (IGNORED.test(name)) continue;
    const v = priced(fields.get(name), job.input[name]);
    if (v !== null) parts.push(`${name}=${v}`);
  }
  const workflow = spec.workflow(job.input);
  return {
    key: `${job.model}|${workflow}|${parts.join(';')}`,
    model: job.model,
    label: `${job.model} (${[workflow, ...parts].join(', ')})`,
  };
}
