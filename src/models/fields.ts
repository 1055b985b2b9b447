import { z } from 'zod';
import type { ModelSpec } from './types.js';

/**
 * The input fields of a model, read from the JSON Schema of its zod input
 * (`z.toJSONSchema`, input side: a field with a default is not required), for
 * `genbatch models`. Cross-field rules (superRefine) are not in the schema; the
 * summary, workflows and the validate messages carry those.
 */

export interface FieldInfo {
  name: string;
  /** JSON type, e.g. "string", "integer", "array of string", "string | object"; "not accepted" for a refused field. */
  type: string;
  /** Allowed values when the field is an enum. */
  enum?: unknown[];
  required: boolean;
  /** False for a field this model refuses (with the reason in the validate message). */
  accepted: boolean;
  default?: unknown;
  description?: string;
}

export interface InputFields {
  fields: FieldInfo[];
  /** True when fields beyond these pass through unchecked (the contract does not show them). */
  open: boolean;
}

const jsonSchemaNode = z.looseObject({
  type: z.union([z.string(), z.array(z.string())]).optional(),
  enum: z.array(z.unknown()).optional(),
  default: z.unknown().optional(),
  description: z.string().optional(),
  not: z.unknown().optional(),
  items: z.unknown().optional(),
  anyOf: z.array(z.unknown()).optional(),
});
type Node = z.infer<typeof jsonSchemaNode>;

const objectSchema = z.looseObject({
  properties: z.record(z.string(), z.unknown()).optional(),
  required: z.array(z.string()).optional(),
  additionalProperties: z.unknown().optional(),
});

function typeOf(node: Node): string {
  if (node.anyOf) {
    return node.anyOf.map((n) => {
      const parsed = jsonSchemaNode.safeParse(n);
      return parsed.success ? typeOf(parsed.data) : 'any';
    }).join(' | ');
  }
  const t = Array.isArray(node.type) ? node.type.join(' | ') : node.type;
  if (t === 'array' && node.items !== undefined) {
    const item = jsonSchemaNode.safeParse(node.items);
    return `array of ${item.success ? typeOf(item.data) : 'any'}`;
  }
  return t ?? 'any';
}

const cache = new WeakMap<ModelSpec, InputFields>();

/** The fields of a model's input, in schema order. */
export function inputFields(spec: ModelSpec): InputFields {
  const hit = cache.get(spec);
  if (hit) return hit;
  const schema = objectSchema.parse(z.toJSONSchema(spec.input, { io: 'input', unrepresentable: 'any' }));
  const required = new Set(schema.required ?? []);
  const fields: FieldInfo[] = [];
  for (const [name, raw] of Object.entries(schema.properties ?? {})) {
    const node = jsonSchemaNode.parse(raw);
    const accepted = node.not === undefined;
    const info: FieldInfo = { name, type: accepted ? typeOf(node) : 'not accepted', required: required.has(name), accepted };
    if (node.enum !== undefined) info.enum = node.enum;
    if (node.default !== undefined) info.default = node.default;
    if (node.description !== undefined) info.description = node.description;
    fields.push(info);
  }
  const out = { fields, open: schema.additionalProperties !== false };
  cache.set(spec, out);
  return out;
}
