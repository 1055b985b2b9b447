/**
 * The candidate closest to `word` by edit distance (case-insensitive), when close enough to be a likely typo:
 * at most max(2, length / 4) edits, and fewer than the word has characters (no "id" for "p"). Used for every
 * "did you mean" (models, manifest keys, input fields, CSV columns, job ids).
 */
export function nearest(word: string, candidates: Iterable<string>): string | null {
  let best: string | null = null;
  let bestDist = Math.min(Math.max(2, Math.floor(word.length / 4)) + 1, word.length);
  const w = word.toLowerCase();
  for (const c of candidates) {
    const d = distance(w, c.toLowerCase());
    if (d < bestDist) {
      best = c;
      bestDist = d;
    }
  }
  return best;
}

/** Levenshtein distance. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min((prev[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, (prev[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length] ?? 0;
}
