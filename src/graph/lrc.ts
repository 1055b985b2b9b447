/**
 * Timestamped lyrics as an LRC file (`[mm:ss.xx]line`), the format music
 * players read. Words are grouped into lines: a section marker such as
 * [Verse] or [Chorus] starts a new line (the marker itself is dropped), a word
 * ending in a line break ends its line, and a pause of more than 1.5 s or a
 * line of 10 words ends it too. Each line takes the start time of its first word.
 */

export interface TimedWord {
  word: string;
  start_s: number;
  end_s: number;
}

const MARKER = /^\s*\[[^\]]*\]\s*$/;
const MAX_WORDS = 10;
const PAUSE_S = 1.5;

export function lrc(words: readonly TimedWord[]): string {
  const lines: Array<{ at: number; text: string[] }> = [];
  let cur: { at: number; text: string[] } | null = null;
  let lastEnd = 0;
  const close = () => {
    if (cur && cur.text.length > 0) lines.push(cur);
    cur = null;
  };
  for (const w of words) {
    const raw = w.word;
    const marker = raw.replace(/\[[^\]]*\]/g, '').trim();
    if (MARKER.test(raw) || (raw.includes('[') && marker === '')) {
      close();
      continue;
    }
    if (cur && (w.start_s - lastEnd > PAUSE_S || cur.text.length >= MAX_WORDS)) close();
    cur ??= { at: w.start_s, text: [] };
    cur.text.push(marker.replace(/\s+/g, ' '));
    lastEnd = w.end_s;
    if (/[\r\n]\s*$/.test(raw)) close();
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
