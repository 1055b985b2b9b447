/** The checks of a streamed body, chunk by chunk and at its end: the byte limit, Content-Length, `file_size`; the sha256 on the way. */
import { createHash } from 'node:crypto';
import { NetworkError, UnsafeResultError } from '../errors.js';

export class BodyCheck {
  size = 0;
  private readonly hash = createHash('sha256');

  /**
   * `where`: the URL shown in messages; `declared`: the answer's Content-Length (null: none);
   * `expected`: the service's `file_size` (null: none); `maxBytes`: the cap on one file.
   */
  constructor(private readonly c: { where: string; declared: number | null; expected: number | null; maxBytes: number }) {}

  /** Counts and hashes one chunk; throws UnsafeResultError when the body grows past the cap or past file_size. */
  update(buf: Buffer): void {
    this.size += buf.length;
    if (this.size > this.c.maxBytes) throw new UnsafeResultError(`download of ${this.c.where}: body is over the limit of ${this.c.maxBytes} bytes`);
    if (this.c.expected !== null && this.size > this.c.expected) throw new UnsafeResultError(`download of ${this.c.where}: body is longer than file_size ${this.c.expected}`);
    this.hash.update(buf);
  }

  /**
   * At the end of the body: a size other than Content-Length is a cut body (NetworkError, retried), one
   * other than file_size an unsafe result. Returns the sha256 (hex).
   */
  finish(): { size: number; sha256: string } {
    const { where, declared, expected } = this.c;
    if (declared !== null && this.size !== declared) throw new NetworkError(`download of ${where}: body has ${this.size} bytes, Content-Length said ${declared}`, true);
    if (expected !== null && this.size !== expected) throw new UnsafeResultError(`download of ${where}: body has ${this.size} bytes, file_size said ${expected}`);
    return { size: this.size, sha256: this.hash.digest('hex') };
  }
}
