/**
 * `GET /v2/messages/{id}` (issue 27): a message, or one recipient, with its status timeline
 * (shared/lookup/timeline.ts). Sending API authentication and error form: a missing or refused key
 * is the explicit deny (400), an id the key may not see is 404 like an unknown one.
 */
import { Router, type Request } from 'express';
import type { ApiKeyRecord } from '../../shared/domain/keys.js';
import type { AppContext } from '../context.js';
import { headerKey, keyFromRequest } from '../middleware/api-key.js';
import { NOT_AUTHORIZED, sendErrors } from './send.js';
import { badRequest, notFound } from '../../shared/errors.js';
import { parseIdRef } from '../../shared/sending/ids.js';
import { lookupMessage } from '../../shared/lookup/timeline.js';

/** The key the lookup's own middleware found (the route's handler runs after it). */
const lookupKeys = new WeakMap<Request, ApiKeyRecord>();

export function lookupRouter(ctx: AppContext): Router {
  const router = Router();
  // The key first, before the id is decoded: Express decodes `:id` while it matches the route,
  // and a malformed %-escape there fails before any handler of it runs. Mounted without the
  // parameter, this and the error handler below still run for such a path.
  router.use('/v2/messages', (req, _res, next) => {
    if ((req.method !== 'GET' && req.method !== 'HEAD') || req.path === '/') {
      next();
      return;
    }
    keyFromRequest(ctx.db, headerKey(req), 'send').then((key) => {
      if (!key) {
        next(badRequest(NOT_AUTHORIZED));
        return;
      }
      lookupKeys.set(req, key);
      next();
    }, next);
  });
  router.get('/v2/messages/:id', async (req, res) => {
    const key = lookupKeys.get(req)!;
    const id = String(req.params.id ?? '');
    if (parseIdRef(id) === null) {
      throw badRequest('id: must be a message id (20 hexadecimal characters) or a recipient id (<message_id>-<index>, or its own id)');
    }
    const found = await lookupMessage(ctx.db, key, id);
    if (!found) {
      throw notFound(`Message ${id} not found`);
    }
    res.json(found);
  });
  router.use('/v2/messages', sendErrors(ctx));
  return router;
}
