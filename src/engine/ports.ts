/**
 * What the engine needs from the service client and the downloader, as small
 * interfaces. src/api/run.ts wires the real ServiceClient and
 * downloadFile; retries live in the client (one retry layer), never here.
 */

import type { ChatAnswer, ChatRequest } from '../client/chat.js';
import type { ReleaseUploadSlot } from '../store/index.js';

export type TaskStatus = 'not_started' | 'running' | 'finished' | 'failed';

export interface TaskView {
  task_id: string;
  status: TaskStatus;
  files: ReadonlyArray<Record<string, unknown>>;
  progress?: number | null | undefined;
  error_message: string | null;
}

export interface SubmitBody {
  model: string;
  input: Record<string, unknown>;
  callback_url?: string;
}

/** What every upload call is given. */
export interface UploadCall {
  signal?: AbortSignal;
  /** The store's shared upload window (WorkStore.acquireUploadSlot): a slot taken for every try, ended with its outcome. */
  slot?: (signal?: AbortSignal) => Promise<ReleaseUploadSlot>;
}

export interface ServicePort {
  /** `signal`: an abort before the request was sent throws the signal's reason; after it was sent, AmbiguousSubmitError. */
  submit(body: SubmitBody, signal?: AbortSignal): Promise<{ task_id: string }>;
  status(taskId: string, signal?: AbortSignal): Promise<TaskView>;
  musicDetail(taskId: string, signal?: AbortSignal): Promise<TaskView>;
  balance(): Promise<number>;
  /** `fileName`: sent as `file_name` when given (the engine sends none: the service then makes a unique name). */
  uploadStream(file: string, opts: { fileName?: string } & UploadCall): Promise<{ file_url: string }>;
  /** A Data URL (`data:<mime>;base64,...`) through the base64 upload endpoint. */
  uploadBase64(dataUrl: string, opts: UploadCall): Promise<{ file_url: string }>;
  /** A remote http(s) URL fetched by the service (URL upload endpoint), for jobs with `rehost: true`; absent: such jobs fail. */
  uploadUrl?(url: string, opts: UploadCall): Promise<{ file_url: string }>;
  /** One chat call through its protocol, retried by the client (src/client/chat.ts); absent: chat jobs fail. */
  chat?(req: ChatRequest, opts: { signal?: AbortSignal; onTry?: (tryNumber: number) => void }): Promise<ChatAnswer>;
}

export interface DownloadResult {
  path: string;
  size: number;
  sha256: string;
  contentType: string | null;
}

export interface DownloadPort {
  /** `deferDirSync`: the folder is not fsynced after the rename; the caller calls syncDir once before recording the files. */
  downloadFile(opts: { url: string; dir: string; name: string; expectedSize?: number; signal?: AbortSignal; dirExists?: boolean; deferDirSync?: boolean }): Promise<DownloadResult>;
  /** fsync a folder (names renamed into it survive a power loss). */
  syncDir(dir: string): Promise<void>;
  /** True when the error says the file is gone for good (404/410 past its validity). */
  isGone(err: unknown): boolean;
  /** Remove leftover temporary files in a folder. */
  cleanupPartials(dir: string): Promise<unknown> | unknown;
  /** A server-sent name made safe for the local disk. */
  sanitizeName(name: string): string;
  /** Set with `--out s3://bucket/prefix`: results go to the bucket (fetch/fetch-bucket.ts), never to the disk. */
  bucket?: BucketPort;
}

/** A multipart upload in flight, as the bucket's journal records it (its temporary key and UploadId). */
export interface UploadRecord {
  key: string;
  uploadId: string;
}

/** Where the uploads in flight are recorded (the state file), so a later run can clear what a killed one left. */
export interface UploadJournal {
  /** Awaited before the upload's first part is sent. */
  started(u: UploadRecord): void | Promise<void>;
  ended(key: string): void | Promise<void>;
}

/**
 * Results in object storage (src/storage/, wired in src/api/run.ts). Paths are relative to the prefix and
 * follow the disk layout (`<job folder>/<name>`). Nothing is replaced that is not this job's result.json:
 * a name holding other content gets a numbered name, as on disk.
 */
export interface BucketPort {
  /** `s3://bucket/prefix`, for messages. */
  where: string;
  /** Streams `url` into the bucket (checked, hashed, sha256 in the metadata), retried as a download is. */
  /** `beforeWrite`: called with the final path, size, sha256 and content type before the object appears under that path. */
  fetchFile(o: {
    url: string;
    folder: string;
    name: string;
    expectedSize?: number;
    signal?: AbortSignal;
    journal: UploadJournal;
    beforeWrite?: (got: { path: string; size: number; sha256: string; contentType: string | null }) => Promise<void>;
  }): Promise<{ path: string; size: number; sha256: string; contentType: string | null }>;
  /** A small text result at `<folder>/<name>` (or a numbered name), never replacing other content. */
  putText(folder: string, name: string, text: string, o?: { signal?: AbortSignal }): Promise<{ path: string; size: number; sha256: string }>;
  /** `<folder>/result.json`: replaces this job's own; one that is not (another job id) is kept in previous-<n>/ first. */
  putResult(folder: string, jobId: string, text: string): Promise<void>;
  /** True when the bucket holds `path` with this size and sha256, as far as it proves it (src/storage/proof.ts; the bytes read back where it gives no checksum). */
  holds(path: string, size: number, sha256: string): Promise<boolean>;
  /** Clears the uploads an earlier run left (aborted, temporary objects deleted); returns how many. */
  abortStale(pending: readonly UploadRecord[], journal: UploadJournal): Promise<number>;
  /** Moves a job's earlier result (everything in its folder but previous-<n>/) to `<folder>/previous-<n>/`; returns that path or null. */
  moveAside(folder: string): Promise<string | null>;
}
