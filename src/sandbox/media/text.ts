/** One entry of `aligned_words` in the timestamped-lyrics content. */
export interface AlignedWord {
  word: string;
  start_s: number;
  end_s: number;
  success?: boolean;
  palign?: number;
}

function stamp(seconds: number): string {
  const cs = Math.max(0, Math.round(seconds * 100));
  const m = Math.floor(cs / 6000);
  const s = Math.floor((cs % 6000) / 100);
  return `${String(m).padStart(2, '0')}:${String(s).padStart(2, '0')}.${String(cs % 100).padStart(2, '0')}`;
}

/**
 * LRC text from aligned words: one `[mm:ss.xx]word` line per word, in the
 * order given; section markers such as `[Verse]` keep their own line.
 */
export function lrc(alignedWords: readonly AlignedWord[]): string {
  return alignedWords.map((w) => `[${stamp(w.start_s)}]${w.word.replace(/[\r\n]+/g, ' ').trim()}`).join('\n') + '\n';
}
