import type { TimestampedLyrics } from '../../models/music/index.js';
import { Rng } from '../rng.js';

/**
 * Sandbox lyrics: deterministic song text from a prompt (with section
 * markers), and the timestamped-lyrics content of a track (aligned words
 * spread over the sung part of the track, a waveform, an error rate).
 */

const FILLER = ['light', 'river', 'night', 'open', 'road', 'golden', 'echo', 'home', 'dream', 'fire', 'slow', 'morning', 'heart', 'sky', 'again', 'away'];

function promptWords(prompt: string): string[] {
  const words = prompt.toLowerCase().match(/[\p{L}\p{N}']+/gu) ?? [];
  return words.filter((w) => w.length > 1).slice(0, 40);
}

function line(rng: Rng, pool: string[]): string {
  const n = rng.int(4, 7);
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(pool[rng.int(0, pool.length - 1)] ?? 'la');
  const text = out.join(' ');
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** Song text with [Verse] / [Chorus] / [Bridge] sections, built from the prompt's words. */
export function songLyrics(prompt: string, seed: number): string {
  const rng = new Rng(seed);
  const pool = [...promptWords(prompt), ...FILLER];
  const chorus = [line(rng, pool), line(rng, pool)];
  const section = (name: string, lines: string[]) => `[${name}]\n${lines.join('\n')}`;
  return [
    section('Verse', [line(rng, pool), line(rng, pool), line(rng, pool), line(rng, pool)]),
    section('Chorus', chorus),
    section('Verse', [line(rng, pool), line(rng, pool), line(rng, pool)]),
    section('Chorus', chorus),
    section('Bridge', [line(rng, pool)]),
  ].join('\n\n');
}

/** A lyrics title from the prompt: its first few words, capitalised. */
export function lyricsTitle(prompt: string, variation: number): string {
  const words = promptWords(prompt).slice(0, 4);
  const base = words.length > 0 ? words.map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join(' ') : 'Untitled';
  return variation > 1 ? `${base} (${variation})` : base;
}

/** Lyrics as given (custom mode), with a [Verse] marker added when they carry none. */
export function asSung(lyrics: string): string {
  return /^\s*\[[^\]]+\]/.test(lyrics) ? lyrics.trim() : `[Verse]\n${lyrics.trim()}`;
}

const round = (x: number, d = 2) => Math.round(x * 10 ** d) / 10 ** d;

/**
 * Timestamped lyrics of a track: every sung word with its start and end (the
 * words fill 8% to 92% of the track), section markers carried on the first
 * word of their section (`"[Chorus]\nword"`), a line's end on its last word (`"low\n"`), a 200-point waveform, an error rate.
 */
export function timestamped(lyrics: string, seconds: number, seed: number): TimestampedLyrics {
  const rng = new Rng(seed);
  const tokens: string[] = [];
  let marker = '';
  for (const raw of lyrics.split('\n')) {
    const l = raw.trim();
    if (l === '') continue;
    if (/^\[[^\]]+\]$/.test(l)) {
      marker += `${l}\n`;
      continue;
    }
    for (const w of l.split(/\s+/)) {
      tokens.push(marker + w);
      marker = '';
    }
    // The lyric's own line break rides on the last word of the line ("low\n"), as section markers ride on the next.
    tokens[tokens.length - 1] += '\n';
  }
  if (tokens.length > 0) tokens[tokens.length - 1] = tokens[tokens.length - 1]!.replace(/\n$/, '');
  const from = seconds * 0.08;
  const slot = (seconds * 0.84) / Math.max(1, tokens.length);
  const aligned_words = tokens.map((word, i) => {
    const start = from + i * slot + rng.range(0, slot * 0.1);
    const success = rng.next() > 0.04;
    return {
      word,
      start_s: round(start),
      end_s: round(Math.min(seconds, start + slot * rng.range(0.6, 0.85))),
      success,
      palign: round(success ? rng.range(0.75, 1) : rng.range(0.1, 0.5), 3),
    };
  });
  const waveform_data = Array.from({ length: 200 }, (_, i) => round(Math.abs(Math.sin(i / 7)) * 0.6 + rng.range(0, 0.4), 3));
  return { aligned_words, waveform_data, hoot_cer: round(rng.range(0.05, 0.3), 3), is_streamed: false };
}

/** A style description expanded from short keywords (boost-music-style). */
export function boostedStyle(content: string): string {
  const words = content.split(',').map((s) => s.trim()).filter(Boolean);
  const base = words.length > 0 ? words.join(', ') : content.trim();
  return `${base}, rich layered arrangement, warm analog texture, dynamic build into a wide chorus, polished modern mix`;
}
