import type { ModelSpec } from '../models/index.js';
import type { Account } from './accounts.js';
import type { SandboxContext } from './context.js';
import type { TaskRecord, TaskResult } from './tasks.js';
import { musicExtension } from './music/index.js';

/**
 * Extension points of the sandbox core, for model families whose behaviour
 * goes beyond the generic one (music workflows: result fields, ownership
 * checks, once-per-track 409s, staged callbacks).
 *
 * To add one: write `src/sandbox/<family>/index.ts` exporting a
 * `SandboxExtension`, and add it to EXTENSIONS below. The first extension
 * whose `matches(spec)` is true handles a model; others use the generic path.
 */

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
  check?(ctx: SandboxContext, call: SubmitCall): Refusal | null;
  /** After the task is created and charged: record what it claims (e.g. "persona made for track X"). */
  created?(ctx: SandboxContext, task: TaskRecord): void;
  /** When set, the task will fail with this message (e.g. timestamped lyrics asked of an instrumental track). */
  failure?(ctx: SandboxContext, task: TaskRecord): string | null;
  /** The task's result once finished; called once, the result is cached on the task. Default: genericResult. */
  result?(ctx: SandboxContext, task: TaskRecord): TaskResult;
  /**
   * Extra callbacks before the final one (add-instrumental's staged callbacks).
   * Each is POSTed at virtual time `at` with `body` (retries as for the final one).
   */
  stagedCallbacks?(ctx: SandboxContext, task: TaskRecord): Array<{ at: number; body: () => unknown }>;
  /**
   * Files a staged callback has already handed out while the task runs (add-instrumental's
   * first track), served at their URLs before the task finishes; null when none yet.
   */
  earlyResult?(ctx: SandboxContext, task: TaskRecord, now: number): TaskResult | null;
}

/** Registered extensions, in priority order. Add yours here. */
export const EXTENSIONS: SandboxExtension[] = [musicExtension];

const cache = new Map<string, SandboxExtension | null>();

export function extensionFor(spec: ModelSpec): SandboxExtension | null {
  let ext = cache.get(spec.id);
  if (ext === undefined) {
    ext = EXTENSIONS.find((e) => e.matches(spec)) ?? null;
    cache.set(spec.id, ext);
  }
  return ext;
}
