/**
 * The API key out of everything the service sends back. A server may echo the key (an error
 * message "content policy for key sk-...", a file URL "...?token=sk-..."), and whatever it sends
 * is stored, reported, printed and used as file names: every string of every answer goes through
 * here first. The key is matched as it is and percent-encoded (in part or whole), wherever it is,
 * and in base64, base64url and hex (whole-key forms, see encodedForms).
 */
import { serverText } from '../errors.js';

export const REDACTED = '[redacted]';

/** A hex digit of a percent-escape in either case ("[aA]" for "a"). */
function hexDigit(d: string): string {
  return /[a-f]/.test(d) ? `[${d}${d.toUpperCase()}]` : d;
}

/**
 * The key as a pattern: each of its characters as it is or percent-encoded (its UTF-8 bytes, hex in
 * either case, also encoded again: %2541 for "A"), so the key is found however much of it is
 * encoded, whatever else the text holds (a stray "%" or "%zz" made decodeURIComponent give up).
 */
function keyPattern(apiKey: string): string {
  let out = '';
  for (const c of apiKey) {
    const literal = c.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
    const escaped = [...Buffer.from(c, 'utf8')].map((b) => `%(?:25)*${[...b.toString(16).padStart(2, '0')].map(hexDigit).join('')}`).join('');
    out += `(?:${literal}|${escaped})`;
  }
  return out;
}

/**
 * The key's bytes in base64 (and base64url) at each of the three alignments a longer encoded text can give
 * them, each cut to the characters that depend on the key's bytes alone, and in hex (either case): a server
 * that echoes "Bearer <key>" base64-encoded, or the key in hex, is caught too. Forms shorter than 12
 * characters are left out (they would match unrelated text).
 */
function encodedForms(apiKey: string): string[] {
  const key = Buffer.from(apiKey, 'utf8');
  const forms = new Set<string>([key.toString('hex'), key.toString('hex').toUpperCase()]);
  for (const o of [0, 1, 2]) {
    const n = o + key.length;
    const b64 = Buffer.concat([Buffer.alloc(o), key]).toString('base64').slice(o === 0 ? 0 : o + 1, 4 * Math.floor(n / 3) + (n % 3));
    forms.add(b64);
    forms.add(b64.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return [...forms].filter((f) => f.length >= 12);
}

let cached: { apiKey: string; all: RegExp; one: RegExp; forms: string[] } | null = null;
function patterns(apiKey: string): { all: RegExp; one: RegExp; forms: string[] } {
  if (cached?.apiKey !== apiKey) {
    const p = keyPattern(apiKey);
    cached = { apiKey, all: new RegExp(p, 'g'), one: new RegExp(p), forms: encodedForms(apiKey) };
  }
  return cached;
}

/** `text` with every occurrence of the key, plain or percent-encoded (in part or whole, once or twice), or in base64 or hex, replaced by [redacted]. */
export function redact(text: string, apiKey: string): string {
  if (apiKey.length < 4) return text;
  for (const f of patterns(apiKey).forms) if (text.includes(f)) text = text.split(f).join(REDACTED);
  // Stryker disable next-line StringLiteral: a fast path; the pattern below gives the same text.
  if (!text.includes('%')) return text.includes(apiKey) ? text.split(apiKey).join(REDACTED) : text;
  return text.replace(patterns(apiKey).all, REDACTED);
}

/** An error body's `type` as the error's message carries it (`HTTP 400 <type>: ...`): the key redacted, one visible line. */
export function redactType(type: string | null | undefined, apiKey: string): string | null {
  return type === null || type === undefined ? null : serverText(redact(type, apiKey));
}

/** True when `text` holds the key, plain or percent-encoded, or in base64 or hex. */
export function holdsKey(text: string, apiKey: string): boolean {
  if (apiKey.length < 4) return false;
  if (patterns(apiKey).forms.some((f) => text.includes(f))) return true;
  // Stryker disable next-line StringLiteral: a fast path; the pattern below gives the same answer.
  if (!text.includes('%')) return text.includes(apiKey);
  return patterns(apiKey).one.test(text);
}

/**
 * A parsed JSON value with the key redacted from every string and property name, changed in place
 * (it is the caller's own copy) and returned. Iterative: nesting depth costs no stack. An array is walked
 * as the object it is (its index names never hold the key).
 */
export function redactDeep<T>(value: T, apiKey: string): T {
  if (apiKey.length < 4) return value;
  if (typeof value === 'string') return redact(value, apiKey) as T;
  const todo: object[] = typeof value === 'object' && value !== null ? [value] : [];
  for (let node = todo.pop(); node !== undefined; node = todo.pop()) {
    const obj = node as Record<string, unknown>;
    for (const name of Object.keys(obj)) {
      const v = obj[name];
      if (typeof v === 'string') obj[name] = redact(v, apiKey);
      else if (typeof v === 'object' && v !== null) todo.push(v);
      if (holdsKey(name, apiKey)) {
        const clean = redact(name, apiKey);
        Object.defineProperty(obj, clean, { value: obj[name], enumerable: true, writable: true, configurable: true });
        delete obj[name];
      }
    }
  }
  return value;
}
