import { UsageError } from '../errors.js';

/**
 * The parsers of numeric option values, one for integers and one for numbers, used by every command.
 * A value that is not a number and a number out of range get the same message: the rule and the text given
 * (`--concurrency expects an integer >= 1, got "abc"`, the same for "0"). Exit 2 through UsageError.
 */

const INTEGER = /^[+-]?\d+$/;

/** The range in words: ">= 1", "from 0 to 65535". */
function range(min: number, max: number | undefined): string {
  return max === undefined ? `>= ${min}` : `from ${min} to ${max}`;
}

/** An integer option (digits only: "1e3", "0x10", "" and "2.0" are refused) from `min` (default 0) to `max`. */
export function int(name: string, min = 0, max?: number) {
  return (text: string): number => {
    const n = INTEGER.test(text.trim()) ? Number(text) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || (max !== undefined && n > max)) throw new UsageError(`${name} expects an integer ${range(min, max)}, got "${text}"`);
    return n;
  };
}

/** A number option from `min` (default 0); `above`: the bound itself is refused (> instead of >=). */
export function num(name: string, min = 0, above = false) {
  return (text: string): number => {
    const n = text.trim() === '' ? Number.NaN : Number(text);
    if (!Number.isFinite(n) || n < min || (above && n === min)) throw new UsageError(`${name} expects a number ${above ? '>' : '>='} ${min}, got "${text}"`);
    return n;
  };
}
