import { badFile, invalid } from './refused.js';

/**
 * upload/base64 input. Choice (the contract does not name the field): the data
 * is read from `base64_data` (what genbatch's client sends), else from one of
 * `base64`, `data`, `file`, `image`. Its value is pure Base64 or a Data URL
 * `data:<mime>;base64,<data>`. Whitespace around the value is trimmed;
 * whitespace or newlines inside it are refused, as the contract says. A
 * Data URL's declared type must be image/*; the stored type is the one
 * detected from the bytes (a png label on JPEG bytes is stored as JPEG).
 */

export const DATA_FIELDS = ['base64_data', 'base64', 'data', 'file', 'image'] as const;

const ALPHABET = /^[A-Za-z0-9+/]*={0,2}$/;

/** The field holding the data and its value; throws validation_error when none or several differ. */
export function dataField(body: Record<string, unknown>): { field: string; value: string } {
  const present = DATA_FIELDS.filter((f) => body[f] !== undefined && body[f] !== null);
  if (present.length === 0) {
    throw invalid(`base64_data: is required (pure Base64 or a Data URL data:<mime>;base64,<data>; also accepted as ${DATA_FIELDS.slice(1).join(', ')})`);
  }
  const field = present[0] as string;
  const value = body[field];
  if (Array.isArray(value)) throw invalid(`${field}: one image per request (got an array)`);
  if (typeof value !== 'string') throw invalid(`${field}: must be a string (pure Base64 or a Data URL)`);
  for (const other of present.slice(1)) {
    if (body[other] !== value) throw invalid(`${field}: send the image data in one field only (also got ${other})`);
  }
  return { field, value };
}

/** Decode pure Base64 or a Data URL; throws file_format_error for malformed or undecodable data. */
export function decodeData(field: string, raw: string): { bytes: Buffer; declared: string | null } {
  const text = raw.trim();
  if (text === '') throw badFile(`${field}: the data is empty`);
  let payload = text;
  let declared: string | null = null;
  if (/^data:/i.test(text)) {
    const m = /^data:([^;,]*)((?:;[^;,]*)*),(.*)$/is.exec(text);
    if (!m || !/;base64$/i.test(m[2] ?? '')) throw badFile(`${field}: malformed Data URL: missing the ";base64," separator (expected data:<mime>;base64,<data>)`);
    declared = (m[1] ?? '').toLowerCase() || null;
    payload = m[3] ?? '';
  } else if (/[;,:]/.test(text)) {
    throw badFile(`${field}: malformed Data URL: missing the "data:" prefix (expected data:<mime>;base64,<data>, or pure Base64)`);
  }
  if (/\s/.test(payload)) throw badFile(`${field}: the Base64 data must not contain whitespace or newlines`);
  if (payload === '') throw badFile(`${field}: the data is empty`);
  if (!ALPHABET.test(payload) || payload.length % 4 === 1 || (payload.includes('=') && payload.length % 4 !== 0)) {
    throw badFile(`${field}: not valid Base64 (characters A-Z a-z 0-9 + / with = padding)`);
  }
  if (declared !== null && !declared.startsWith('image/')) {
    throw badFile(`${field}: unsupported file type ${declared}; only JPEG, PNG, GIF and WebP are accepted`);
  }
  return { bytes: Buffer.from(payload, 'base64'), declared };
}
