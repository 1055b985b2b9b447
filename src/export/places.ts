import type { Readable } from 'node:stream';
import { EXIT, GenbatchError } from '../errors.js';
import type { ChunkWriter } from '../report/atomic.js';

/** What genbatch wrote in an export destination: name -> sha256 (`.genbatch-export.json`). */
export interface Ledger {
  version: 1;
  files: Record<string, string>;
}

export const LEDGER = '.genbatch-export.json';

/** One result file to export: its name in the destination, where it is in the run's output, its recorded sha256. */
export interface ExportEntry {
  name: string;
  /** Its path under the run's output (`<job folder>/image-1.png`), checked to stay inside it. */
  rel: string;
  /** The recorded size and sha256: the exported file must have both. */
  size: number;
  sha256: string;
  row: Record<string, unknown>;
  /** The input as sent (the csv index's input column). */
  input: Record<string, unknown>;
}

/** A file that cannot be exported, and why (the message names it): the export goes on with the rest, exit 1. */
export class ExportProblem extends Error {}

/** How one file was placed: hard-linked, copied (on a disk, or server-side in a bucket), already there; null: not (a problem says why). */
export type Placement = 'linked' | 'copied' | 'kept';

/** The run's output the results are exported from: a folder, or a bucket prefix. */
export interface ExportSource {
  /** The output, for messages (an absolute folder or `s3://bucket/prefix`). */
  where: string;
  /**
   * The file on this machine (a folder output: its absolute path, checked to be a regular file inside the output
   * folder, else an ExportProblem), or null (a bucket).
   */
  file(rel: string): string | null;
  /** The file's bytes. */
  open(rel: string): Promise<Readable>;
  close?(): void;
}

/** Where the results are exported to: a folder, or a bucket prefix. */
export interface ExportDest {
  /** The destination, for messages and the outcome (an absolute folder or `s3://bucket/prefix`). */
  where: string;
  /** The full name (path or URL) of `name` in the destination. */
  at(name: string): string;
  readLedger(): Promise<Ledger>;
  /** Something is at `name` (the index check: one genbatch did not write is refused). */
  exists(name: string): Promise<boolean>;
  /** One file placed (see the README): kept when already there with its sha256, else written, checked; an ExportProblem says why not. */
  place(e: ExportEntry, from: ExportSource, ledger: Ledger): Promise<Placement>;
  /** Removes `name` when it still holds `sha256`; true when removed. */
  removeIfUnchanged(name: string, sha256: string): Promise<boolean>;
  /** Writes `name` whole (replacing it) from `produce`; returns its sha256. */
  write(name: string, produce: (w: ChunkWriter) => Promise<void>): Promise<string>;
  close(): void;
}

export function parseLedger(text: string | null, where: string): Ledger {
  if (text === null) return { version: 1, files: {} };
  try {
    // Data from outside: its shape is checked here, each name where it is used (src/export/export.ts).
    const parsed = JSON.parse(text) as Ledger;
    const files = parsed.files as unknown;
    if (parsed.version === 1 && files && typeof files === 'object' && !Array.isArray(files) && Object.values(files).every((v) => typeof v === 'string')) {
      return { version: 1, files: Object.assign(Object.create(null) as Record<string, string>, files) };
    }
  } catch {
    // fall through
  }
  throw new GenbatchError('GB_EXPORT', `${where} is not a genbatch export record; remove it or choose another folder`, EXIT.usage);
}
