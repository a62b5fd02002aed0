/**
 * REST API v1 (issue 6, D6): credit, sent messages, key settings, sub-keys. Thin handlers over
 * `shared/rest`; the key comes in `x-api-key` (spec Authentication 2) and every failure answers
 * `{success: false, message}`: 401 for a missing, unknown or disabled key, 403 when a sub-key
 * tries to manage keys, 400 naming the field for bad input (bad JSON and invalid UTF-8 included).
 *
 * Only GET is taken on `/v1/messages`: `POST /v1/messages` is the legacy sending API (send.ts).
 */
import { Router, type ErrorRequestHandler, type Request } from 'express';
import type { AppContext } from '../context.js';
import { readJsonBody, BodyError } from '../middleware/body.js';
import { headerKey, keyFromRequest } from '../middleware/api-key.js';
import { AppError, forbidden, unauthorized } from '../../shared/errors.js';
import { refuseUnknownParams } from '../../shared/rest/input.js';
import { knownError } from '../middleware/errors.js';
import { keyAllows, type ApiKeyRecord } from '../../shared/domain/keys.js';
import { getCredit } from '../../shared/rest/credit.js';
import { listMessages, parseMessageQuery } from '../../shared/rest/messages.js';
import {
  addSubKey, changeSubKey, listSubKeys, parseKeySettings, parseNewSubKey, parseSubKeyChange, requirePrimary, updateKeySettings,
} from '../../shared/rest/keys.js';
import { listDeliveries, replayDeliveries } from '../../shared/webhooks/deliveries.js';
import { requestLogger } from '../middleware/request-log.js';

export const REST_PATHS = ['/v1/credit', '/v1/messages', '/v1/apikey', '/v1/webhooks'];

/** The REST API's authentication: 401 for a missing, unknown or disabled key, 403 for an `api`-scoped one. */
export function restAuth(ctx: AppContext): (req: Request) => Promise<ApiKeyRecord> {
  return async (req) => {
    const presented = headerKey(req);
    const key = await keyFromRequest(ctx.db, presented, 'any');
    if (!key) {
      req.resume(); // an unread body must not hold the connection
      throw unauthorized(presented ? 'Invalid or disabled API key' : 'Missing API key (header x-api-key)');
    }
    if (!keyAllows(key.scope, 'rest')) {
      req.resume();
      throw forbidden(`This API key's scope is "${key.scope}": it may only send messages, not use the REST API`);
    }
    return key;
  };
}

export function restRouter(ctx: AppContext): Router {
  const router = Router();
  const opts = { allowPrivateCallbacks: ctx.config.allowPrivateCallbacks };

  const auth = restAuth(ctx);

  router.get('/v1/credit', async (req, res) => {
    const key = await auth(req);
    refuseUnknownParams(req.query as Record<string, unknown>, []);
    res.json({ success: true, credit: await getCredit(ctx.db, key) });
  });

  router.get('/v1/messages', async (req, res) => {
    const key = await auth(req);
    const query = parseMessageQuery(req.query as Record<string, unknown>, key.accountCountry);
    const page = await listMessages(ctx.db, key, query);
    res.json({ success: true, messages: page.messages, next_cursor: page.next_cursor });
  });

  router.post('/v1/apikey/update', async (req, res) => {
    const key = await auth(req);
    const settings = parseKeySettings(await readJsonBody(req), opts);
    await updateKeySettings(ctx.db, ctx.secrets, key, settings);
    res.json({ success: true });
  });

  router.post('/v1/apikey/add', async (req, res) => {
    const key = await auth(req);
    requirePrimary(key);
    const input = parseNewSubKey(await readJsonBody(req), key, opts);
    const created = await addSubKey(ctx.db, key, input);
    res.json({ success: true, apikey: created.apikey, id: created.id });
  });

  router.get('/v1/apikey/list', async (req, res) => {
    const key = await auth(req);
    refuseUnknownParams(req.query as Record<string, unknown>, []);
    res.json({ success: true, list: await listSubKeys(ctx.db, key) });
  });

  router.post('/v1/apikey/change', async (req, res) => {
    const key = await auth(req);
    requirePrimary(key);
    const change = parseSubKeyChange(await readJsonBody(req));
    const result = await changeSubKey(ctx.db, key, change);
    res.json({ success: true, id: result.id, disabled: result.disabled, scope: result.scope });
  });

  // The key's webhook deliveries (its own; the primary key's also its sub-keys') and its dead letters replayed.
  router.get('/v1/webhooks/deliveries', async (req, res) => {
    const key = await auth(req);
    res.json({ success: true, ...(await listDeliveries(ctx.db, ctx.redis, ctx.queues, key, { ...req.query })) });
  });

  router.post('/v1/webhooks/replay', async (req, res) => {
    const key = await auth(req);
    const result = await replayDeliveries(ctx.db, ctx.queues, key, await readJsonBody(req), ctx.config.webhookRetryScheduleMs.length, requestLogger(req, ctx.logger));
    res.json({ success: true, ...result });
  });

  // Another method on one of these paths: answered in this API's form (POST /v1/messages never
  // gets here: the sending router, mounted first, takes it).
  router.all(['/v1/credit', '/v1/messages', '/v1/apikey/update', '/v1/apikey/add', '/v1/apikey/list', '/v1/apikey/change',
    '/v1/webhooks/deliveries', '/v1/webhooks/replay'], (req, res) => {
    req.resume();
    res.status(405).json({ success: false, message: `Method ${req.method} is not allowed on ${req.path}` });
  });

  router.use(REST_PATHS, restErrors(ctx));
  return router;
}

/** The key of a REST call (the WhatsApp partner endpoints' too): see `restAuth`. */
export function restKey(ctx: AppContext, req: Request): Promise<ApiKeyRecord> {
  return restAuth(ctx)(req);
}

export function restErrors(ctx: AppContext): ErrorRequestHandler {
  return (caught, req, res, _next) => {
    const err = knownError(caught, req, res, ctx.logger);
    if (err instanceof AppError && (err.status < 500 || err.status === 503)) {
      res.status(err.status).json({ success: false, message: err.message });
      return;
    }
    if (err instanceof BodyError) {
      req.resume();
      res.status(err.status).json({ success: false, message: err.message });
      return;
    }
    requestLogger(req, ctx.logger).error({ err }, 'REST API call failed');
    res.status(500).json({ success: false, message: 'Internal server error' });
  };
}
