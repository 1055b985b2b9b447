/**
 * `{{name}}` templates in manifest string fields. A variable comes from a rows
 * source (a column, or `row`), a glob source (`path`, `name`, `ext`, `index`)
 * or a matrix key. There is no escape for a literal `{{`. `${{ ... }}` is not a
 * template: it is a job reference (src/graph), left as written here.
 *
 * A string that is exactly one template (`"{{size}}"`) takes the variable's
 * value with its type (a matrix number stays a number); a text variable there
 * goes through `typed`, so a rows column feeding `input.duration` becomes a number.
 * A whole-string template whose value is an empty cell leaves the field out.
 * Templates inside longer text are replaced by the value's text.
 */

// The name is trimmed in code (trim() removes what \s matches): /\{\{\s*([^{}]*?)\s*\}\}/ tried every split of the
// spaces after an unclosed `{{` (a 100 KB prompt of them: over a minute; 10 MB: never done).
const TEMPLATE = /(?<!\$)\{\{([^{}]*)\}\}/g;
const WHOLE = /^\{\{([^{}]*)\}\}$/;

/**
 * A variable name in one Unicode form (NFC), so a name typed in the manifest matches a rows column
 * written in another form (macOS tools often write NFD: "e" + combining accent for "é"). ASCII names,
 * the usual case, are returned as they are.
 */
export function varName(name: string): string {
  return /^[\x00-\x7f]*$/.test(name) ? name : name.normalize('NFC');
}

/** A variable's value: text from a table or a path, or any YAML value from a matrix. */
export type Vars = ReadonlyMap<string, unknown>;

/** Marks a field to leave out (whole-string template of an empty cell). */
export const ABSENT: unique symbol = Symbol('absent');

/** Every variable name used by templates anywhere inside `value` (strings, arrays, objects). */
export function templateNames(value: unknown, into: Set<string> = new Set()): Set<string> {
  if (typeof value === 'string') {
    if (value.includes('{{')) for (const m of value.matchAll(TEMPLATE)) into.add(varName((m[1] ?? '').trim()));
  } else if (Array.isArray(value)) {
    for (const v of value) templateNames(v, into);
  } else if (isPlainObject(value)) {
    for (const v of Object.values(value)) templateNames(v, into);
  }
  return into;
}

/** True when `value` contains a template anywhere. */
export function hasTemplate(value: unknown): boolean {
  return templateNames(value).size > 0;
}

/**
 * Replace templates in `value` (deep). `typed(path, text)` turns text from a
 * whole-string template into the type the field expects; `path` is the dotted
 * path of the field below `base` (e.g. `input.duration`).
 */
export function fill(value: unknown, vars: Vars, base: string, typed: (path: string, text: string) => unknown): unknown {
  if (typeof value === 'string') {
    if (!value.includes('{{')) return value;
    const whole = WHOLE.exec(value);
    if (whole) {
      const v = vars.get(varName((whole[1] ?? '').trim()));
      if (typeof v === 'string') return v === '' ? ABSENT : typed(base, v);
      return v === undefined ? value : v;
    }
    return value.replace(TEMPLATE, (all, name: string) => {
      const v = vars.get(varName(name.trim()));
      if (v === undefined) return all;
      return typeof v === 'string' ? v : JSON.stringify(v);
    });
  }
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    value.forEach((v, i) => {
      const f = fill(v, vars, `${base}[${i}]`, typed);
      if (f !== ABSENT) out.push(f);
    });
    return out;
  }
  if (isPlainObject(value)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      const f = fill(v, vars, base ? `${base}.${k}` : k, typed);
      if (f !== ABSENT) out[k] = f;
    }
    return out;
  }
  return value;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Deep merge of `defaults` under `own`: objects merge key by key, everything
 * else (arrays included) is taken from `own` when present.
 */
export function deepMerge(defaults: unknown, own: unknown): unknown {
  if (own === undefined) return defaults;
  if (isPlainObject(defaults) && isPlainObject(own)) {
    const out: Record<string, unknown> = { ...defaults };
    for (const [k, v] of Object.entries(own)) out[k] = deepMerge(defaults[k], v);
    return out;
  }
  return own;
}
