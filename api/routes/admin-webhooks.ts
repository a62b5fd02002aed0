/** Admin calls for dead-lettered webhook batches (D11): list and replay. */
import type { AdminExtension } from './admin.js';
import { readJsonBody } from '../middleware/body.js';
import { validate } from '../../shared/validation.js';
import { listDeadBatches, reviveDeadBatches } from '../../shared/webhooks/deliver.js';
import { enqueueReplayed } from '../../shared/webhooks/jobs.js';
import { requestLogger } from '../middleware/request-log.js';
import { deadBatchesQuerySchema, deadReplaySchema } from '../../shared/domain/admin-schemas.js';

export const webhookAdmin: AdminExtension = (router, ctx) => {
  router.get('/webhooks/dead', async (req, res) => {
    const q = validate(deadBatchesQuerySchema, { ...req.query }, { convert: true });
    res.json({ batches: await listDeadBatches(ctx.db, { ...(q.key_id !== undefined && { keyId: q.key_id }), ...(q.since && { since: q.since }) }) });
  });
  router.post('/webhooks/replay', async (req, res) => {
    const input = validate(deadReplaySchema, await readJsonBody(req), { convert: true });
    const ids = await reviveDeadBatches(ctx.db, {
      ...(input.id !== undefined && { id: input.id }),
      ...(input.key_id !== undefined && { keyId: input.key_id }),
      ...(input.since && { since: input.since }),
    });
    const { rows } = await ctx.db.query<{ id: number; url: string }>('SELECT id, url FROM webhook_batches WHERE id = ANY($1)', [ids]);
    await enqueueReplayed(ctx.queues, rows, ctx.config.webhookRetryScheduleMs.length, requestLogger(req, ctx.logger));
    res.json({ replayed: ids.length });
  });
};
