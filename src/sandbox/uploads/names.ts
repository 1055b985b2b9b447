import { randomBytes } from 'node:crypto';
import { invalid } from './refused.js';

/**
 * Upload paths and names. `upload_path` is a relative folder of segments made
 * of letters, digits, `.`, `_`, `-` (no `..`, no absolute path, no backslash):
 * anything else is refused with validation_error. A given `file_name` is
 * sanitised, not refused: only its last path segment is kept, other characters
 * become `_`, leading dots are dropped, at most 200 characters; a name with no
 * extension, or an extension that is not the detected type's, gets the detected one
 * (`ref.png` holding a GIF is stored as `ref.gif`; `.jpeg`/`.jpe` count as `jpg`). Without a name: `{timestamp}_{random}_{extension}`
 * as the contract writes it (epoch ms on the sandbox clock, 8 hex characters,
 * the extension word, e.g. `1767225600000_3fa2b9c1_png`).
 */

export function cleanUploadPath(value: unknown, field: string): string {
  if (value === undefined || value === null || value === '') return '';
  if (typeof value !== 'string') throw invalid(`${field}: must be a string (a relative folder such as images/2026)`);
  const trimmed = value.trim().replace(/^\/+|\/+$/g, '');
  if (trimmed === '') return '';
  if (trimmed.length > 200) throw invalid(`${field}: must be at most 200 characters`);
  const segments = trimmed.split('/');
  for (const s of segments) {
    if (s === '' || s === '.' || s === '..' || !/^[A-Za-z0-9._-]+$/.test(s)) {
      throw invalid(`${field}: must be a relative folder of letters, digits, ".", "_" and "-" separated by "/" (no "..", no empty segment)`);
    }
  }
  return segments.join('/');
}

export function cleanFileName(value: unknown, field: string, ext: string): string | null {
  if (value === undefined || value === null || value === '') return null;
  if (typeof value !== 'string') throw invalid(`${field}: must be a string`);
  const last = value.split(/[/\\]/).pop() ?? '';
  const safe = last.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '').slice(0, 200);
  if (safe === '' || /^_*$/.test(safe)) return null;
  const m = /^(.+)\.([A-Za-z0-9]+)$/.exec(safe);
  if (!m?.[1] || !m[2]) return `${safe}.${ext}`;
  const given = m[2].toLowerCase();
  return given === ext || (ext === 'jpg' && (given === 'jpeg' || given === 'jpe')) ? safe : `${m[1]}.${ext}`;
}

export function generatedName(nowMs: number, ext: string): string {
  return `${Math.floor(nowMs)}_${randomBytes(4).toString('hex')}_${ext}`;
}
