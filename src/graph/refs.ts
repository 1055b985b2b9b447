/**
 * References between jobs: `${{ jobs.<id>.<path> }}` in any string field of a
 * job, and inside a `for_each` job `${{ item }}`, `${{ item.<path> }}` and
 * `${{ index }}`. A path is `.name` and `[n]` steps: `jobs.song.audio[0].audio_id`.
 *
 * A string that is exactly one reference takes the referenced value with its
 * type (a list stays a list, a number a number); references inside longer text
 * are replaced by the value's text (strings as they are, others as JSON).
 *
 * Job ids may contain "."; `jobs.a.b.task_id` names the longest known job id
 * (`a.b` when it exists, else `a`).
 */

export type Step = string | number;

export type Ref =
  | { scope: 'jobs'; job: string; path: Step[] }
  | { scope: 'item'; path: Step[] }
  | { scope: 'index' };

/** One reference found in a job. */
export interface FoundRef {
  /** Dotted path of the field holding it, e.g. `input.prompt`, `input.image_urls[0]`. */
  field: string;
  /** The expression as written between `${{` and `}}`, trimmed. */
  expr: string;
  /** True when the field's whole string is this one reference. */
  whole: boolean;
  ref: Ref | null;
  /** Why the expression could not be read (ref is null then). */
  error?: string;
  /** A `${{` without its `}}` (expr is then the whole string). */
  unclosed?: boolean;
}

function clip(text: string): string {
  const chars = [...text];
  return chars.length > 60 ? `${chars.slice(0, 60).join('')}...` : text;
}

/** The problem for a reference written outside `input` (model, callback_url, protocol): it would be sent or looked up literally. */
export const REFS_ONLY_IN_INPUT = 'references (${{ ... }}) are allowed only in input; write this field out in full';

// The expression is trimmed in code: /\$\{\{\s*([^{}]*?)\s*\}\}/ tried every split of the spaces after an unclosed
// `${{` (a 100 KB prompt of them: over a minute).
const REF = /\$\{\{([^{}]*)\}\}/g;
const WHOLE = /^\$\{\{([^{}]*)\}\}$/;
const STEP = /^(?:\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\])/;

/** True when a string anywhere inside `value` holds `${{`. Iterative: any nesting depth. */
export function hasRef(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (v.includes('${{')) return true;
    } else if (Array.isArray(v)) {
      for (const item of v) stack.push(item);
    } else if (isObject(v)) {
      for (const item of Object.values(v)) stack.push(item);
    }
  }
  return false;
}

/**
 * Read one expression. `knownIds` picks the longest job id for dotted ids
 * (when absent, the id runs to the first `.` or `[`).
 */
export function parseRef(expr: string, knownIds?: ReadonlySet<string>): { ref: Ref } | { error: string } {
  const e = expr.trim();
  if (e === 'index') return { ref: { scope: 'index' } };
  if (e === 'item' || e.startsWith('item.') || e.startsWith('item[')) {
    const path = parseSteps(e.slice(4));
    return 'error' in path ? path : { ref: { scope: 'item', path: path.steps } };
  }
  if (!e.startsWith('jobs.')) return { error: `"${e}" is not a reference: write jobs.<id>.<field>, item, item.<field> or index` };
  const rest = e.slice(5);
  const m = /^[A-Za-z0-9][A-Za-z0-9._-]*/.exec(rest);
  if (!m) return { error: `"${e}": a job id must follow "jobs."` };
  let id = m[0];
  if (knownIds && !knownIds.has(id)) {
    // Longest known id that is a prefix ending at a step boundary.
    let best: string | null = null;
    for (let i = id.length; i > 0; i--) {
      const cand = id.slice(0, i);
      if (knownIds.has(cand) && (i === id.length || id[i] === '.')) {
        best = cand;
        break;
      }
    }
    id = best ?? id.split('.')[0]!;
  } else if (!knownIds) {
    id = id.split('.')[0]!;
  }
  const path = parseSteps(rest.slice(id.length));
  return 'error' in path ? { error: `"${e}": ${path.error}` } : { ref: { scope: 'jobs', job: id, path: path.steps } };
}

function parseSteps(text: string): { steps: Step[] } | { error: string } {
  const steps: Step[] = [];
  let rest = text;
  while (rest.length > 0) {
    const m = STEP.exec(rest);
    if (!m) return { error: `cannot read the path at "${rest}" (use .field and [n] steps)` };
    steps.push(m[2] !== undefined ? Number(m[2]) : m[1]!);
    rest = rest.slice(m[0].length);
  }
  return { steps };
}

/** Every reference in `value` (deep), with the field path each sits in. */
export function findRefs(value: unknown, base: string, knownIds?: ReadonlySet<string>, out: FoundRef[] = []): FoundRef[] {
  if (typeof value === 'string') {
    if (!value.includes('${{')) return out;
    const whole = WHOLE.test(value);
    for (const m of value.matchAll(REF)) {
      const expr = (m[1] ?? '').trim();
      const parsed = parseRef(expr, knownIds);
      out.push('ref' in parsed ? { field: base, expr, whole, ref: parsed.ref } : { field: base, expr, whole, ref: null, error: parsed.error });
    }
    if (!whole && /\$\{\{(?![^{}]*\}\})/.test(value)) out.push({ field: base, expr: value, whole: false, ref: null, unclosed: true, error: `an unclosed "\${{" in "${clip(value)}" (write \${{ jobs.<id>.<field> }})` });
  } else if (Array.isArray(value)) {
    value.forEach((v, i) => findRefs(v, `${base}[${i}]`, knownIds, out));
  } else if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) findRefs(v, base ? `${base}.${k}` : k, knownIds, out);
  }
  return out;
}

/**
 * Replace references in `value` (deep). `lookup` returns the value of a
 * reference, or undefined to leave it in place (e.g. a `jobs.*` reference while
 * only `item` is being filled). Throws what lookup throws.
 */
export function substitute(value: unknown, lookup: (ref: Ref, expr: string) => unknown, knownIds?: ReadonlySet<string>): unknown {
  if (typeof value === 'string') {
    if (!value.includes('${{')) return value;
    const whole = WHOLE.exec(value);
    if (whole) {
      const expr = (whole[1] ?? '').trim();
      const parsed = parseRef(expr, knownIds);
      if (!('ref' in parsed)) return value;
      const v = lookup(parsed.ref, expr);
      return v === undefined ? value : v;
    }
    return value.replace(REF, (all, text: string) => {
      const expr = text.trim();
      const parsed = parseRef(expr, knownIds);
      if (!('ref' in parsed)) return all;
      const v = lookup(parsed.ref, expr);
      if (v === undefined) return all;
      return typeof v === 'string' ? v : JSON.stringify(v);
    });
  }
  if (Array.isArray(value)) return value.map((v) => substitute(v, lookup, knownIds));
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v, lookup, knownIds)]));
  return value;
}

/** The value at `path` inside `root`, or undefined. */
export function valueAt(root: unknown, path: readonly Step[]): unknown {
  let cur = root;
  for (const step of path) {
    if (typeof step === 'number') {
      if (!Array.isArray(cur)) return undefined;
      cur = cur[step];
    } else {
      if (!isObject(cur)) return undefined;
      cur = cur[step];
    }
  }
  return cur;
}

export function pathText(path: readonly Step[]): string {
  return path.map((s) => (typeof s === 'number' ? `[${s}]` : `.${s}`)).join('');
}

export function refText(ref: Ref): string {
  if (ref.scope === 'index') return 'index';
  if (ref.scope === 'item') return `item${pathText(ref.path)}`;
  return `jobs.${ref.job}${pathText(ref.path)}`;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Steps of a field path such as `input.image_urls[0]` (a leading `input` is dropped). */
export function fieldSteps(field: string): Step[] {
  const steps: Step[] = [];
  for (const m of field.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) steps.push(m[2] !== undefined ? Number(m[2]) : m[1]!);
  if (steps[0] === 'input') steps.shift();
  return steps;
}

/** Set the value at a field path inside `root` (intermediate containers must exist); false when they do not. */
export function setField(root: Record<string, unknown>, field: string, value: unknown): boolean {
  const steps = fieldSteps(field);
  const parent = valueAt(root, steps.slice(0, -1));
  const last = steps[steps.length - 1];
  if (last === undefined || parent === null || typeof parent !== 'object') return false;
  (parent as Record<string | number, unknown>)[last] = value;
  return true;
}
