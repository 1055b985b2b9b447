/** Matrix expansion: every combination of the listed values, made lazily. */

/** Most matrix combinations one entry may make (each becomes a job). */
export const MAX_COMBINATIONS = 10_000_000;

/**
 * Every combination of the matrix values, one at a time (an odometer: the
 * last key turns fastest, the first key varies slowest); none is built ahead.
 */
export function* product(matrix: Record<string, unknown[]>): Generator<Array<[string, unknown]>> {
  const keys = Object.keys(matrix);
  const lists = keys.map((k) => matrix[k] ?? []);
  if (lists.some((l) => l.length === 0)) return;
  const at = keys.map(() => 0);
  for (;;) {
    yield keys.map((k, i): [string, unknown] => [k, lists[i]?.[at[i] ?? 0]]);
    let i = keys.length - 1;
    while (i >= 0 && (at[i] = (at[i] ?? 0) + 1) === lists[i]?.length) at[i--] = 0;
    if (i < 0) return;
  }
}
