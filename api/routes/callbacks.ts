/**
 * Carrier callbacks (D12): `GET|POST /callbacks/<kind>/<connection>[/<more>]`, read raw (signature
 * checks need the bytes as sent) and handed to the connection's provider; see
 * shared/carriers/callbacks.ts.
 */
import { Router, type ErrorRequestHandler } from 'express';
import type { AppContext } from '../context.js';
import { readRawBody, BodyError } from '../middleware/body.js';
import { handleCarrierCallback, type CallbackDeps } from '../../shared/carriers/callbacks.js';
import { knownError } from '../middleware/errors.js';
import { AppError } from '../../shared/errors.js';
import { maskPath, requestLogger } from '../middleware/request-log.js';

/** Carriers' callbacks are small; this bounds what one may make us read. */
const MAX_CALLBACK_BYTES = 1024 * 1024;

export function callbacksRouter(ctx: AppContext): Router {
  const router = Router();
  const deps: CallbackDeps = { db: ctx.db, redis: ctx.redis, config: ctx.config, logger: ctx.logger, sink: ctx.engine.sink, box: ctx.secrets };

  router.all('/callbacks/:kind/:connection{/*rest}', async (req, res) => {
    if (req.method !== 'GET' && req.method !== 'POST') {
      res.status(405).set('allow', 'GET, POST').json({ message: 'Method not allowed' });
      return;
    }
    const rawBody = req.method === 'POST' ? await readRawBody(req, MAX_CALLBACK_BYTES) : Buffer.alloc(0);
    const rest = (req.params as { rest?: string[] }).rest;
    const headers: Record<string, string | undefined> = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    const outcome = await handleCarrierCallback(deps, String(req.params.kind), String(req.params.connection), {
      method: req.method,
      subpath: rest && rest.length > 0 ? `/${rest.join('/')}` : '',
      query: new URLSearchParams(req.originalUrl.split('?')[1] ?? ''),
      headers,
      rawBody,
      remoteAddress: req.socket.remoteAddress ?? '',
    });
    res.status(outcome.status);
    if (outcome.contentType) res.type(outcome.contentType);
    res.send(outcome.body ?? '');
  });

  router.use(((caught, req, res, _next) => {
    const err = knownError(caught, req, res, ctx.logger);
    if (err instanceof BodyError || (err instanceof AppError && err.status !== 500)) {
      res.status(err.status).json({ message: err.message });
      return;
    }
    requestLogger(req, ctx.logger).error({ err, path: maskPath(req.originalUrl.split('?')[0] ?? '') }, 'carrier callback failed');
    res.status(500).json({ message: 'Internal error' });
  }) satisfies ErrorRequestHandler);
  return router;
}
