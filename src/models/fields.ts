import * as z from 'zod';
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
const jsonCache = new WeakMap<ModelSpec, unknown>();

/** The JSON Schema of a model's input (input side), computed once per model. */
function jsonSchemaOf(spec: ModelSpec): unknown {
  if (!jsonCache.has(spec)) jsonCache.set(spec, z.toJSONSchema(spec.input, { io: 'input', unrepresentable: 'any' }));
  return jsonCache.get(spec);
}

const asObject = (v: unknown): Record<string, unknown> | null => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null);

/** A schema node and its anyOf/oneOf/allOf alternatives. */
function alternatives(node: unknown): Record<string, unknown>[] {
  const n = asObject(node);
  if (!n) return [];
  const out = [n];
  for (const key of ['anyOf', 'oneOf', 'allOf']) {
    const list = n[key];
    if (Array.isArray(list)) for (const item of list) out.push(...alternatives(item));
  }
  return out;
}

/**
 * The field names a model's input accepts at `path` (e.g. [] for the top level, ["metadata"] for a nested
 * object, [0] steps into an array's items): for "did you mean" on an unknown field. Empty when not known.
 */
export function fieldNamesAt(spec: ModelSpec, path: ReadonlyArray<PropertyKey>): string[] {
  let nodes = alternatives(jsonSchemaOf(spec));
  for (const part of path) {
    nodes = nodes.flatMap((n) => alternatives(typeof part === 'number' ? n.items : asObject(n.properties)?.[String(part)]));
  }
  const names = new Set<string>();
  for (const n of nodes) for (const [name, node] of Object.entries(asObject(n.properties) ?? {})) if (asObject(node)?.not === undefined) names.add(name);
  return [...names];
}

/** The fields of a model's input, in schema order. */
export function inputFields(spec: ModelSpec): InputFields {
  const hit = cache.get(spec);
  if (hit) return hit;
  const schema = objectSchema.parse(jsonSchemaOf(spec));
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
