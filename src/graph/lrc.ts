/**
 * Timestamped lyrics as an LRC file (`[mm:ss.xx]line`), the format music
 * players read. Words are grouped into lines: a line break inside a word
 * (the lyric's own lines) ends a line, section markers such as [Verse] are
 * dropped, and a pause of more than 5 s ends a line too; a line of more than 12
 * words is cut into near-equal parts (no one-word tail lines).
 * Each line takes the start time of its first word.
 */

export interface TimedWord {
  word: string;
  start_s: number;
  end_s: number;
}

const MAX_WORDS = 12;
const PAUSE_S = 5;

export function lrc(words: readonly TimedWord[]): string {
  const lines: Array<Array<{ at: number; text: string }>> = [];
  let cur: Array<{ at: number; text: string }> = [];
  let lastEnd = -Infinity;
  const close = () => {
    if (cur.length > 0) for (const line of balanced(cur)) lines.push(line);
    cur = [];
  };
  for (const w of words) {
    // A word may carry the lyric's own line breaks and section markers ("low\n[Chorus]\nHarbour").
    const parts = w.word.split(/\r?\n/);
    parts.forEach((part, i) => {
      if (i > 0) close();
      const text = part.replace(/\[[^\]]*\]/g, ' ').replace(/\s+/g, ' ').trim();
      if (text === '') return;
      if (cur.length > 0 && w.start_s - lastEnd > PAUSE_S) close();
      cur.push({ at: w.start_s, text });
    });
    lastEnd = w.end_s;
  }
  close();
  return lines.map((l) => `[${stamp(l[0]!.at)}]${l.map((x) => x.text).join(' ')}`).join('\n') + (lines.length > 0 ? '\n' : '');
}

/** A line longer than MAX_WORDS cut into near-equal parts (13 words: 7 + 6, never 12 + 1). */
function balanced<T>(line: T[]): T[][] {
  const parts = Math.ceil(line.length / MAX_WORDS);
  const out: T[][] = [];
  let from = 0;
  for (let i = 0; i < parts; i++) {
    const size = Math.ceil((line.length - from) / (parts - i));
    out.push(line.slice(from, from + size));
    from += size;
  }
  return out;
}

function stamp(seconds: number): string {
  const s = Math.max(0, seconds);
  const m = Math.floor(s / 60);
  const rest = s - m * 60;
  return `${String(m).padStart(2, '0')}:${rest.toFixed(2).padStart(5, '0')}`;
}
