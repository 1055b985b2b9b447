import type { Shape } from './outputs.js';
import { fieldSteps, findRefs, setField, substitute, valueAt, type FoundRef, type Ref } from './refs.js';

/**
 * Checking a job whose input holds references before they can be resolved:
 * each reference is replaced by a placeholder of the type it will give
 * (a string "ref", the number 1, true, [] or {}; "ref" when the type is not
 * known yet), the model's schema is run on that, and problems in fields that
 * hold a reference are set aside (their values are known only at submit time,
 * when the job is checked again in full). Placeholders are then put back to the
 * references in the checked input.
 */

const PLACEHOLDER: Record<Shape['type'], unknown> = { string: 'ref', number: 1, boolean: true, any: 'ref', list: [], object: {} };

export function placeholderInput(input: Record<string, unknown>, shapeOf: (ref: Ref) => Shape | null, knownIds: ReadonlySet<string>): { input: Record<string, unknown>; refs: FoundRef[] } {
  const refs = findRefs(input, 'input', knownIds);
  if (refs.length === 0) return { input, refs };
  const filled = substitute(input, (ref) => PLACEHOLDER[shapeOf(ref)?.type ?? 'any'], knownIds) as Record<string, unknown>;
  return { input: filled, refs };
}

/** True when `path` (of a problem) is a field holding a reference, or inside one. */
export function inRefField(path: string, refs: readonly FoundRef[]): boolean {
  return refs.some((r) => path === r.field || path.startsWith(`${r.field}.`) || path.startsWith(`${r.field}[`));
}

/** Put the written values (with their references) back into a checked input. */
export function restoreRefs(checked: Record<string, unknown>, written: Record<string, unknown>, refs: readonly FoundRef[]): Record<string, unknown> {
  const out = structuredClone(checked);
  for (const f of new Set(refs.map((r) => r.field))) setField(out, f, valueAt(written, fieldSteps(f)));
  return out;
}
