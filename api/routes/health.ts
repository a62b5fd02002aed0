import { Router } from 'express';
import type { AppContext } from '../context.js';

/** `GET /health`: 200 only when Postgres and Redis both answer (within 2 s). */
export function healthRouter(ctx: AppContext): Router {
  const router = Router();
  router.get('/health', async (_req, res) => {
    const within = <T>(p: Promise<T>) =>
      Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error('timeout')), 2000).unref())]);
    const [pg, redis] = await Promise.allSettled([within(ctx.db.query('SELECT 1')), within(ctx.redis.ping())]);
    const status = { postgres: pg.status === 'fulfilled' ? 'ok' : 'down', redis: redis.status === 'fulfilled' ? 'ok' : 'down' };
    const healthy = status.postgres === 'ok' && status.redis === 'ok';
    res.status(healthy ? 200 : 503).json({ status: healthy ? 'ok' : 'unavailable', ...status });
  });
  return router;
}
