import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isoNoZone } from '../clock.js';
import type { SandboxContext } from '../context.js';
import { FAULT_ENDPOINTS, type FaultEndpoint, type ScriptStep } from '../faults.js';
import { isObject, sendError } from '../http.js';
import { isLoopbackHost } from '../../lib/address.js';
import { stateAt, type TaskState } from '../tasks.js';

/**
 * Admin endpoints under /__sandbox/ (sandbox only; no API key, but the admin token in the
 * X-Sandbox-Admin-Token header). The two that show secrets (callback URLs with their path tokens,
 * every key's tasks and counters) need it always; the others, which show none, answer without it
 * when both the sandbox's host and the caller are loopback:
 *   GET  /__sandbox/clock                 virtual clock                      (open on loopback)
 *   POST /__sandbox/clock {advance_s: N}  move it forward N seconds          (open on loopback)
 *   POST /__sandbox/faults {endpoint, steps: [...]}  script the next outcomes (open on loopback)
 *   GET  /__sandbox/stats                 counters, per key too (see statsSnapshot)   token always
 *   GET  /__sandbox/tasks[?key=<hash>]    every task: id, model, key hash, state, callback   token always
 */

export function clockSnapshot(ctx: SandboxContext) {
  const now = ctx.now();
  return { now: isoNoZone(now), now_ms: Math.floor(now), advanced_s: ctx.clock.advancedSeconds, time_scale: ctx.options.timeScale };
}

export function statsSnapshot(ctx: SandboxContext) {
  const now = ctx.now();
  const byState: Record<TaskState, number> = { not_started: 0, running: 0, finished: 0, failed: 0 };
  for (const t of ctx.tasks.values()) byState[stateAt(t, now)]++;
  return {
    requests: { ...ctx.stats.requests },
    requests_by_key: { ...ctx.stats.requestsByKey },
    tasks_created_by_key: { ...ctx.stats.tasksByKey },
    tasks_total: ctx.tasks.size,
    tasks_by_state: byState,
    uploads: { ...ctx.stats.uploads },
    callbacks: { ...ctx.stats.callbacks, pending: ctx.scheduler.pending },
    connections: { ...ctx.stats.connections },
    faults_injected: { ...ctx.faults.injected },
    clock: clockSnapshot(ctx),
    memory: { rss: process.memoryUsage().rss },
  };
}

export type SandboxStats = ReturnType<typeof statsSnapshot>;

export const ADMIN_TOKEN_HEADER = 'x-sandbox-admin-token';

/**
 * Whether an admin request may pass: it carries the admin token, or (for an endpoint that shows no
 * secret) the sandbox listens on a loopback host and the request comes from a loopback address,
 * addressed to a loopback name (Host: 127.0.0.1, localhost, [::1]; not a rebound web name).
 * Loopback is not one user: another user of the machine, or any local process, reaches it too, so
 * the endpoints that list callback URLs (their tokens let anyone forge callbacks) or other keys'
 * data (`secret` in the route config) need the token even there. Clock and faults move for every
 * key, so on any other host nothing is open.
 */
export function adminAllowed(ctx: SandboxContext, req: FastifyRequest): boolean {
  const given = req.headers[ADMIN_TOKEN_HEADER];
  if (typeof given === 'string') {
    const a = Buffer.from(given);
    const b = Buffer.from(ctx.options.adminToken);
    return a.length === b.length && timingSafeEqual(a, b);
  }
  if (req.routeOptions.config.secret === true) return false;
  return isLoopbackHost(ctx.options.host) && isLoopbackHost(req.socket.remoteAddress ?? '') && isLoopbackHost(hostOf(req.headers.host));
}

/**
 * The host name a request was addressed to (its Host header), '' when missing or unreadable. A web
 * page the user opens can reach a loopback sandbox through the browser with DNS rebinding (its own
 * name resolved to 127.0.0.1): the request then comes from loopback but names that page's host.
 */
function hostOf(header: string | undefined): string {
  if (header === undefined) return '';
  try {
    return new URL(`http://${header}`).hostname;
  } catch {
    return '';
  }
}

export function adminRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  const config = { endpoint: 'admin' };
  const secret = { endpoint: 'admin', secret: true };
  app.get('/__sandbox/clock', { config }, async () => clockSnapshot(ctx));

  app.post('/__sandbox/clock', { config }, async (req, reply) => {
    const body: unknown = req.body;
    const s = isObject(body) ? body.advance_s : undefined;
    if (typeof s !== 'number') return sendError(reply, 400, 'advance_s: must be a non-negative number of seconds');
    const problem = ctx.clock.advanceProblem(s);
    if (problem) return sendError(reply, 400, `advance_s: ${problem}`);
    ctx.clock.advance(s);
    return clockSnapshot(ctx);
  });

  app.get('/__sandbox/stats', { config: secret }, async () => statsSnapshot(ctx));

  app.get<{ Querystring: { key?: string } }>('/__sandbox/tasks', { config: secret }, async (req) => {
    const now = ctx.now();
    const tasks = [];
    for (const t of ctx.tasks.values()) {
      if (req.query.key && t.account.hash !== req.query.key) continue;
      tasks.push({
        task_id: t.id,
        model: t.spec.id,
        key: t.account.hash,
        state: stateAt(t, now),
        created_time: isoNoZone(t.createdAt),
        ends_at: t.endAt,
        credits: t.charged,
        callback_url: t.callbackUrl,
        callback_attempts: t.callbackAttempts,
        callback_delivered: t.callbackDelivered,
      });
    }
    return { tasks };
  });

  app.post('/__sandbox/faults', { config }, async (req, reply) => {
    const body: unknown = req.body;
    if (!isObject(body) || typeof body.endpoint !== 'string' || !Array.isArray(body.steps)) {
      return sendError(reply, 400, 'body: must be {endpoint, steps: [fault kind or "ok", ...]}');
    }
    const endpoint = body.endpoint;
    if (endpoint !== '*' && !(FAULT_ENDPOINTS as readonly string[]).includes(endpoint)) {
      return sendError(reply, 400, `endpoint: must be one of ${FAULT_ENDPOINTS.join(', ')}, *`);
    }
    try {
      ctx.faults.script(endpoint as FaultEndpoint | '*', body.steps.map(String) as ScriptStep[]);
    } catch (err) {
      return sendError(reply, 400, `steps: ${(err as Error).message}`);
    }
    return { ok: true };
  });
}
