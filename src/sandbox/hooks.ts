import type { ModelSpec } from '../models/index.js';
import type { Account } from './accounts.js';
import type { FileStore } from './files.js';
import type { ResolvedOptions } from './options.js';
import type { TaskRecord, TaskResult, TaskStore } from './tasks.js';

/**
 * The hooks of a sandbox extension (registered in extensions.ts) and what they are given. Apart from the
 * registry and from SandboxContext, so that an extension (music/) depends on neither: the context calls
 * the extensions, and they see it only as an ExtensionHost.
 */

/** What an extension sees of the sandbox: the part of SandboxContext (context.ts) its hooks read. */
export interface ExtensionHost {
  readonly options: ResolvedOptions;
  /** Base URL without a trailing slash, e.g. http://127.0.0.1:8787 (set once listening). */
  readonly baseUrl: string;
  readonly tasks: TaskStore;
  readonly files: FileStore;
  now(): number;
}

/** A submit that passed catalogue validation, before it is charged. */
export interface SubmitCall {
  account: Account;
  spec: ModelSpec;
  /** Validated input, defaults applied. */
  input: Record<string, unknown>;
  body: Record<string, unknown>;
}

/** An HTTP refusal of a submit, e.g. `{status: 409, type: 'validation_error', message: ...}`. */
export interface Refusal {
  status: number;
  type: string;
  message: string;
}

export interface SandboxExtension {
  name: string;
  matches(spec: ModelSpec): boolean;
  /** After validation, before charging: refuse (404 unknown track, 403 another key's track, 409 already done...) or null. */
  check?(ctx: ExtensionHost, call: SubmitCall): Refusal | null;
  /** After the task is created and charged: record what it claims (e.g. "persona made for track X"). */
  created?(ctx: ExtensionHost, task: TaskRecord): void;
  /** When set, the task will fail with this message (e.g. timestamped lyrics asked of an instrumental track). */
  failure?(ctx: ExtensionHost, task: TaskRecord): string | null;
  /** The task's result once finished; called once, the result is cached on the task. Default: genericResult. */
  result?(ctx: ExtensionHost, task: TaskRecord): TaskResult;
  /**
   * Extra callbacks before the final one (add-instrumental's staged callbacks).
   * Each is POSTed at virtual time `at` with `body` (retries as for the final one).
   */
  stagedCallbacks?(ctx: ExtensionHost, task: TaskRecord): Array<{ at: number; body: () => unknown }>;
  /**
   * Files a staged callback has already handed out while the task runs (add-instrumental's
   * first track), served at their URLs before the task finishes; null when none yet.
   */
  earlyResult?(ctx: ExtensionHost, task: TaskRecord, now: number): TaskResult | null;
}
