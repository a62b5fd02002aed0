/** `GET /metrics`: the process's Prometheus metrics (shared/metrics.ts); METRICS_TOKEN, when set, is asked for as a bearer token. */
import { Router } from 'express';
import type { AppContext } from '../context.js';
import { scrape } from '../../shared/metrics.js';

export function metricsRouter(ctx: AppContext): Router {
  const router = Router();
  router.get('/metrics', async (req, res) => {
    const answer = await scrape(req.headers.authorization, ctx.config.metricsToken);
    res.status(answer.status).type(answer.contentType).send(answer.body);
  });
  return router;
}
