import type { FastifyRequest } from 'fastify';
import type * as z from 'zod';
import type { ChatProtocol } from '../../models/chat.js';
import type { ChatPrompt, ChatReply } from './reply.js';
import type { SseWriter } from './sse.js';

/** What one protocol module provides to the shared request flow in ../chat.ts. */
export interface ProtocolHandler {
  protocol: ChatProtocol;
  /** The API key the request carries, as this protocol's clients send it; null when none. */
  key(req: FastifyRequest): string | null;
  /** The header a client should send the key in (for the 401 message). */
  keyHint: string;
  /** Read the body (and the route, for Gemini): the prompt and whether to stream, or a 400 message. */
  parse(body: Record<string, unknown>, route: RouteInfo): Parsed | ParseFailure;
  /** Message of the 404 for a model not in the catalogue. */
  unknownModel(model: string, route: RouteInfo): string;
  /** The non-streaming 200 body. */
  json(call: ChatCall): unknown;
  /** Write the whole stream; `cut` (a fault) ends it early after about half the deltas. */
  stream(call: ChatCall, sse: SseWriter, cut: StreamCut | null): void;
  /** Gemini events end with CRLF CRLF. */
  crlf?: boolean;
}

/** What the route knows before the body is read (Gemini: model and stream come from the URL). */
export interface RouteInfo {
  model?: string;
  stream?: boolean;
  /** Gemini :streamGenerateContent without alt=sse: one JSON array of the stream's chunks. */
  jsonArray?: boolean;
  version?: string;
  method?: string;
}

export interface Parsed {
  prompt: ChatPrompt;
  stream: boolean;
}

export interface ParseFailure {
  error: string;
  param?: string;
}

export interface ChatCall {
  /** Response id, with the protocol's prefix (chatcmpl-, resp_, msg_, or bare for Gemini). */
  id: string;
  /** A second id (the Responses output message item). */
  itemId: string;
  /** Unix seconds, from the sandbox's virtual clock. */
  created: number;
  model: string;
  reply: ChatReply;
  body: Record<string, unknown>;
  route: RouteInfo;
}

/** How a faulted stream ends: the protocol's error event (500-after, 502-after) or a cut connection (drop-after). */
export type StreamCut = { kind: 'error'; status: number; message: string } | { kind: 'drop' };

/** How many deltas go out before a cut: about half, at least one when there are any. */
export function cutPoint(deltas: number): number {
  return deltas === 0 ? 0 : Math.max(1, Math.floor(deltas / 2));
}

/** The first zod issue as `path: message`. */
export function firstIssue(error: z.ZodError): ParseFailure {
  const iss = error.issues[0];
  if (!iss) return { error: 'body: is not valid' };
  const path = iss.path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('').replace(/^\./, '');
  const param = iss.path.length > 0 ? path : undefined;
  return param === undefined ? { error: `body: ${iss.message}` } : { error: `${path}: ${iss.message}`, param };
}

export function bearer(req: FastifyRequest): string | null {
  const h = header(req, 'authorization');
  if (!h) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
  return m?.[1] ?? null;
}

export function header(req: FastifyRequest, name: string): string | null {
  const v = req.headers[name];
  const s = Array.isArray(v) ? v[0] : v;
  return s === undefined || s === '' ? null : s;
}
