/**
 * The account's suppression list through the REST API (issue 27): list, add, remove. REST
 * authentication and error form (rest.ts); any key of the account with the REST scope may use it
 * (the list is the account's, whichever key sent to the number).
 */
import { Router } from 'express';
import type { AppContext } from '../context.js';
import { readJsonBody } from '../middleware/body.js';
import { restAuth, restErrors } from './rest.js';
import { notFound } from '../../shared/errors.js';
import { refuseUnknownParams } from '../../shared/rest/input.js';
import { addSuppressions, listSuppressions, removeSuppressions } from '../../shared/suppression/store.js';
import {
  encodeSuppressionCursor, parseNewSuppression, parseSuppressionQuery, suppressionFamilies, suppressionPhone,
} from '../../shared/rest/suppressions.js';

const PATHS = ['/v1/suppressions', '/v1/suppressions/:phone'];

export function suppressionsRouter(ctx: AppContext): Router {
  const router = Router();
  const auth = restAuth(ctx);

  router.get('/v1/suppressions', async (req, res) => {
    const key = await auth(req);
    const query = parseSuppressionQuery(req.query as Record<string, unknown>, key.accountCountry);
    const page = await listSuppressions(ctx.db, key.accountId, query);
    const last = page.rows[page.rows.length - 1];
    res.json({
      success: true, suppressions: page.rows,
      next_cursor: page.more && last ? encodeSuppressionCursor(last.family, last.phone_number) : null,
    });
  });

  router.post('/v1/suppressions', async (req, res) => {
    const key = await auth(req);
    const input = parseNewSuppression(await readJsonBody(req), key.accountCountry);
    res.json({ success: true, suppressions: await addSuppressions(ctx.db, key.accountId, input.families, input.phone, 'api') });
  });

  router.delete('/v1/suppressions/:phone', async (req, res) => {
    const key = await auth(req);
    const phone = suppressionPhone('phone_number', String(req.params.phone ?? ''), key.accountCountry);
    const query = req.query as Record<string, unknown>;
    refuseUnknownParams(query, ['family']);
    const removed = await removeSuppressions(ctx.db, key.accountId, suppressionFamilies(query.family), phone);
    if (removed.length === 0) {
      throw notFound(`phone_number: ${phone} is not on the suppression list${query.family === undefined ? '' : ` for ${String(query.family)}`}`);
    }
    res.json({ success: true, removed });
  });

  router.all(PATHS, (req, res) => {
    req.resume();
    res.status(405).json({ success: false, message: `Method ${req.method} is not allowed on ${req.path}` });
  });
  router.use(PATHS, restErrors(ctx));
  return router;
}
