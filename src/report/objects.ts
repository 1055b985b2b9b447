/**
 * Reports written as objects of a bucket (`--out s3://bucket/prefix`): each report streams into one
 * ObjectOut.putStream with `replace` (src/storage: one PutObject when the body is at most PART_SIZE, else a
 * multipart upload to a temporary key, copied to the report's key once complete), so a report's key only
 * ever holds a whole report, with its sha256 in the metadata; a failure leaves the earlier report there.
 */
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import { BodyCheck } from '../download/check.js';
import type { ObjectOut, UploadJournal } from '../storage/index.js';
import type { OpenReport, ReportWriter } from './sink.js';

/** Small strings are gathered into chunks of about this many characters before they reach the upload. */
const CHUNK_CHARS = 64 * 1024;

const TYPES: Record<string, string> = {
  json: 'application/json; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  md: 'text/markdown; charset=utf-8',
  html: 'text/html; charset=utf-8',
};

/** The content type of a report by its name's extension (what a bucket serves it with). */
export function reportContentType(name: string): string {
  return TYPES[/\.([a-z]+)$/.exec(name)?.[1] ?? ''] ?? 'application/octet-stream';
}

class ObjectWriter implements ReportWriter {
  private readonly body = new PassThrough({ highWaterMark: CHUNK_CHARS });
  private readonly upload: Promise<unknown>;
  private pending: string[] = [];
  private pendingChars = 0;
  private failure: unknown = null;
  private ended = false;

  constructor(out: ObjectOut, rel: string, journal: UploadJournal) {
    const check = new BodyCheck({ where: out.keyOf(rel), declared: null, expected: null, maxBytes: Number.MAX_SAFE_INTEGER });
    this.upload = out.putStream(rel, this.body, { check, contentType: reportContentType(rel), journal, replace: true });
    this.upload.catch((err: unknown) => {
      this.failure = err;
      // Nothing reads the body any more: a writer waiting for 'drain' is released by the error.
      this.body.destroy(err instanceof Error ? err : new Error(String(err)));
    });
  }

  push(text: string): boolean {
    this.pending.push(text);
    this.pendingChars += text.length;
    return this.pendingChars >= CHUNK_CHARS;
  }

  async flush(): Promise<void> {
    if (this.failure) throw this.failure;
    if (this.pending.length === 0) return;
    const chunk = this.pending.join('');
    this.pending = [];
    this.pendingChars = 0;
    if (!this.body.write(chunk, 'utf8')) {
      try {
        await once(this.body, 'drain');
      } catch (err) {
        throw this.failure ?? err;
      }
    }
    if (this.failure) throw this.failure;
  }

  /** The whole body sent and the upload completed: the object is under its key. */
  async finish(): Promise<void> {
    await this.flush();
    this.ended = true;
    this.body.end();
    await this.upload;
  }

  /** An object is under its key as soon as its upload completed (finish). */
  async commit(): Promise<void> {}

  /** Stop the body with an error: the upload is aborted (no object, or the earlier one, stays under the key). */
  async abort(): Promise<void> {
    if (!this.ended) this.body.destroy(new Error('the report was not written to its end'));
    await this.upload.catch(() => undefined);
  }
}

/** A journal that keeps nothing (a reader command such as `genbatch report` does not write the state). */
export const NO_JOURNAL: UploadJournal = { started: () => undefined, ended: () => undefined };

/** An OpenReport whose `where` is the report's path under the bucket's prefix (`report.json`). */
export function objectReports(out: ObjectOut, journal: UploadJournal = NO_JOURNAL): OpenReport {
  return async (rel) => new ObjectWriter(out, rel, journal);
}
