/**
 * Atomic, streamed file writes for the reports.
 *
 * A report is written to a temporary file in the same folder
 * (`.<name>.<pid>.<random>.tmp`), chunk by chunk through a write stream that
 * waits for 'drain', then fsynced, closed and renamed over the final name,
 * and the folder is fsynced. A crash or an error at any point never leaves a
 * half report under the final name; on an error the temporary file is removed.
 * Temporary files left by a process that was killed are removed by
 * removeStaleTemps() (a temp whose pid is no longer alive).
 */
import { close, constants, createWriteStream, fsync, open as openCb, type WriteStream } from 'node:fs';
import { open, readdir, rename, unlink } from 'node:fs/promises';
import type { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { pidAlive } from '../lib/pid.js';

/** Small strings are gathered into chunks of about this many characters before they reach the stream. */
const CHUNK_CHARS = 64 * 1024;

const fsp = { open: promisify(openCb) };
const fsyncFd = promisify(fsync);
const closeFd = promisify(close);

const TEMP_RE = /^\.(report\.[a-z]+)\.(\d+)\.[0-9a-f]+\.tmp$/;

/** Sequential writer handed to a report producer. */
export interface ChunkWriter {
  /** Queue text; resolves once the stream can take more (waits for 'drain' when its buffer is full). */
  write(text: string): Promise<void>;
}

/** Text into a writable stream in chunks of about CHUNK_CHARS, waiting for 'drain'; the stream's error is thrown by the next call. */
export class StreamWriter implements ChunkWriter {
  private pending: string[] = [];
  private pendingChars = 0;
  private failure: Error | null = null;

  constructor(private readonly stream: Writable) {
    stream.on('error', (err) => {
      this.failure = err;
    });
  }

  async write(text: string): Promise<void> {
    if (this.push(text)) await this.flush();
  }

  /** Queue text without waiting; true when a chunk is full and flush() is due. */
  push(text: string): boolean {
    this.pending.push(text);
    this.pendingChars += text.length;
    return this.pendingChars >= CHUNK_CHARS;
  }

  async flush(): Promise<void> {
    if (this.failure) throw this.failure;
    if (this.pending.length === 0) return;
    const chunk = this.pending.length === 1 ? (this.pending[0] as string) : this.pending.join('');
    this.pending = [];
    this.pendingChars = 0;
    if (!this.stream.write(chunk, 'utf8')) await this.waitDrain();
    if (this.failure) throw this.failure;
  }

  private waitDrain(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onDrain = (): void => {
        this.stream.off('error', onError);
        resolve();
      };
      const onError = (err: Error): void => {
        this.stream.off('drain', onDrain);
        reject(err);
      };
      this.stream.once('drain', onDrain);
      this.stream.once('error', onError);
    });
  }

  async end(): Promise<void> {
    await this.flush();
    await new Promise<void>((resolve, reject) => {
      this.stream.once('error', reject);
      this.stream.end(() => resolve());
    });
    if (this.failure) throw this.failure;
  }
}

/** The temporary name used while `finalPath` is being written. */
export function tempPathFor(finalPath: string): string {
  const rand = randomBytes(4).toString('hex');
  return join(dirname(finalPath), `.${basename(finalPath)}.${process.pid}.${rand}.tmp`);
}

/**
 * One report being written: a temporary file in the final folder, filled by
 * push()/write(), then finish() (flushed, fsynced, closed) and rename() over the
 * final name; abort() (after any failure) removes the temporary file. The
 * caller fsyncs the folder after the rename (syncDir).
 */
export class AtomicWriter implements ChunkWriter {
  private fdOpen = true;
  private renamed = false;

  private constructor(
    readonly finalPath: string,
    private readonly temp: string,
    private readonly fd: number,
    private readonly stream: WriteStream,
    private readonly writer: StreamWriter,
  ) {}

  static async open(finalPath: string): Promise<AtomicWriter> {
    const temp = tempPathFor(finalPath);
    // O_CREAT|O_EXCL|O_NOFOLLOW: never write through an existing file or symlink under the temp name.
    const fd = await fsp.open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | (constants.O_NOFOLLOW ?? 0), 0o644);
    // A plain fd, not a FileHandle: stream.destroy() closes the fd itself, and a FileHandle
    // would then close a number that may already belong to another file.
    try {
      const stream = createWriteStream('', { fd, autoClose: false, highWaterMark: CHUNK_CHARS });
      return new AtomicWriter(finalPath, temp, fd, stream, new StreamWriter(stream));
    } catch (err) {
      await closeFd(fd).catch(() => undefined);
      await unlink(temp).catch(() => undefined);
      throw err;
    }
  }

  write(text: string): Promise<void> {
    return this.writer.write(text);
  }

  /** Queue text without waiting; true when flush() is due. */
  push(text: string): boolean {
    return this.writer.push(text);
  }

  flush(): Promise<void> {
    return this.writer.flush();
  }

  /** Everything written, on disk and closed (not yet under the final name). */
  async finish(): Promise<void> {
    await this.writer.end();
    await fsyncFd(this.fd);
    this.fdOpen = false;
    await closeFd(this.fd);
  }

  async rename(): Promise<void> {
    await rename(this.temp, this.finalPath);
    this.renamed = true;
  }

  /** Under the final name (ReportWriter): the rename. */
  commit(): Promise<void> {
    return this.rename();
  }

  /** After a failure: stop writing and remove the temporary file (a file already renamed is left alone). */
  async abort(): Promise<void> {
    if (this.renamed) return;
    if (this.fdOpen) {
      this.fdOpen = false;
      await destroyAndWait(this.stream);
    }
    await unlink(this.temp).catch(() => undefined);
  }
}

/**
 * Write `finalPath` atomically: `produce` writes the content through the
 * given writer; the file appears under its final name only once complete and
 * on disk. Any error (from `produce` or the disk) removes the temporary file
 * and is rethrown; an earlier file under the final name is left untouched.
 */
export async function writeFileAtomic(finalPath: string, produce: (w: ChunkWriter) => Promise<void>): Promise<void> {
  const file = await AtomicWriter.open(finalPath);
  try {
    await produce(file);
    await file.finish();
    await file.rename();
  } catch (err) {
    await file.abort();
    throw err;
  }
  await syncDir(dirname(finalPath));
}

/** Stop a stream and wait until no write is in flight, so its fd can be closed safely. */
function destroyAndWait(stream: WriteStream): Promise<void> {
  if (stream.closed) return Promise.resolve();
  return new Promise((resolve) => {
    stream.once('close', () => resolve());
    stream.destroy();
  });
}

/** fsync a folder so a rename in it survives a power loss; best effort (not every platform allows it). */
export async function syncDir(dir: string): Promise<void> {
  try {
    const h = await open(dir, 'r');
    try {
      await h.sync();
    } finally {
      await h.close();
    }
  } catch {
    // Some platforms (Windows) cannot open or fsync a folder: the rename still happened.
  }
}

/**
 * Remove report temp files in `dir` left by a process that no longer runs
 * (killed while writing a report). Temps of live processes are left alone.
 * Returns the names removed.
 */
export async function removeStaleTemps(dir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const name of names) {
    const m = TEMP_RE.exec(name);
    if (!m || pidAlive(Number(m[2]))) continue;
    try {
      await unlink(join(dir, name));
      removed.push(name);
    } catch {
      // Gone already or not ours to remove: nothing to do.
    }
  }
  return removed;
}
