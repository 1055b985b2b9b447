import * as z from 'zod';
import type { ModelSpec } from '../models/index.js';

/**
 * Turn a text cell (CSV/TSV, or a rows-source template) into the type the
 * model's schema expects at that field:
 * - the field takes an array or object and the cell starts with `[` or `{`: JSON;
 * - the field takes text: the text, unchanged;
 * - the field takes a number and the cell is numeric: a number;
 * - the field takes a boolean and the cell is true/false (any case): a boolean.
 * Where the schema does not describe the field (open objects of models whose
 * fields the contract does not show, chat inputs), the cell is read as
 * `true`/`false`, a plain decimal number, JSON when it starts with `[` or `{`,
 * and text otherwise. A cell that cannot be typed stays text, so the schema
 * reports the real rule ("must be a number").
 */

type Accepts = { string: boolean; number: boolean; boolean: boolean; json: boolean } | null;
type JsonSchema = Record<string, unknown>;

const NUMBER = /^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/;
const PLAIN_NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?$/;

const schemaCache = new Map<string, JsonSchema | null>();
const acceptsCache = new Map<string, Map<string, Accepts>>();

function jsonSchemaOf(spec: ModelSpec): JsonSchema | null {
  if (schemaCache.has(spec.id)) return schemaCache.get(spec.id) ?? null;
  let out: JsonSchema | null = null;
  try {
    out = z.toJSONSchema(spec.input, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  } catch {
    out = null;
  }
  schemaCache.set(spec.id, out);
  return out;
}

function asSchema(v: unknown): JsonSchema | null {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as JsonSchema) : null;
}

/** The sub-schemas at one step of a path, following anyOf/oneOf/allOf. */
function alternatives(s: JsonSchema): JsonSchema[] {
  const out: JsonSchema[] = [s];
  for (const key of ['anyOf', 'oneOf', 'allOf']) {
    const list = s[key];
    if (Array.isArray(list)) for (const item of list) { const sub = asSchema(item); if (sub) for (const alt of alternatives(sub)) out.push(alt); }
  }
  return out;
}

function step(schemas: JsonSchema[], part: string | number): JsonSchema[] {
  const out: JsonSchema[] = [];
  for (const s of schemas.flatMap(alternatives)) {
    if (typeof part === 'number') {
      const items = asSchema(s.items);
      if (items) out.push(items);
      const prefix = s.prefixItems;
      if (Array.isArray(prefix)) { const p = asSchema(prefix[part]); if (p) out.push(p); }
    } else {
      const props = asSchema(s.properties);
      const sub = props ? asSchema(props[part]) : null;
      if (sub) out.push(sub);
    }
  }
  return out;
}

function acceptsOf(schemas: JsonSchema[]): Accepts {
  const acc = { string: false, number: false, boolean: false, json: false };
  let described = false;
  for (const s of schemas.flatMap(alternatives)) {
    const types = Array.isArray(s.type) ? s.type : s.type === undefined ? [] : [s.type];
    for (const t of types) {
      described = true;
      if (t === 'string') acc.string = true;
      else if (t === 'number' || t === 'integer') acc.number = true;
      else if (t === 'boolean') acc.boolean = true;
      else if (t === 'array' || t === 'object') acc.json = true;
    }
    const values = Array.isArray(s.enum) ? s.enum : 'const' in s ? [s.const] : [];
    for (const v of values) {
      described = true;
      if (typeof v === 'string') acc.string = true;
      else if (typeof v === 'number') acc.number = true;
      else if (typeof v === 'boolean') acc.boolean = true;
    }
  }
  return described ? acc : null;
}

/** Split `input.image_urls[0].x` into ["input", "image_urls", 0, "x"]. */
export function splitPath(path: string): Array<string | number> {
  const out: Array<string | number> = [];
  for (const m of path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) {
    if (m[2] !== undefined) out.push(Number(m[2]));
    else if (m[1] !== undefined) out.push(m[1]);
  }
  return out;
}

function accepts(spec: ModelSpec | null, inputPath: string): Accepts {
  if (!spec) return null;
  let perModel = acceptsCache.get(spec.id);
  if (!perModel) acceptsCache.set(spec.id, (perModel = new Map()));
  const hit = perModel.get(inputPath);
  if (hit !== undefined) return hit;
  const root = jsonSchemaOf(spec);
  let result: Accepts = null;
  if (root) {
    let schemas = [root];
    for (const part of splitPath(inputPath)) schemas = step(schemas, part);
    result = schemas.length > 0 ? acceptsOf(schemas) : null;
  }
  perModel.set(inputPath, result);
  return result;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/**
 * Type a text value for the field at `inputPath` (below `input`, e.g. `size`
 * or `image_urls[0]`) of model `spec` (null: not a catalogue model).
 */
export function typedCell(spec: ModelSpec | null, inputPath: string, text: string): unknown {
  const acc = accepts(spec, inputPath);
  const t = text.trim();
  const looksJson = t.startsWith('[') || t.startsWith('{');
  if (acc === null) {
    if (/^(true|false)$/i.test(t)) return t.toLowerCase() === 'true';
    if (PLAIN_NUMBER.test(t)) return Number(t);
    if (looksJson) return parseJson(t);
    return text;
  }
  if (acc.json && looksJson) {
    const v = parseJson(t);
    if (v !== t) return v;
  }
  if (acc.string) return text;
  if (acc.number && NUMBER.test(t)) return Number(t);
  if (acc.boolean && /^(true|false)$/i.test(t)) return t.toLowerCase() === 'true';
  return text;
}
