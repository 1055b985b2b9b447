import * as z from 'zod';
import { contentText } from './reply.js';
import { bearer, cutPoint, firstIssue, header, type ChatCall, type ProtocolHandler, type RouteInfo, type StreamCut } from './protocol.js';
import { midStreamError } from './errors.js';

/**
 * Gemini native: POST /{v1,v1beta,v1alpha}/models/<vendor>/<model>:generateContent
 * and :streamGenerateContent?alt=sse. The model id keeps its slash (the SDK does
 * not encode it); the path is matched greedily up to the last colon and the id
 * is URL-decoded. Key: x-goog-api-key, `?key=`, or Authorization: Bearer.
 * Stream: data-only events, each a whole GenerateContentResponse holding only
 * the new text; the last one carries finishReason and the full usageMetadata;
 * events end with CRLF CRLF; the connection closes. Mid-stream fault: a
 * `data: {"error":{code,message,status}}` event (the SDK throws ApiError).
 * :streamGenerateContent without alt=sse answers one JSON array of the same
 * chunks (choice: Google streams that array; the sandbox sends it at once).
 */

const PATH = /^\/(v1|v1beta|v1alpha)\/models\/(.+):([A-Za-z]+)$/;
export const GEMINI_METHODS = ['generateContent', 'streamGenerateContent'] as const;

/** Version, model id and method of a Gemini URL; null when the path is not of that form. */
export function parseGeminiPath(url: string): RouteInfo | null {
  const path = url.split('?')[0] ?? '';
  const m = PATH.exec(path);
  if (!m) return null;
  let model = m[2] ?? '';
  try {
    model = decodeURIComponent(model);
  } catch {
    return null;
  }
  const method = m[3] ?? '';
  const streaming = method === 'streamGenerateContent';
  const sse = new URLSearchParams(url.split('?')[1] ?? '').get('alt') === 'sse';
  return { version: m[1] ?? 'v1beta', model, method, stream: streaming && sse, jsonArray: streaming && !sse };
}

const parts = z.array(z.looseObject({ text: z.string({ error: 'must be a string' }).optional() }, { error: 'must be an object such as {"text": "..."}' }), { error: 'must be an array of parts' });

const body = z.looseObject({
  contents: z
    .array(z.looseObject({ role: z.enum(['user', 'model'], { error: 'must be "user" or "model"' }).optional(), parts }, { error: 'must be an object with parts' }), {
      error: 'is required (an array of {role, parts})',
    })
    .min(1, { error: 'must hold at least one content' }),
  systemInstruction: z.union([z.string(), z.looseObject({ parts })], { error: 'must be a Content {parts}' }).nullish(),
  generationConfig: z
    .looseObject({
      maxOutputTokens: z.number({ error: 'must be a positive integer' }).int({ error: 'must be a positive integer' }).positive({ error: 'must be a positive integer' }).nullish(),
    }, { error: 'must be an object' })
    .nullish(),
});

function usage(call: ChatCall) {
  const r = call.reply;
  return { promptTokenCount: r.promptTokens, candidatesTokenCount: r.completionTokens, totalTokenCount: r.promptTokens + r.completionTokens };
}

function finish(call: ChatCall): string {
  return call.reply.truncated ? 'MAX_TOKENS' : 'STOP';
}

function response(call: ChatCall, text: string, finishReason: string | null, usageMetadata: Record<string, number>) {
  const candidate: Record<string, unknown> = { content: { parts: [{ text }], role: 'model' } };
  if (finishReason) candidate.finishReason = finishReason;
  candidate.index = 0;
  return { candidates: [candidate], usageMetadata, modelVersion: call.model, responseId: call.id };
}

/** The stream's chunks: one per delta, only the new text; the last with finishReason and the full usage (none of those when cut). */
function chunks(call: ChatCall, cut: StreamCut | null): unknown[] {
  const deltas = call.reply.deltas.length > 0 ? call.reply.deltas : [''];
  const running = { promptTokenCount: call.reply.promptTokens, totalTokenCount: call.reply.promptTokens };
  const last = deltas.length - 1;
  const stopAt = cut ? Math.min(cutPoint(call.reply.deltas.length), last) : deltas.length;
  const out: unknown[] = [];
  for (let i = 0; i < stopAt; i++) {
    out.push(i === last ? response(call, deltas[i] ?? '', finish(call), usage(call)) : response(call, deltas[i] ?? '', null, running));
  }
  return out;
}

export const gemini: ProtocolHandler = {
  protocol: 'gemini',
  keyHint: 'x-goog-api-key: <API_KEY>',
  crlf: true,
  key(req) {
    const q = new URL(req.url, 'http://sandbox').searchParams.get('key');
    return header(req, 'x-goog-api-key') ?? (q === null || q === '' ? null : q) ?? bearer(req);
  },

  parse(raw, route) {
    const p = body.safeParse(raw);
    if (!p.success) return firstIssue(p.error);
    const b = p.data;
    const sys = b.systemInstruction;
    const system = sys == null ? [] : [typeof sys === 'string' ? sys : contentText(sys.parts)];
    const texts = [...system, ...b.contents.map((c) => contentText(c.parts))];
    const lastUser = [...b.contents].reverse().find((c) => c.role === undefined || c.role === 'user');
    return {
      prompt: { model: route.model ?? '', texts, lastUser: lastUser ? contentText(lastUser.parts) : '', maxTokens: b.generationConfig?.maxOutputTokens ?? null },
      stream: route.stream === true,
    };
  },

  unknownModel: (model, route) =>
    `models/${model} is not found for API version ${route.version ?? 'v1beta'}, or is not supported for ${route.method ?? 'generateContent'}.`,

  json(call) {
    if (call.route.jsonArray === true) return chunks(call, null);
    return response(call, call.reply.text, finish(call), usage(call));
  },

  stream(call, sse, cut) {
    for (const chunk of chunks(call, cut)) sse.send(chunk);
    if (cut) {
      if (cut.kind === 'drop') return sse.cut();
      sse.send(midStreamError('gemini', cut.status, cut.message));
    }
    sse.end();
  },
};
