/**
 * Values read from a manifest (YAML mappings, CSV JSON cells, column paths)
 * before anything else walks them: keys that would reach an object's
 * prototype (`__proto__`, `constructor`, `prototype`) are rejected, and
 * nesting is limited to MAX_DEPTH levels, so no later recursive walk (merge,
 * templates, references, the schema) can overflow the stack.
 */

/** Deepest nesting of mappings and lists accepted in a manifest value. */
export const MAX_DEPTH = 64;

/** Keys never accepted: they name an object's prototype machinery, not a field. */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

export function forbiddenKeyMessage(key: string): string {
  return `the key "${key}" is not allowed (it names JavaScript object machinery, not a field)`;
}

export const DEPTH_MESSAGE = `nested more than ${MAX_DEPTH} levels deep`;

export interface ValueProblem {
  /** Dotted path below the value's base, e.g. `input.__proto__`. */
  path: string;
  message: string;
}

/**
 * `value` without forbidden keys and without anything nested deeper than
 * MAX_DEPTH (dropped; a list item becomes null so indexes stay), plus one
 * problem per removal. Returns the same value when nothing was removed.
 * Recursion is bounded by MAX_DEPTH.
 */
export function cleanValue(value: unknown, base: string, problems: ValueProblem[], depth = 0): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (depth >= MAX_DEPTH) {
    problems.push({ path: base, message: DEPTH_MESSAGE });
    return undefined;
  }
  if (Array.isArray(value)) {
    let out: unknown[] | null = null;
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i];
      const c = cleanValue(v, `${base}[${i}]`, problems, depth + 1);
      if (c !== v && out === null) out = value.slice(0, i);
      if (out !== null) out.push(c === undefined ? null : c);
    }
    return out ?? value;
  }
  let out: Record<string, unknown> | null = null;
  const keys = Object.keys(value);
  const obj = value as Record<string, unknown>;
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i] as string;
    const path = base ? `${base}.${k}` : k;
    const v = obj[k];
    let c: unknown;
    if (FORBIDDEN_KEYS.has(k)) {
      problems.push({ path, message: forbiddenKeyMessage(k) });
      c = undefined;
    } else c = cleanValue(v, path, problems, depth + 1);
    if (c !== v && out === null) {
      out = {};
      for (let j = 0; j < i; j++) out[keys[j] as string] = obj[keys[j] as string];
    }
    if (out !== null && c !== undefined) out[k] = c;
  }
  return out ?? value;
}
