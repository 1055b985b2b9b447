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
}
