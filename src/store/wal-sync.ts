import { close, closeSync, fstatSync, fsync, openSync, statSync } from 'node:fs';

/**
 * fsync of a state file's write-ahead log on the thread pool. A commit made
 * under synchronous=NORMAL has written its frames to the `-wal` file without
 * syncing it; fsync of that file (fsync is per file, not per descriptor) then
 * makes the commit exactly as durable as synchronous=FULL would have, which
 * fsyncs the same file at commit, but blocking the event loop for the whole
 * disk flush (~10 ms on a busy disk, for every group of intents).
 */
export class WalSync {
  private fd: number | null = null;
  private ino = -1;
  /** Descriptors of a replaced `-wal` file: closed with the store (an fsync may still be using them). */
  private readonly old: number[] = [];

  constructor(private readonly walPath: string) {}

  /** Resolves once everything committed so far is on disk. */
  sync(): Promise<void> {
    // The WAL is kept while this connection is open; a different inode (never expected) is reopened.
    const ino = statSync(this.walPath).ino;
    if (this.fd === null || ino !== this.ino) {
      if (this.fd !== null) this.old.push(this.fd);
      this.fd = openSync(this.walPath, 'r');
      this.ino = fstatSync(this.fd).ino;
    }
    const fd = this.fd;
    return new Promise<void>((resolve, reject) => fsync(fd, (err) => (err ? reject(err) : resolve())));
  }

  close(): void {
    for (const fd of [...this.old, ...(this.fd === null ? [] : [this.fd])]) {
      try {
        closeSync(fd);
      } catch {
        close(fd, () => undefined);
      }
    }
    this.old.length = 0;
    this.fd = null;
  }
}
