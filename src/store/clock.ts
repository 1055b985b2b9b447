/**
 * The timestamp written to the state file's *_at text columns:
 * `new Date().toISOString()`, the text made once per millisecond (several
 * state changes often fall in the same one; toISOString is the costly part).
 */
let lastMs = Number.NaN;
let lastIso = '';

export const nowIso = (): string => {
  const ms = Date.now();
  if (ms !== lastMs) {
    lastIso = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastIso;
};
