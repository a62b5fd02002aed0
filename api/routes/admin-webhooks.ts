/** Admin calls for dead-lettered webhook batches (D11): list and replay. */
import Joi from 'joi';
import type { AdminExtension } from './admin.js';
import { readJsonBody } from '../middleware/body.js';
import { validate } from '../../shared/validation.js';
import { listDeadBatches, reviveDeadBatches } from '../../shared/webhooks/deliver.js';
import { enqueueBatches } from '../../shared/webhooks/jobs.js';
import { isoInstant } from '../../shared/validation.js';

const listQuery = Joi.object<{ key_id?: number; since?: Date }>({
  key_id: Joi.number().integer().min(1),
  since: isoInstant,
});
const replayBody = Joi.alternatives<{ id?: number; key_id?: number; since?: Date }>().try(
  Joi.object({ id: Joi.number().integer().min(1).required() }),
  Joi.object({ key_id: Joi.number().integer().min(1).required(), since: isoInstant.required() }),
).messages({ 'alternatives.match': 'give id, or key_id and since' });

export const webhookAdmin: AdminExtension = (router, ctx) => {
  router.get('/webhooks/dead', async (req, res) => {
    const q = validate(listQuery, { ...req.query }, { convert: true });
    res.json({ batches: await listDeadBatches(ctx.db, { ...(q.key_id !== undefined && { keyId: q.key_id }), ...(q.since && { since: q.since }) }) });
  });
  router.post('/webhooks/replay', async (req, res) => {
    const input = validate(replayBody, await readJsonBody(req), { convert: true });
    const ids = await reviveDeadBatches(ctx.db, {
      ...(input.id !== undefined && { id: input.id }),
      ...(input.key_id !== undefined && { keyId: input.key_id }),
      ...(input.since && { since: input.since }),
    });
    const { rows } = await ctx.db.query<{ id: number; url: string }>('SELECT id, url FROM webhook_batches WHERE id = ANY($1)', [ids]);
    await enqueueBatches(ctx.queues, rows, ctx.config.webhookRetryScheduleMs.length);
    res.json({ replayed: ids.length });
  });
};
