import { createHash } from 'node:crypto';
import { MinHeap } from '../lib/heap.js';

/** The first 12 hex characters of sha256(key): how stats and task listings name a key (never the key itself). */
export function keyHash(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 12);
}

interface Refund {
  at: number;
  amount: number;
}

/** One API key with its balance. Refunds fall due at a virtual time and are settled lazily. */
export class Account {
  readonly key: string;
  readonly hash: string;
  private credits: number;
  private readonly refunds = new MinHeap<Refund>();

  constructor(key: string, credits: number) {
    this.key = key;
    this.hash = keyHash(key);
    this.credits = credits;
  }

  /** The balance at virtual time `now` (refunds due by then included). */
  balance(now: number): number {
    for (const r of this.refunds.popDue(now)) this.credits += r.amount;
    return roundCredits(this.credits);
  }

  /** Deduct `amount` if the balance at `now` covers it; false otherwise. */
  charge(amount: number, now: number): boolean {
    if (this.balance(now) + 1e-9 < amount) return false;
    this.credits -= amount;
    return true;
  }

  /** Add `amount` now (a top-up; negative: spent elsewhere). */
  add(amount: number): void {
    this.credits += amount;
  }

  /** Give `amount` back at virtual time `at`. */
  refundAt(at: number, amount: number): void {
    if (amount > 0) this.refunds.push({ at, amount });
  }
}

function roundCredits(n: number): number {
  return Math.round(n * 1e6) / 1e6;
}

export class Accounts {
  private readonly byKey = new Map<string, Account>();

  constructor(keys: Record<string, number>) {
    for (const [k, credits] of Object.entries(keys)) this.byKey.set(k, new Account(k, credits));
  }

  get(key: string): Account | undefined {
    return this.byKey.get(key);
  }

  keys(): string[] {
    return [...this.byKey.keys()];
  }

  all(): Account[] {
    return [...this.byKey.values()];
  }
}

/** The key a request carries: `Authorization: Bearer`, else `x-api-key`, else `x-goog-api-key`. */
export function requestKey(headers: Record<string, string | string[] | undefined>): string | null {
  const auth = one(headers.authorization);
  const bearer = auth ? /^Bearer\s+(\S+)\s*$/i.exec(auth)?.[1] : undefined;
  return bearer ?? one(headers['x-api-key']) ?? one(headers['x-goog-api-key']) ?? null;
}

function one(v: string | string[] | undefined): string | undefined {
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? undefined : s;
}
