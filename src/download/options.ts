/** The downloader's options, result and size limits (used by every path: download.ts, whole.ts, stream.ts). */
import type { Agent, Dispatcher } from 'undici';
import { KEEP_IDLE, undici } from '../client/undici.js';
import type { DownloadPace } from './pace.js';

/** Default cap on one downloaded file. */
export const DEFAULT_MAX_BYTES = 2 * 1024 ** 3;
/**
 * Bodies of at most this many bytes are read into memory (still counted, checked and hashed chunk
 * by chunk) and written with one write once complete, so a body that fails midway leaves no
 * temporary file to remove: when `file_size` says so before the request (one undici dispatch with
 * a small handler, no Readable stream), or when Content-Length says so (the streaming path's
 * request). Larger or unannounced bodies stream to the temporary file as they come.
 */
export const SMALL_BODY = 64 * 1024;

export interface DownloadOptions {
  url: string;
  /** Target folder (created when missing). The caller keeps it inside the output folder (see safeJoin). */
  dir: string;
  /** Wanted file name; cleaned with sanitizeName (fallback `file`). */
  name: string;
  /** The File object's `file_size`: the body must have exactly this many bytes. Null/undefined: not checked. */
  expectedSize?: number | null;
  /** Refuse bodies larger than this (default 2 GiB). */
  maxBytes?: number;
  signal?: AbortSignal;
  /** undici dispatcher (Agent, Pool with timeouts...). Default: ownDispatcher(). */
  dispatcher?: Dispatcher;
  /** `dir` exists already (the caller made it): no mkdir. */
  dirExists?: boolean;
  /**
   * The caller fsyncs `dir` once after its last file (fsyncDir) and records the
   * files only after that; default false: the folder is fsynced here after the rename.
   */
  deferDirSync?: boolean;
  /**
   * Always use the streaming path (undici `request`, a Readable body), also when `expectedSize`
   * is at most SMALL_BODY. Same files, hashes and errors either way; tests compare the two paths.
   */
  stream?: boolean;
  /** Deadlines of each request (pace.ts; default: headers within 60 s, then at least 1 KiB/s over every 60 s). */
  pace?: Partial<DownloadPace>;
}

export interface DownloadResult {
  /** Absolute final path. */
  path: string;
  /** Final file name (differs from the cleaned requested name when `renamed`). */
  name: string;
  size: number;
  /** Hex sha256 of the content. */
  sha256: string;
  /** Content-Type header, or null. */
  contentType: string | null;
  /** An existing file with the same content was found under the final name and kept; nothing was written. */
  reused: boolean;
  /** The requested name held a different file, so `name (n).ext` was used instead. */
  renamed: boolean;
}

let own: Agent | null = null;
/**
 * The dispatcher of downloads given none: one Agent of genbatch's undici, made on first use. Not undici's
 * global dispatcher: that one is shared by the whole process (under a Symbol.for key), and Node's built-in
 * fetch sets it to an Agent of the undici bundled in Node when it is first loaded (by a fetch() call, or the
 * sandbox's server) before genbatch's undici is; on Node 22 that Agent refuses our handlers ("invalid onError
 * method"), so every download of a library user who had started the sandbox or called fetch() first failed.
 */
export function ownDispatcher(): Dispatcher {
  return (own ??= new (undici().Agent)({ ...KEEP_IDLE }));
}
