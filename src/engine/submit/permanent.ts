import { ApiError } from '../../errors.js';

/**
 * Permanent failures: the service refused the job's input (issue #26 item 3), so sending the same spec again
 * cannot help. Such a job is recorded `failed` with `permanent: 1`; `run --redo failed` passes it over (it is
 * named by `--redo failed-permanent` or by its id with `--only`), and a change of its spec sends it again.
 *
 * What counts (service-interface.md "Errors"): a 400 answer to the submit (validation_error,
 * content_moderation_error, content_too_long_error, file_format_error, or a `{detail}` validation body), and a
 * task that failed with a content-policy text in `error_message`. Everything else (5xx, timeouts, a generation
 * error, a result we could not use) may succeed on a retry.
 */

/** The error types of a 400 that refuse the input itself. */
const REFUSAL_TYPES = new Set(['validation_error', 'content_moderation_error', 'content_too_long_error', 'file_format_error']);

/** An error_message of a failed task that says the content was refused (moderation, a policy, safety filters). */
const REFUSAL_TEXT = /\b(content[ -]?polic(y|ies)|polic(y|ies) violation|moderat(ed|ion)|flagged|nsfw|safety (filter|system|check)|prohibited content|sensitive content)\b/i;

/** True when a submit's error answer refuses the job's input (a 400, or a refusal type on any 4xx). */
export function isRefusal(err: unknown): boolean {
  if (!(err instanceof ApiError)) return false;
  return err.status === 400 || (err.type !== null && REFUSAL_TYPES.has(err.type));
}

/** True when a failed task's error_message says its content was refused. */
export function isRefusedTask(message: string | null | undefined): boolean {
  return typeof message === 'string' && REFUSAL_TEXT.test(message);
}

