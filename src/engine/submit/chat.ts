import { join, relative } from 'node:path';
import type { ChatAnswer, ChatMessage, ChatRequest } from '../../client/chat.js';
import { ApiError, BadResponseError, GenbatchError } from '../../errors.js';
import { checkChatJob, isChatProtocol, type ChatProtocol } from '../../models/chat.js';
import { nowIso, type ChatTotals, type JobPatch, type JobRow, type JobState, type MoveOptions, type Store } from '../../store/index.js';
import type { EngineEvent, StopReason } from '../events.js';
import { outputRoot, writeTextNoReplace } from '../files.js';
import { isRefusal } from './permanent.js';
import { sha256Hex } from '../results.js';
import type { StoredSpec } from '../spec.js';
import type { BucketPort } from '../ports.js';

/**
 * The chat executor: one chat job, from `pending` to `done`.
 *
 *   pending -> submitting   intent committed (fsynced, group commit) before the call;
 *                           attempts + 1
 *   submitting -> done      answer read: out/<job>/response.txt (the text) and
 *                           response.json (the JSON body, or the stream's events)
 *                           written (temp file, fsync, placed without replacing a
 *                           file already there: `response (2).txt`; same content
 *                           reused), ONE fsync of the folder, then the state, the
 *                           result {text, usage, ...} and both files in one transaction
 *   submitting -> failed    a 4xx answer (not 429, not 402) or an unusable 200 answer
 *   submitting -> pending   402 (new calls stop), retries used up on 429/5xx/network,
 *                           or the run was stopped during the call
 *
 * A chat call has no task id, so there is nothing to be uncertain about: a
 * crash mid-call leaves `submitting`, which the next run turns back into
 * `pending` (Store.recoverSubmitting) and the call is simply made again.
 * Every try counts in `attempts` (retries inside one run are added when the
 * call ends), so attempts > 1 marks a repeated call; the report sums them.
 *
 * The result kept in the store (`jobs.result`) is `{"text", "usage", ...}`:
 * a later job of a job graph reads the text there (`${{ jobs.<id>.text }}`).
 */

/** What the pipeline gives the executor. */
export interface ChatDeps {
  /** Move this job through the store (WorkStore.transition) and emit its events; false when the lease was lost. */
  move: (from: JobState, to: JobState, patch: JobPatch, o?: MoveOptions) => Promise<boolean>;
  chat: ((req: ChatRequest, opts: { signal?: AbortSignal; onTry?: (n: number) => void }) => Promise<ChatAnswer>) | undefined;
  outDir: string;
  signal: AbortSignal;
  emit: (e: EngineEvent) => void;
  stop: (reason: StopReason) => void;
  sanitizeName: (name: string) => string;
  /** fsync a folder (names renamed into it survive a power loss); once, before the answer's files are recorded. */
  syncDir: (dir: string) => Promise<void>;
  /** `--out s3://...`: the answer's files are objects under the prefix instead (same names, never replacing). */
  bucket?: BucketPort | undefined;
}

/** The result JSON of a finished chat job (`jobs.result`). */
export interface ChatResult {
  kind: 'chat';
  text: string;
  usage: { input_tokens: number; output_tokens: number };
  protocol: ChatProtocol;
  model: string;
  stream: boolean;
  /** Calls made for this answer in the run that finished it (1 unless retried). */
  calls: number;
}

export const CHAT_TEXT_FILE = 'response.txt';
export const CHAT_RAW_FILE = 'response.json';

/** The wire request of a stored chat job spec. */
export function chatRequestOf(spec: StoredSpec): ChatRequest {
  const { messages, stream, ...options } = spec.input;
  let protocol: ChatProtocol | null = spec.protocol !== undefined && isChatProtocol(spec.protocol) ? spec.protocol : null;
  protocol ??= checkChatJob({ model: spec.model, input: spec.input }).protocol;
  if (!protocol) throw new GenbatchError('GB_CHAT_PROTOCOL', `no chat protocol for ${spec.model}: set the job's protocol`);
  return { model: spec.model, protocol, messages: messages as ChatMessage[], stream: stream === true, options };
}

export async function runChatJob(row: JobRow, d: ChatDeps): Promise<void> {
  if (d.signal.aborted) return;
  const spec = JSON.parse(row.spec) as StoredSpec;
  const move = d.move;
  let req: ChatRequest;
  try {
    req = chatRequestOf(spec);
  } catch (err) {
    await move('pending', 'failed', { last_error: errorText(err) });
    return;
  }
  if (!d.chat) {
    await move('pending', 'failed', { last_error: 'this runner has no chat client' });
    return;
  }
  // Intent first, as for every job: a crash from here on leaves `submitting` (repeated by the next run).
  if (!(await move('pending', 'submitting', { attemptsInc: 1, submitted_input: JSON.stringify(spec.input), submitted_at: nowIso(), last_error: null }, { durable: true }))) return;
  let tries = 0;
  let answer: ChatAnswer;
  try {
    answer = await d.chat(req, { signal: d.signal, onTry: (n) => (tries = n) });
  } catch (err) {
    const repeats = Math.max(0, tries - 1);
    if (d.signal.aborted) {
      await move('submitting', 'pending', { attemptsInc: repeats, last_error: 'the run stopped during the chat call; the next run makes it again' });
    } else if (err instanceof ApiError && err.status === 402) {
      await move('submitting', 'pending', { attemptsInc: repeats, last_error: err.message });
      d.stop('insufficient-credits');
    } else if ((err instanceof ApiError && err.status >= 400 && err.status < 500 && err.status !== 429) || err instanceof BadResponseError) {
      await move('submitting', 'failed', { attemptsInc: repeats, last_error: err.message, finished_at: nowIso(), permanent: isRefusal(err) ? 1 : 0 });
    } else {
      // Retries used up (429, 5xx, network, a broken stream): nothing to lose, the next run calls again.
      await move('submitting', 'pending', { attemptsInc: repeats, last_error: errorText(err) });
    }
    return;
  }
  const calls = Math.max(1, tries);
  const jobDir = join(d.outDir, d.sanitizeName(row.id));
  const rawText = JSON.stringify(answer.raw, null, 2) + '\n';
  const files = [
    { idx: 0, name: CHAT_TEXT_FILE, type: 'text', content_type: 'text/plain', data: answer.text },
    { idx: 1, name: CHAT_RAW_FILE, type: 'json', content_type: 'application/json', data: rawText },
  ];
  const placed: Array<{ idx: number; path: string; size: number; sha256: string; content_type: string }> = [];
  try {
    if (d.bucket) {
      for (const f of files) {
        const p = await d.bucket.putText(d.sanitizeName(row.id), f.name, f.data);
        placed.push({ idx: f.idx, path: p.path, size: p.size, sha256: p.sha256, content_type: f.content_type });
      }
    } else {
      const root = outputRoot(d.outDir);
      const folder = d.sanitizeName(row.id);
      root.mkdirs(folder);
      // Placed like downloads and text results: a file already there under that name with other
      // content is never replaced (the answer takes `response (2).txt`); the same content is reused.
      for (const f of files) {
        const path = await writeTextNoReplace(root, folder, f.name, f.data);
        placed.push({ idx: f.idx, path: relative(d.outDir, path), size: Buffer.byteLength(f.data), sha256: sha256Hex(f.data), content_type: f.content_type });
      }
      // One folder fsync before the files are recorded as done (as fetch/fetch.ts does for downloads).
      await d.syncDir(jobDir);
    }
  } catch (err) {
    await move('submitting', 'pending', { attemptsInc: calls - 1, last_error: `could not write the answer: ${errorText(err)}` });
    return;
  }
  const result: ChatResult = { kind: 'chat', text: answer.text, usage: answer.usage, protocol: req.protocol, model: req.model, stream: req.stream, calls };
  // Durable, grouped with the other commits of this turn (SQLite: one transaction, one fsync for many jobs).
  const done = await move(
    'submitting',
    'done',
    { attemptsInc: calls - 1, result: JSON.stringify(result), finished_at: nowIso() },
    {
      durable: true,
      addFiles: files.map((f) => ({ idx: f.idx, name: f.name, url: null, type: f.type, content_type: f.content_type, expected_size: null, expires_at: null })),
      filesDone: placed,
    },
  );
  if (!done) return;
  for (const p of placed) d.emit({ type: 'file', id: row.id, path: p.path, size: p.size, sha256: p.sha256 });
}

/** Texts and usage of a chat job for the report, from its stored result. */
export function chatReportFields(result: string | null): { texts: Record<string, string>; usage: ChatResult['usage'] | null } {
  if (result === null) return { texts: {}, usage: null };
  try {
    const r = JSON.parse(result) as Partial<ChatResult>;
    return { texts: typeof r.text === 'string' ? { [CHAT_TEXT_FILE]: r.text } : {}, usage: r.usage ?? null };
  } catch {
    return { texts: {}, usage: null };
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Chat totals of the run for the report summary, or null when it has no chat jobs. */
export function chatSummary(store: Store): ChatTotals | null {
  const r = store.chatTotals();
  return r.jobs > 0 ? r : null;
}
