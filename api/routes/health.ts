import { Router } from 'express';
import type { AppContext } from '../context.js';
import { checkReadiness, checkStores } from '../../shared/health.js';

/**
 * `GET /health`: 200 only when Postgres and Redis both answer (within 2 s).
 * `GET /health/live`: 200 while the process serves HTTP (a liveness probe restarts it otherwise).
 * `GET /health/ready`: 200 when Postgres and Redis answer (503 otherwise), with each configured
 * carrier connection's live state; `status: "degraded"` when one is not bound (shared/health.ts).
 */
export function healthRouter(ctx: AppContext): Router {
  const router = Router();
  router.get('/health', async (_req, res) => {
    const status = await checkStores(ctx);
    const healthy = status.postgres === 'ok' && status.redis === 'ok';
    res.status(healthy ? 200 : 503).json({ status: healthy ? 'ok' : 'unavailable', ...status });
  });
  router.get('/health/live', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/health/ready', async (_req, res) => {
    const readiness = await checkReadiness(ctx);
    res.status(readiness.status === 'unavailable' ? 503 : 200).json(readiness);
  });
  return router;
}
