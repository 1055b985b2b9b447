/**
 * Timestamped lyrics as an LRC file (`[mm:ss.xx]line`), the format music
 * players read. Words are grouped into lines: a line break inside a word
 * (the lyric's own lines) ends a line, section markers such as [Verse] are
 * dropped, and a pause of more than 5 s or a line of 12 words ends a line too.
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
  const lines: Array<{ at: number; text: string[] }> = [];
  let cur: { at: number; text: string[] } | null = null;
  let lastEnd = -Infinity;
  const close = () => {
    if (cur && cur.text.length > 0) lines.push(cur);
    cur = null;
  };
  for (const w of words) {
    // A word may carry the lyric's own line breaks and section markers ("low\n[Chorus]\nHarbour").
    const parts = w.word.split(/\r?\n/);
    parts.forEach((part, i) => {
      if (i > 0) close();
      const text = part.replace(/\[[^\]]*\]/g, ' ').replace(/\s+/g, ' ').trim();
      if (text === '') return;
      if (cur && (w.start_s - lastEnd > PAUSE_S || cur.text.length >= MAX_WORDS)) close();
      cur ??= { at: w.start_s, text: [] };
      cur.text.push(text);
    });
    lastEnd = w.end_s;
  }
  close();
  return lines.map((l) => `[${stamp(l.at)}]${l.text.join(' ')}`).join('\n') + (lines.length > 0 ? '\n' : '');
}

function stamp(seconds: number): string {
  const s = Math.max(0, seconds);
  const m = Math.floor(s / 60);
  const rest = s - m * 60;
  return `${String(m).padStart(2, '0')}:${rest.toFixed(2).padStart(5, '0')}`;
}
