import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import * as z from 'zod';
import { UsageError } from '../errors.js';

/**
 * The price book: prices observed on the account (a task run alone, the balance read before and
 * after), kept per service and price class, with how often, when, and how far the observations
 * spread. A small JSON file: `$XDG_CONFIG_HOME/genbatch/prices.json` (or `~/.config/...`), or the
 * path in GENBATCH_PRICE_BOOK, or a `--prices` file holding a book. It never holds the API key: the
 * service is named by its base URL without credentials, query or fragment.
 */

export const BOOK_MARK = 'genbatch_price_book';
const MAX_OBSERVATIONS = 20;

const observationSchema = z.object({ credits: z.number().finite().min(0), at: z.string() });
const entrySchema = z.object({
  model: z.string(),
  label: z.string(),
  credits: z.number().finite().min(0),
  count: z.number().int().min(1),
  first: z.string(),
  last: z.string(),
  min: z.number().finite(),
  max: z.number().finite(),
  observations: z.array(observationSchema),
});
const bookSchema = z.object({
  [BOOK_MARK]: z.literal(1),
  services: z.record(z.string(), z.record(z.string(), entrySchema)),
});

export type BookEntry = z.infer<typeof entrySchema>;
type BookData = z.infer<typeof bookSchema>;

/** The book's file: GENBATCH_PRICE_BOOK, else $XDG_CONFIG_HOME/genbatch/prices.json, else ~/.config/genbatch/prices.json. */
export function defaultBookPath(env: NodeJS.ProcessEnv = process.env): string {
  if (env.GENBATCH_PRICE_BOOK) return env.GENBATCH_PRICE_BOOK;
  const base = env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME.startsWith('/') ? env.XDG_CONFIG_HOME : join(homedir(), '.config');
  return join(base, 'genbatch', 'prices.json');
}

/** The name of a service in the book: its base URL without credentials, query, fragment or trailing slash. */
export function serviceName(baseUrl: string): string {
  try {
    const u = new URL(baseUrl);
    return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}`;
  } catch {
    return baseUrl.replace(/[?#].*$/, '').replace(/\/+$/, '');
  }
}

/** True when parsed JSON/YAML is a price book (a --prices file may hold one). */
export function isBook(raw: unknown): boolean {
  return typeof raw === 'object' && raw !== null && BOOK_MARK in raw;
}

export class PriceBook {
  private constructor(
    readonly path: string,
    private readonly data: BookData,
  ) {}

  /** The book at `path`; an empty one when the file does not exist. A file that is not a book is a usage error. */
  static load(path: string): PriceBook {
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new PriceBook(path, { [BOOK_MARK]: 1, services: {} });
      throw new UsageError(`price book ${path}: cannot read it (${(err as Error).message})`);
    }
    return PriceBook.fromJson(path, text);
  }

  static fromJson(path: string, text: string): PriceBook {
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      throw new UsageError(`price book ${path}: not JSON`);
    }
    const parsed = bookSchema.safeParse(raw);
    if (!parsed.success) throw new UsageError(`price book ${path}: not a genbatch price book (${parsed.error.issues[0]?.message ?? 'bad shape'})`);
    return new PriceBook(path, parsed.data);
  }

  /** The observed price of a class at a service, or undefined. */
  lookup(baseUrl: string, key: string): BookEntry | undefined {
    const s = this.data.services[serviceName(baseUrl)];
    return s && Object.hasOwn(s, key) ? s[key] : undefined;
  }

  /** Entries of one service, or of all, with their service name and class key. */
  entries(baseUrl?: string): Array<{ service: string; key: string; entry: BookEntry }> {
    const out: Array<{ service: string; key: string; entry: BookEntry }> = [];
    for (const [service, classes] of Object.entries(this.data.services)) {
      if (baseUrl !== undefined && service !== serviceName(baseUrl)) continue;
      for (const [key, entry] of Object.entries(classes)) out.push({ service, key, entry });
    }
    return out;
  }

  /** Record one observation: the class's price becomes the latest observation; count, spread and times follow. */
  record(baseUrl: string, cls: { key: string; model: string; label: string }, credits: number, at: string): BookEntry {
    const service = serviceName(baseUrl);
    const classes = (this.data.services[service] ??= {});
    const old = Object.hasOwn(classes, cls.key) ? classes[cls.key] : undefined;
    const observations = [...(old?.observations ?? []), { credits, at }].slice(-MAX_OBSERVATIONS);
    const entry: BookEntry = {
      model: cls.model,
      label: cls.label,
      credits,
      count: (old?.count ?? 0) + 1,
      first: old?.first ?? at,
      last: at,
      min: Math.min(old?.min ?? credits, credits),
      max: Math.max(old?.max ?? credits, credits),
      observations,
    };
    classes[cls.key] = entry;
    return entry;
  }

  /** Remove entries: of one service (or all), of the named models (or all). Returns how many went. */
  forget(baseUrl: string | undefined, models: string[]): number {
    let n = 0;
    for (const [service, classes] of Object.entries(this.data.services)) {
      if (baseUrl !== undefined && service !== serviceName(baseUrl)) continue;
      for (const [key, entry] of Object.entries(classes)) {
        if (models.length > 0 && !models.includes(entry.model)) continue;
        delete classes[key];
        n++;
      }
      if (Object.keys(classes).length === 0) delete this.data.services[service];
    }
    return n;
  }

  /** Write the book atomically (temporary file, rename), making its folder when missing. */
  save(): void {
    mkdirSync(dirname(this.path), { recursive: true });
    const tmp = `${this.path}.${randomBytes(6).toString('hex')}.tmp`;
    writeFileSync(tmp, JSON.stringify(this.data, null, 2) + '\n', { mode: 0o600 });
    renameSync(tmp, this.path);
  }
}

/** How a price from the book is shown: `observed 3x, last 2026-11-25`. */
export function observedLabel(e: BookEntry): string {
  return `observed ${e.count}x, last ${e.last.slice(0, 10)}`;
}
