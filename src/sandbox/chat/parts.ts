import type { IssueSink } from '../../models/common.js';

/**
 * Checks of chat message contents shared by the protocol modules: the entries of a
 * content array are objects with a string `type`, and a text part carries a string
 * `text` (OpenAI and Anthropic answer 400 otherwise). Other part kinds (images,
 * tool calls, files) are accepted as they are: the sandbox reads only text.
 */

/** Add an issue for each malformed entry of `content` (when it is an array), at `path`. */
export function checkParts(ctx: IssueSink, content: unknown, path: PropertyKey[], textTypes: readonly string[]): void {
  if (!Array.isArray(content)) return;
  content.forEach((p: unknown, i) => {
    if (typeof p !== 'object' || p === null || Array.isArray(p)) {
      ctx.addIssue({ code: 'custom', path: [...path, i], message: 'must be an object such as {"type":"text","text":"..."}' });
      return;
    }
    const part = p as Record<string, unknown>;
    if (typeof part.type !== 'string') {
      ctx.addIssue({ code: 'custom', path: [...path, i, 'type'], message: 'is required (a string naming the part type, e.g. "text")' });
      return;
    }
    if (textTypes.includes(part.type) && typeof part.text !== 'string') {
      ctx.addIssue({ code: 'custom', path: [...path, i, 'text'], message: `is required in a ${part.type} part (a string)` });
    }
  });
}

/** An issue when `value` is not one of `allowed` (a role), naming the allowed values. */
export function checkRole(ctx: IssueSink, value: unknown, path: PropertyKey[], allowed: readonly string[]): void {
  if (typeof value === 'string' && allowed.includes(value)) return;
  const got = value === undefined ? 'is required' : `${JSON.stringify(value)} is not allowed`;
  ctx.addIssue({ code: 'custom', path, message: `${got} (one of ${allowed.join(', ')})` });
}
