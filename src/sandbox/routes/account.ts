import type { FastifyInstance } from 'fastify';
import type { SandboxContext } from '../context.js';
import { authenticate, authMessage, sendError } from '../http.js';

/** GET /api/user/balance -> `{code: 200, data: {balance: <credits, number>}}` (the body is our choice: the contract does not show it). */
export function accountRoutes(app: FastifyInstance, ctx: SandboxContext): void {
  app.get('/api/user/balance', { config: { endpoint: 'balance' } }, async (req, reply) => {
    const account = authenticate(ctx, req);
    if (!account) return sendError(reply, 401, authMessage(req));
    return { code: 200, data: { balance: account.balance(ctx.now()) } };
  });
}
