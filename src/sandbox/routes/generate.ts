import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { checkSubmit, findModel, type ModelSpec } from '../../models/index.js';
import { isoNoZone } from '../clock.js';
import type { SandboxContext } from '../context.js';
import { extensionFor } from '../extensions.js';
import { clip } from '../framework.js';
import { authenticate, authMessage, drop, faultOf, isObject, sendError, type ErrorStyle } from '../http.js';
import { callbackUrlProblem } from '../../lib/address.js';
import { Rng, mixSeed } from '../rng.js';
import { bannedMatcher, fileFormatProblem, moderationHit, outputsAsked, priceOf } from '../submit.js';
import { planTask, startsRunning, type TaskRecord } from '../tasks.js';

/**
 * POST /api/generate/submit, GET /api/generate/status/:task_id,
 * GET /api/generate/detail/music?task_id=.
 */

/** Models whose documented inputs include a callback_url (the contract's music table: replace-section). */
const INPUT_CALLBACK_MODELS = new Set(['replace-section']);

/** Families whose validation and authentication failures answer `{detail}` (the contract shows it for dream-5.0-lite). */
const DETAIL_STYLE_FAMILIES = new Set(['dream-5.0-lite']);

/**
 * Largest submit body, 1 MiB (sandbox choice: the contract shows no limit). Prompts are far
 * shorter (the catalogue caps each string) and images travel as URLs (upload them first);
 * a larger body is 413 content_too_long_error.
 */
export const SUBMIT_BODY_LIMIT = 1024 * 1024;

export const FAILURE_MESSAGE = 'generation failed: the model returned an error (sandbox failure rate)';
export const POLICY_MESSAGE = 'content policy violation: the generated output was flagged and withheld';

/** The error style of a submit: `{detail}` for the families that show it, else `{code, error}`. */
export function submitStyle(body: unknown): ErrorStyle {
  const spec = isObject(body) && typeof body.model === 'string' ? findModel(body.model) : undefined;
  return spec && DETAIL_STYLE_FAMILIES.has(spec.family) ? 'detail' : 'error';
}

export function generateRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const banned = bannedMatcher(ctx.options.bannedWords);
  const policy = bannedMatcher(ctx.options.policyWords);
  const failing = bannedMatcher(ctx.options.failWords);

  app.post('/api/generate/submit', { config: { endpoint: 'submit' }, bodyLimit: SUBMIT_BODY_LIMIT }, async (req, reply) => {
    const body: unknown = req.body;
    const style = submitStyle(body);
    const account = authenticate(ctx, req);
    if (!account) return sendError(reply, 401, authMessage(req), style);
    if (!isObject(body)) return sendError(reply, 400, 'body: must be a JSON object {model, input, callback_url?}', style);

    const check = checkSubmit(body);
    if (check.issues.length > 0 || !check.spec || !check.input) {
      const tooLong = check.issues.length > 0 && check.issues.every((i) => i.type === 'content_too_long_error');
      const message = check.issues.map((i) => `${i.path}: ${i.message}`).join('; ');
      return sendError(reply, 400, message, style, tooLong ? 'content_too_long_error' : 'validation_error');
    }
    const spec: ModelSpec = check.spec;
    const input = check.input;
    const format = fileFormatProblem(spec, input);
    if (format) return sendError(reply, 400, format, style, 'file_format_error');
    const flagged = moderationHit(input, banned);
    if (flagged) return sendError(reply, 400, `${flagged}: the content was flagged by content moderation`, style, 'content_moderation_error');
    // replace-section takes its callback_url inside `input` (the contract's workflow table); the root one wins.
    // Models with open inputs pass an input.callback_url upstream untouched, as any other field.
    const inner = INPUT_CALLBACK_MODELS.has(spec.id) && typeof body.callback_url !== 'string' && typeof input.callback_url === 'string';
    const callbackUrl = typeof body.callback_url === 'string' ? body.callback_url : inner ? (input.callback_url as string) : null;
    if (callbackUrl !== null) {
      const problem = callbackUrlProblem(callbackUrl, ctx.options.allowLoopback);
      if (problem) return sendError(reply, 400, `${inner ? 'input.' : ''}callback_url: ${problem}`, style);
    }
    const ext = extensionFor(spec);
    const refusal = ext?.check?.(ctx, { account, spec, input, body }) ?? null;
    if (refusal) return sendError(reply, refusal.status, refusal.message, style, refusal.type);

    const asked = outputsAsked(spec, input);
    const credits = priceOf(spec, input, asked) * ctx.options.priceFactor;
    const now = ctx.now();
    if (!account.charge(credits, now)) {
      return sendError(reply, 402, `insufficient credits: this task costs ${credits} credits, the balance is ${account.balance(now)}`, style);
    }
    const task = createTask(ctx, { account, spec, input, callbackUrl, credits, asked, now, policyHit: moderationHit(input, policy) !== null, failHit: moderationHit(input, failing) !== null });

    const fault = faultOf(req);
    if (fault?.kind === '500-after') return sendError(reply, 500, 'internal error', style);
    if (fault?.kind === '502-after') return sendError(reply, 502, 'upstream service error', style);
    if (fault?.kind === 'drop-after') return drop(req, reply);
    return {
      code: 200,
      data: { task_id: task.id, status: startsRunning(spec) ? 'running' : 'not_started', created_time: isoNoZone(task.createdAt) },
    };
  });

  app.get<{ Params: { task_id: string } }>('/api/generate/status/:task_id', { config: { endpoint: 'status' } }, async (req, reply) => {
    const task = ownTask(ctx, req, reply, req.params.task_id);
    if (!task) return reply;
    return { code: 200, data: ctx.taskData(task) };
  });

  app.get<{ Querystring: { task_id?: string | string[] } }>('/api/generate/detail/music', { config: { endpoint: 'detail' } }, async (req, reply) => {
    const id = req.query.task_id;
    if (Array.isArray(id)) {
      if (!authenticate(ctx, req)) return sendError(reply, 401, authMessage(req), 'detail');
      return sendError(reply, 400, `task_id: must be a single value (got ${id.length})`, 'detail');
    }
    if (typeof id !== 'string' || id === '') {
      if (!authenticate(ctx, req)) return sendError(reply, 401, authMessage(req), 'detail');
      return sendError(reply, 400, 'task_id: is required (query parameter)', 'detail');
    }
    const task = ownTask(ctx, req, reply, id);
    if (!task) return reply;
    if (task.spec.resultEndpoint !== 'music') {
      return sendError(reply, 404, `task ${clip(id)} is not a music task; read it at /api/generate/status/${clip(id)}`, 'detail');
    }
    return { code: 200, data: ctx.taskData(task) };
  });
}

/** The task if the request's key owns it; otherwise sends 401, 404 or 403 (as `{detail}`) and returns null. */
function ownTask(ctx: SandboxContext, req: FastifyRequest, reply: FastifyReply, id: string): TaskRecord | null {
  const account = authenticate(ctx, req);
  if (!account) {
    sendError(reply, 401, authMessage(req), 'detail');
    return null;
  }
  const task = ctx.tasks.get(id);
  if (!task) {
    sendError(reply, 404, `task ${clip(id)} not found`, 'detail');
    return null;
  }
  if (task.account !== account) {
    sendError(reply, 403, `task ${clip(id)} belongs to another user`, 'detail');
    return null;
  }
  return task;
}

interface NewTask {
  account: TaskRecord['account'];
  spec: ModelSpec;
  input: Record<string, unknown>;
  callbackUrl: string | null;
  credits: number;
  asked: number;
  now: number;
  /** The input holds a policy word: the task fails with POLICY_MESSAGE. */
  policyHit?: boolean;
  /** The input holds a fail word: the task fails with FAILURE_MESSAGE (a failure a retry may fix). */
  failHit?: boolean;
}

/** Create, store and (when asked) schedule callbacks for a charged task. */
export function createTask(ctx: SandboxContext, n: NewTask): TaskRecord {
  const seq = ctx.tasks.nextSeq();
  const seed = mixSeed(ctx.options.seed, seq);
  const rng = new Rng(seed);
  const id = ctx.options.seeded ? rng.hex(32) : randomBytes(16).toString('hex');
  const plan = planTask(n.spec, n.asked, n.now, rng, ctx.options);
  const task: TaskRecord = {
    id,
    seq,
    account: n.account,
    spec: n.spec,
    input: n.input,
    callbackUrl: n.callbackUrl,
    createdAt: n.now,
    startAt: plan.startAt,
    endAt: plan.endAt,
    runEndAt: plan.runEndAt,
    errorMessage: n.policyHit ? POLICY_MESSAGE : n.failHit || plan.fails ? FAILURE_MESSAGE : null,
    seed,
    charged: n.credits,
    asked: n.asked,
    delivered: plan.delivered,
    result: null,
    callbackAttempts: 0,
    callbackDelivered: false,
    ext: null,
  };
  const ext = extensionFor(n.spec);
  const forced = ext?.failure?.(ctx, task) ?? null;
  if (forced) task.errorMessage = forced;
  ctx.tasks.add(task);
  ctx.stats.taskCreated(n.account.hash);
  if (task.errorMessage !== null) n.account.refundAt(task.endAt, n.credits);
  else if (task.delivered < task.asked) n.account.refundAt(task.endAt, (n.credits * (task.asked - task.delivered)) / task.asked);
  if (task.callbackUrl) {
    for (const staged of ext?.stagedCallbacks?.(ctx, task) ?? []) ctx.callbacks.schedule(task, staged.at, staged.body, false);
    ctx.callbacks.schedule(task, task.endAt, () => ({ code: 200, data: ctx.taskData(task, Math.max(ctx.now(), task.endAt), true) }));
  }
  ext?.created?.(ctx, task);
  return task;
}
