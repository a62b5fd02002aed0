/**
 * `GET /v2/messages/{id}` (issue 27): a message, or one recipient, with its status timeline
 * (shared/lookup/timeline.ts). Sending API authentication and error form: a missing or refused key
 * is the explicit deny (400), an id the key may not see is 404 like an unknown one.
 */
import { Router } from 'express';
import type { AppContext } from '../context.js';
import { headerKey, keyFromRequest } from '../middleware/api-key.js';
import { NOT_AUTHORIZED, sendErrors } from './send.js';
import { badRequest, notFound } from '../../shared/errors.js';
import { parseIdRef } from '../../shared/sending/ids.js';
import { lookupMessage } from '../../shared/lookup/timeline.js';

export function lookupRouter(ctx: AppContext): Router {
  const router = Router();
  router.get('/v2/messages/:id', async (req, res) => {
    const key = await keyFromRequest(ctx.db, headerKey(req), 'send');
    if (!key) {
      throw badRequest(NOT_AUTHORIZED);
    }
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
  router.use('/v2/messages/:id', sendErrors(ctx));
  return router;
}
