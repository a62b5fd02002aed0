/** Operator API under `/admin/api` (D11): thin handlers over the same domain functions as the CLI. */
import { Router, type ErrorRequestHandler, type Request } from 'express';
import Joi from 'joi';
import type { AppContext } from '../context.js';
import { adminAuth } from '../middleware/admin-auth.js';
import { readJsonBody, BodyError } from '../middleware/body.js';
import { validate } from '../../shared/validation.js';
import { AppError, badRequest } from '../../shared/errors.js';
import { knownError, refuseNulInPath } from '../middleware/errors.js';
import { refuseUnknownParams } from '../../shared/rest/input.js';
import {
  createAccount, getAccount, updateAccount, addAccountCredit, addKeyCredit, listKeys, updateKeySettings,
} from '../../shared/domain/accounts.js';
import { invalidateKeyCache } from '../../shared/domain/keys.js';
import { checkCallbackUrl } from '../../shared/net/ssrf.js';
import { isValidWebhookSecret } from '../../shared/webhooks/sign.js';
import { listPrices, upsertPrices } from '../../shared/domain/prices.js';
import { assignNumber } from '../../shared/domain/numbers.js';
import {
  newAccountSchema, accountSettingsSchema, creditSchema, keyCreditSchema, pricesSchema, numberAssignmentSchema, keySettingsSchema,
} from '../../shared/domain/admin-schemas.js';
import { requestLogger } from '../middleware/request-log.js';

const idParam = Joi.number().integer().min(1).max(Number.MAX_SAFE_INTEGER);

/** A list's one filter, `account_id`: any other query parameter is named (a misspelt filter listed every account's rows). */
export function accountFilter(query: Record<string, unknown>): number | undefined {
  refuseUnknownParams(query, ['account_id']);
  return query.account_id === undefined ? undefined : parseId(query.account_id, 'account_id');
}

export function parseId(raw: unknown, name = 'id'): number {
  const id = Number(raw);
  if (typeof raw !== 'string' || !/^\d+$/.test(raw) || idParam.validate(id).error) {
    throw badRequest(`${name}: must be a positive integer`);
  }
  return id;
}

/** Extra admin routes contributed by other slices (webhooks, carriers) without editing this file. */
export type AdminExtension = (router: Router, ctx: AppContext) => void;

export function adminRouter(ctx: AppContext, extensions: AdminExtension[] = []): Router {
  const router = Router();
  router.use(adminAuth(ctx.config.adminToken));
  router.use(refuseNulInPath);
  const body = (req: Request) => readJsonBody(req);

  router.post('/accounts', async (req, res) => {
    const input = validate(newAccountSchema, await body(req), { convert: true });
    res.status(201).json(await createAccount(ctx.db, input));
  });
  router.get('/accounts/:id', async (req, res) => {
    res.json(await getAccount(ctx.db, parseId(req.params.id)));
  });
  router.patch('/accounts/:id', async (req, res) => {
    const input = validate(accountSettingsSchema, await body(req), { convert: true });
    res.json(await updateAccount(ctx.db, ctx.secrets, parseId(req.params.id), input));
  });
  router.post('/accounts/:id/credit', async (req, res) => {
    const input = validate(creditSchema, await body(req));
    res.json(await addAccountCredit(ctx.db, parseId(req.params.id), input.czk ?? 0, input.eur ?? 0));
  });
  router.get('/keys', async (req, res) => {
    res.json({ keys: await listKeys(ctx.db, accountFilter(req.query as Record<string, unknown>)) });
  });
  router.patch('/keys/:id', async (req, res) => {
    const id = parseId(req.params.id);
    const input = validate(keySettingsSchema, await body(req), { convert: true });
    if (input.default_callback_url) {
      const policy = checkCallbackUrl(input.default_callback_url, ctx.config.allowPrivateCallbacks);
      if (!policy.ok) {
        throw badRequest(`default_callback_url: ${policy.reason}`);
      }
    }
    if (input.webhook_secret && !isValidWebhookSecret(input.webhook_secret)) {
      throw badRequest('webhook_secret: must be whsec_ followed by base64 of at least 24 random bytes');
    }
    const key = await updateKeySettings(ctx.db, ctx.secrets, id, input);
    invalidateKeyCache(id);
    res.json(key);
  });
  router.post('/keys/:id/credit', async (req, res) => {
    const input = validate(keyCreditSchema, await body(req));
    res.json(await addKeyCredit(ctx.db, parseId(req.params.id), input.amount));
  });
  router.get('/prices', async (_req, res) => {
    res.json({ prices: await listPrices(ctx.db) });
  });
  router.put('/prices', async (req, res) => {
    const rows = validate(pricesSchema, await body(req), { convert: true });
    res.json({ updated: await upsertPrices(ctx.db, rows) });
  });
  router.post('/numbers', async (req, res) => {
    const input = validate(numberAssignmentSchema, await body(req), { convert: true });
    res.status(201).json(await assignNumber(ctx.db, input));
  });
  for (const extend of extensions) {
    extend(router, ctx);
  }
  router.use((_req, res) => {
    res.status(404).json({ error: 'NOT_FOUND', message: 'No such admin call' });
  });
  router.use(adminErrors(ctx));
  return router;
}

function adminErrors(ctx: AppContext): ErrorRequestHandler {
  return (caught, req, res, _next) => {
    const err = knownError(caught, req, res, ctx.logger);
    if (err instanceof AppError) {
      res.status(err.status).json({ error: err.code, message: err.message });
      return;
    }
    if (err instanceof BodyError) {
      // The code says what happened, as the verification API's does: a body over the cap is not a bad one.
      res.status(err.status).json({ error: err.status === 413 ? 'PAYLOAD_TOO_LARGE' : 'BAD_REQUEST', message: err.message });
      return;
    }
    requestLogger(req, ctx.logger).error({ err }, 'admin call failed');
    res.status(500).json({ error: 'INTERNAL_ERROR', message: 'Internal error' });
  };
}
