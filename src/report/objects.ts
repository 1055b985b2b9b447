/**
 * Reports written as objects of a bucket (`--out s3://bucket/prefix`): each report streams into one
 * ObjectOut.putStream with `replace` (src/storage: one PutObject when the body is at most PART_SIZE, else a
 * multipart upload to a temporary key, copied to the report's key once complete), so a report's key only
 * ever holds a whole report, with its sha256 in the metadata; a failure leaves the earlier report there.
 */
import { PassThrough } from 'node:stream';
import { BodyCheck } from '../download/check.js';
import { StreamWriter } from './atomic.js';
import type { ObjectOut, UploadJournal } from '../storage/index.js';
import type { OpenReport, ReportWriter } from './sink.js';

/** The body's buffer between the writers and the upload. */
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
  private readonly writer = new StreamWriter(this.body);
  private readonly upload: Promise<unknown>;
  private ended = false;

  constructor(out: ObjectOut, rel: string, journal: UploadJournal) {
    const check = new BodyCheck({ where: out.keyOf(rel), declared: null, expected: null, maxBytes: Number.MAX_SAFE_INTEGER });
    this.upload = out.putStream(rel, this.body, { check, contentType: reportContentType(rel), journal, replace: true });
    // Nothing reads the body after a failed upload: the error ends the writer's wait for 'drain' and is thrown by its next call.
    this.upload.catch((err: unknown) => this.body.destroy(err instanceof Error ? err : new Error(String(err))));
  }

  push(text: string): boolean {
    return this.writer.push(text);
  }

  flush(): Promise<void> {
    return this.writer.flush();
  }

  /** The whole body sent and the upload completed: the object is under its key. */
  async finish(): Promise<void> {
    this.ended = true;
    await Promise.all([this.writer.end(), this.upload]);
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
