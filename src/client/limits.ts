/**
 * Bounds on what is read from the service: every answer has a size limit per endpoint and a nesting
 * limit, each far above any real answer (a status answer is a few KB, nested under 10 levels), and
 * every request a total deadline. An answer that breaks a limit is not read further (the connection is
 * dropped) and is unusable (UnusableAnswerError, retried a few times by retry.ts).
 */

const MiB = 1024 * 1024;

/** Size limit of one answer, by endpoint. */
export const ANSWER_MAX_BYTES = {
  status: 16 * MiB,
  musicDetail: 16 * MiB,
  submit: 1 * MiB,
  balance: 1 * MiB,
  upload: 1 * MiB,
  /** A chat call's JSON answer, and a chat stream in total. */
  chat: 16 * MiB,
  /** One event of a chat stream. */
  chatEvent: 4 * MiB,
} as const;

/** Nesting limit of a JSON answer (objects and arrays). JSON.stringify overflows the stack near 2,000 levels. */
export const MAX_DEPTH = 256;

/** Total deadline of one API request, headers and body (`--request-timeout`). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;
/** An upload's deadline is the request deadline plus the time to send its bytes at this rate (a slow uplink is not a hostile server). */
export const UPLOAD_MIN_BYTES_PER_SEC = 32 * 1024;
/** A chat call's total deadline when none is given: a model may think for minutes before its answer ends. */
export const DEFAULT_CHAT_TIMEOUT_MS = 300_000;
/** After a stop, how long a submit already written may still take to answer before it is cut (then uncertain). */
export const DEFAULT_STOP_GRACE_MS = 5_000;

/** Size of `n` bytes for messages: `16 MiB`, `1.5 KiB`, `300 bytes`. */
export function sizeText(n: number): string {
  if (n >= MiB) return `${+(n / MiB).toFixed(1)} MiB`;
  if (n >= 1024) return `${+(n / 1024).toFixed(1)} KiB`;
  return `${n} bytes`;
}

/**
 * Counts the nesting of a JSON text fed in pieces (bytes, UTF-8), without parsing it: brackets
 * outside strings. `feed` returns false once the nesting goes over `max`.
 */
export class NestingGauge {
  #depth = 0;
  #inString = false;
  #escape = false;
  readonly #max: number;

  constructor(max: number = MAX_DEPTH) {
    this.#max = max;
  }

  feed(bytes: Uint8Array): boolean {
    let depth = this.#depth;
    let inString = this.#inString;
    let escape = this.#escape;
    const max = this.#max;
    let ok = true;
    for (let i = 0; i < bytes.length; i++) {
      const c = bytes[i] as number;
      if (inString) {
        if (escape) escape = false;
        else if (c === 0x5c) escape = true; // backslash
        else if (c === 0x22) inString = false;
      } else if (c === 0x22) inString = true;
      else if (c === 0x7b || c === 0x5b) {
        if (++depth > max) {
          ok = false;
          break;
        }
      } else if (c === 0x7d || c === 0x5d) depth--;
    }
    this.#depth = depth;
    this.#inString = inString;
    this.#escape = escape;
    return ok;
  }
}

/** True when the JSON text `text` nests no deeper than `max`. */
export function nestingWithin(text: string, max: number = MAX_DEPTH): boolean {
  return new NestingGauge(max).feed(Buffer.from(text, 'utf8'));
}
