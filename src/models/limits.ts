/**
 * How many fields a submit may carry, checked before any schema walks them: a
 * body with 131,000 unknown fields would otherwise make zod list 131,000 issues.
 */

/**
 * Most fields in one job's `input` (every mapping key and every list item, at any
 * depth), and most fields at the root of a submit body. Real inputs hold a few
 * dozen; the catalogue's lists hold at most a few dozen items.
 */
export const MAX_INPUT_FIELDS = 1000;

/**
 * The fields of `value` (mapping keys and list items, at any depth), counted up
 * to `limit + 1` and no further: the walk stops there, so counting costs at most
 * `limit + 1` steps whatever the size of the value. Iterative (no recursion).
 */
export function countFields(value: unknown, limit: number): number {
  let count = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v !== 'object' || v === null) continue;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        if (++count > limit) return count;
        stack.push(v[i]);
      }
      continue;
    }
    for (const key in v) {
      if (!Object.prototype.hasOwnProperty.call(v, key)) continue;
      if (++count > limit) return count;
      stack.push((v as Record<string, unknown>)[key]);
    }
  }
  return count;
}

/** The rule broken by a value with more than MAX_INPUT_FIELDS fields. */
export function tooManyFieldsMessage(what: string): string {
  return `has more than ${MAX_INPUT_FIELDS.toLocaleString('en-US')} fields (${what}); at most ${MAX_INPUT_FIELDS.toLocaleString('en-US')}`;
}
