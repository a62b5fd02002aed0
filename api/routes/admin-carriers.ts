/**
 * Admin calls for carrier connections and senders (D12), over shared/carriers/admin.ts:
 *
 *   POST   /admin/api/carriers        {name, kind, config, routes?, enabled?}  (or the older SMPP {name, url, routes?})
 *   GET    /admin/api/carriers        {carriers: [{name, kind, config (masked), routes, enabled, source, state}]}
 *   DELETE /admin/api/carriers/:name  {deleted: name}
 *   POST   /admin/api/senders         {account_id, family, sender, connection, credentials?, details?}
 *   GET    /admin/api/senders         ?account_id=  {senders: [...]} (never credentials)
 *   DELETE /admin/api/senders/:id     {deleted: id}
 *
 * Worker processes pick changes up within a few seconds (at once in this process).
 */
import type { AdminExtension } from './admin.js';
import { accountFilter, parseId } from './admin.js';
import { readJsonBody } from '../middleware/body.js';
import {
  listConnectionViews, listSenderViews, removeConnection, removeSender, storeConnection, storeSender, type CarrierAdminDeps,
} from '../../shared/carriers/admin.js';

export const carrierAdmin: AdminExtension = (router, ctx) => {
  const deps: CarrierAdminDeps = { db: ctx.db, redis: ctx.redis, config: ctx.config, box: ctx.secrets };

  router.post('/carriers', async (req, res) => {
    const saved = await storeConnection(deps, await readJsonBody(req));
    res.status(saved.created ? 201 : 200).json(saved.connection);
  });
  router.get('/carriers', async (_req, res) => {
    res.json({ carriers: await listConnectionViews(deps) });
  });
  router.delete('/carriers/:name', async (req, res) => {
    const name = String(req.params.name);
    await removeConnection(deps, name);
    res.json({ deleted: name });
  });

  router.post('/senders', async (req, res) => {
    const saved = await storeSender(deps, await readJsonBody(req));
    res.status(saved.created ? 201 : 200).json(saved.sender);
  });
  router.get('/senders', async (req, res) => {
    res.json({ senders: await listSenderViews(deps, accountFilter(req.query as Record<string, unknown>)) });
  });
  router.delete('/senders/:id', async (req, res) => {
    const id = parseId(req.params.id);
    await removeSender(deps, id);
    res.json({ deleted: id });
  });
};
