/**
 * The multipart uploads in flight of an S3 client, each reported to its journal (the local state) with its
 * temporary key and UploadId as soon as CreateMultipartUpload answers, so a run killed midway leaves the
 * list for the next run to clear (see ObjectOut.abortStale).
 */
import type { S3Client } from '@aws-sdk/client-s3';

/** A multipart upload (or its temporary object) that may be left in the bucket. */
export interface PendingUpload {
  /** The temporary key (full key in the bucket). */
  key: string;
  /** '' while CreateMultipartUpload has not answered. */
  uploadId: string;
}

/** Where the uploads in flight are recorded (the local state file), so a resumed run can clear them. */
export interface UploadJournal {
  /** A multipart upload began: called (and awaited) before any part is sent. Must be durable when it settles. */
  started(u: PendingUpload): void | Promise<void>;
  /** The upload and its temporary object are gone (moved to the final key, or aborted). */
  ended(key: string): void | Promise<void>;
}

/** The journals of the multipart uploads in flight, by temporary key, per client (one middleware per client). */
const journalsOf = new WeakMap<S3Client, Map<string, UploadJournal>>();

/**
 * The UploadId is handed to the upload's journal as soon as CreateMultipartUpload answers: lib-storage sends
 * no part before that call returns, so the record is made (and awaited) before any part is sent.
 */
export function journalsFor(client: S3Client): Map<string, UploadJournal> {
  let journals = journalsOf.get(client);
  if (journals) return journals;
  const map = (journals = new Map<string, UploadJournal>());
  journalsOf.set(client, map);
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const out = await next(args);
      if (context.commandName === 'CreateMultipartUploadCommand') {
        const key = (args.input as { Key?: string }).Key;
        const uploadId = (out.output as { UploadId?: string }).UploadId;
        const journal = key !== undefined ? map.get(key) : undefined;
        if (journal && key !== undefined && uploadId) await journal.started({ key, uploadId });
      }
      return out;
    },
    { step: 'initialize', name: 'genbatchUploadJournal' },
  );
  return journals;
}

