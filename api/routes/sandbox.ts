/**
 * Sandbox endpoints (D10), present only while the sandbox carrier is on: inject inbound traffic,
 * and read back what the sandbox carried. Both take the account's key; an account sees only its
 * own traffic.
 */
import { Router, type ErrorRequestHandler, type Request } from 'express';
import Joi from 'joi';
import type { AppContext } from '../context.js';
import { readJsonBody, BodyError } from '../middleware/body.js';
import { headerKey, keyFromRequest } from '../middleware/api-key.js';
import { validate } from '../../shared/validation.js';
import { AppError, unauthorized } from '../../shared/errors.js';
import { knownError } from '../middleware/errors.js';
import { ingestInbound } from '../../shared/engine/inbound.js';
import { FAMILIES, type Family } from '../../shared/channels/index.js';
import { requestLogger } from '../middleware/request-log.js';

const inboundSchema = Joi.object<{ gateway: Family; sender: string; recipient: string; body: string }>({
  gateway: Joi.string().valid(...FAMILIES).required(),
  sender: Joi.string().min(1).max(64).required(),
  recipient: Joi.string().min(1).max(64).required(),
  body: Joi.string().min(1).max(4000).required(),
});
const readBackSchema = Joi.object<{ phone_number: string; limit: number }>({
  phone_number: Joi.string().pattern(/^\+?\d{1,20}$/).required(),
  limit: Joi.number().integer().min(1).max(100).default(20),
});

export function sandboxRouter(ctx: AppContext): Router {
  const router = Router();
  const auth = async (req: Request) => {
    const key = await keyFromRequest(ctx.db, headerKey(req), 'send');
    if (!key) {
      throw unauthorized('Missing or invalid API key');
    }
    return key;
  };

  router.post('/sandbox/inbound', async (req, res) => {
    const key = await auth(req);
    const input = validate(inboundSchema, await readJsonBody(req));
    const outcome = await ingestInbound(ctx.db, { ...input, at: Date.now(), accountId: key.accountId });
    if (outcome.kind === 'repeat') {
      throw new Error('an injection without a carrier id was taken for a repeat'); // it has no carrierRef
    }
    res.json({
      success: true, event: outcome.kind, inbound_id: outcome.inboundId,
      // An opt-out or opt-in keyword changed the account's suppression list (issue 27).
      ...(outcome.kind !== 'unowned' && outcome.keyword !== null && { keyword: outcome.keyword }),
    });
  });

  router.get('/sandbox/messages', async (req, res) => {
    const key = await auth(req);
    const query = validate(readBackSchema, { ...req.query }, { convert: true });
    const { rows } = await ctx.db.query<{
      recipient_id: string; gateway: string; sender: string; phone_number: string; body: string; parts: number;
      encoding: string | null; created_at: Date;
    }>(
      `SELECT recipient_id, gateway, sender, phone_number, body, parts, encoding, created_at FROM sandbox_messages
        WHERE account_id = $1 AND phone_number = $2 ORDER BY id DESC LIMIT $3`,
      [key.accountId, query.phone_number.replace(/^\+/, ''), query.limit],
    );
    res.json({ messages: rows.map((r) => ({ ...r, created_at: r.created_at.toISOString() })) });
  });

  router.use(((caught, req, res, _next) => {
    const err = knownError(caught, req, res, ctx.logger);
    if (err instanceof AppError && (err.status < 500 || err.status === 503)) {
      res.status(err.status).json({ success: false, message: err.message });
      return;
    }
    if (err instanceof BodyError) {
      res.status(err.status).json({ success: false, message: err.message });
      return;
    }
    requestLogger(req, ctx.logger).error({ err }, 'sandbox call failed');
    res.status(500).json({ success: false, message: 'Internal error' });
  }) satisfies ErrorRequestHandler);
  return router;
}
