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

/**
 * Largest expanded size of a YAML manifest: the characters of every key and
 * string, plus 1 for every other value, with each alias counted as a copy of its
 * anchor's value (a 40 MB string aliased 900 times is 36 GB to hash, store and
 * send). 256 Mi: far above any real manifest.
 */
export const MAX_EXPANDED = 256 * 1024 * 1024;

/** Written out (a toLocaleString at import loads ICU's number formats on every start-up: 30 ms of CPU). */
export const EXPANDED_MESSAGE = `the manifest expands to more than 256 MB (268,435,456 characters of keys and strings, each alias counted as a copy of its anchor's value); at most 256 MB`;

/**
 * The expanded size of `value` as MAX_EXPANDED counts it, or `cap + 1` as soon
 * as it is over `cap` (or the value contains itself). A value met again (an
 * alias) adds its size without being walked again, so the cost is one visit per
 * distinct node. Iterative: no nesting depth overflows the stack.
 */
export function expandedSize(value: unknown, cap: number): number {
  const leaf = (v: unknown) => (typeof v === 'string' ? v.length : 1);
  if (typeof value !== 'object' || value === null) return leaf(value);
  interface Frame { v: object; kids: unknown[]; i: number; size: number }
  const sizes = new WeakMap<object, number>();
  const opened = new Set<object>();
  const open = (v: object): Frame => {
    opened.add(v);
    if (Array.isArray(v)) return { v, kids: v, i: 0, size: 1 };
    let size = 1;
    for (const k of Object.keys(v)) size += k.length;
    return { v, kids: Object.values(v), i: 0, size };
  };
  const stack: Frame[] = [open(value)];
  for (;;) {
    const f = stack[stack.length - 1] as Frame;
    if (f.size > cap) return cap + 1;
    if (f.i < f.kids.length) {
      const kid = f.kids[f.i++];
      if (typeof kid !== 'object' || kid === null) f.size += leaf(kid);
      else if (opened.has(kid)) return cap + 1;
      else {
        const known = sizes.get(kid);
        if (known !== undefined) f.size += known;
        else stack.push(open(kid));
      }
      continue;
    }
    stack.pop();
    opened.delete(f.v);
    sizes.set(f.v, f.size);
    const parent = stack[stack.length - 1];
    if (!parent) return f.size;
    parent.size += f.size;
  }
}
