import * as z from 'zod';
import type { FieldIssue, PriceQuote } from './types.js';

/**
 * Chat models: served through four wire protocols, not through submit. The
 * contract neutralises the model ids and gives only the four vendor groups and
 * their protocols; the ids below are the sandbox's own neutral names, held here
 * and nowhere else.
 */

export const CHAT_PROTOCOLS = ['chat-completions', 'responses', 'messages', 'gemini'] as const;
export type ChatProtocol = (typeof CHAT_PROTOCOLS)[number];

export interface ChatGroup {
  /** Vendor slug, the part before the slash. */
  vendor: string;
  /** The contract's name for the group. */
  label: string;
  protocols: readonly ChatProtocol[];
  models: ReadonlyArray<{ name: string; older?: boolean }>;
}

/** The contract's protocol-support table, with neutral sandbox ids (choice: the real ids are not shown). */
export const CHAT_GROUPS: readonly ChatGroup[] = [
  {
    vendor: 'vendora',
    label: 'first vendor family (five models, three older versions)',
    protocols: ['chat-completions', 'responses'],
    models: [{ name: 'chat-5' }, { name: 'chat-5-mini' }, { name: 'chat-4.1', older: true }, { name: 'chat-4o', older: true }, { name: 'chat-4o-mini', older: true }],
  },
  {
    vendor: 'vendorb',
    label: 'second vendor family (four models)',
    protocols: ['chat-completions', 'messages'],
    models: [{ name: 'verse-4.5' }, { name: 'verse-4.5-fast' }, { name: 'verse-4' }, { name: 'verse-4-fast' }],
  },
  {
    vendor: 'vendorc',
    label: 'third vendor family (two models)',
    protocols: ['chat-completions', 'gemini'],
    models: [{ name: 'lumen-2.5-pro' }, { name: 'lumen-2.5-flash' }],
  },
  {
    vendor: 'vendord',
    label: 'fourth vendor family (one model)',
    protocols: ['chat-completions', 'responses'],
    models: [{ name: 'nova-4' }],
  },
];

export interface ChatModel {
  /** `<vendor>/<model>`, sent as-is (also in Gemini-native URLs, slash included). */
  id: string;
  group: string;
  protocols: readonly ChatProtocol[];
  older: boolean;
}

export const CHAT_MODELS: readonly ChatModel[] = CHAT_GROUPS.flatMap((g) =>
  g.models.map((m) => ({ id: `${g.vendor}/${m.name}`, group: g.label, protocols: g.protocols, older: m.older === true })),
);

const BY_ID = new Map(CHAT_MODELS.map((m) => [m.id, m]));

export function findChatModel(id: string): ChatModel | undefined {
  return BY_ID.get(id);
}

/** Protocols of a catalogued chat model; null for an id not in the catalogue. */
export function chatProtocolsFor(id: string): readonly ChatProtocol[] | null {
  return BY_ID.get(id)?.protocols ?? null;
}

const CHAT_ID = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Any id of the form `<vendor>/<model>`: one slash, letters, digits, '.', '_', '-' (no ':' since Gemini URLs append `:generateContent`), catalogued or not. */
export function isChatModelId(id: string): boolean {
  return CHAT_ID.test(id);
}

export function isChatProtocol(p: string): p is ChatProtocol {
  return (CHAT_PROTOCOLS as readonly string[]).includes(p);
}

/** Chat prices: the contract gives none. */
export const CHAT_PRICE: PriceQuote = { credits: null, basis: 'the service gives no chat prices' };

/** Sandbox-only charge, credits per 1000 tokens (prompt plus completion). Never used by the runner's estimate. */
export const SANDBOX_CHAT_CREDITS_PER_1K_TOKENS = 0.5;

export const CHAT_ROLES = ['system', 'developer', 'user', 'assistant', 'tool'] as const;

const part = z.looseObject({ type: z.string({ error: 'must be a string naming the part type, e.g. "text"' }) }, { error: 'must be an object such as {"type":"text","text":"..."}' });

const message = z.looseObject(
  {
    role: z.enum(CHAT_ROLES, { error: (iss) => (iss.input === undefined ? `is required (one of ${CHAT_ROLES.join(', ')})` : `role ${JSON.stringify(iss.input)} is not one of ${CHAT_ROLES.join(', ')}`) }),
    content: z.union([z.string(), z.array(part)], { error: (iss) => (iss.input === undefined ? 'is required (a string or an array of parts)' : 'must be a string or an array of parts') }),
  },
  { error: 'must be an object with role and content' },
);

/**
 * `input` of a chat job: messages (required, non-empty), optional stream; every
 * other key is passed through to the wire request as a protocol option.
 * `model` belongs to the job, not to input (choice: rejected to avoid two model ids).
 */
export const chatInput = z
  .looseObject({
    messages: z
      .array(message, { error: (iss) => (iss.input === undefined ? 'is required (a non-empty array of {role, content})' : 'must be an array of {role, content}') })
      .min(1, { error: 'must hold at least one message' }),
    stream: z.boolean({ error: 'must be true or false' }).optional().describe('SSE streaming; default false'),
    model: z.never({ error: 'belongs to the job, not to input (set the job\'s model)' }).optional(),
  }, { error: 'must be an object with messages' })
  .describe('Chat input: messages [{role, content}], optional stream, other keys passed to the protocol');

export interface ChatJobCheck {
  /** The protocol to use: as given, or the model's first (chat-completions) when omitted; null when undecidable. */
  protocol: ChatProtocol | null;
  /** The parsed input when valid. */
  input: Record<string, unknown> | null;
  issues: FieldIssue[];
}

function issue(path: string, message: string): FieldIssue {
  return { path, message, type: 'validation_error' };
}

function joinPath(path: ReadonlyArray<PropertyKey>): string {
  let out = 'input';
  for (const p of path) out += typeof p === 'number' ? `[${p}]` : `.${String(p)}`;
  return out;
}

/**
 * Check a chat job. A catalogued model on a protocol its group does not serve is
 * an error naming the ones it does; an unknown `<vendor>/<model>` id is accepted
 * only with an explicit protocol.
 */
export function checkChatJob(job: { model: string; protocol?: string; input: unknown }): ChatJobCheck {
  const issues: FieldIssue[] = [];
  let protocol: ChatProtocol | null = null;
  const known = findChatModel(job.model);
  if (job.protocol !== undefined && !isChatProtocol(job.protocol)) {
    issues.push(issue('protocol', `"${job.protocol}" is not one of ${CHAT_PROTOCOLS.join(', ')}`));
  }
  const given = job.protocol !== undefined && isChatProtocol(job.protocol) ? job.protocol : null;
  if (!isChatModelId(job.model)) {
    issues.push(issue('model', `"${job.model}" is not a chat model id of the form <vendor>/<model>`));
  } else if (job.protocol !== undefined && given === null) {
    // the protocol issue is already recorded; no protocol is chosen for a job that named a wrong one
  } else if (known) {
    if (given && !known.protocols.includes(given)) {
      issues.push(issue('protocol', `${known.id} does not support ${given}; it supports ${known.protocols.join(', ')}`));
    } else {
      protocol = given ?? known.protocols[0] ?? null;
    }
  } else if (job.protocol === undefined) {
    issues.push(issue('protocol', `is required for a chat model not in the catalogue ("${job.model}"): one of ${CHAT_PROTOCOLS.join(', ')}`));
  } else {
    protocol = given;
  }

  let input: Record<string, unknown> | null = null;
  const parsed = chatInput.safeParse(job.input);
  if (parsed.success) input = parsed.data;
  else {
    for (const iss of parsed.error.issues) issues.push(issue(joinPath(iss.path), iss.message));
  }
  return { protocol, input: issues.length === 0 ? input : null, issues };
}
