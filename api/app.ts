/**
 * The HTTP application: one listener for every API (D1). Routers are mounted per API family, each
 * with its own error form; nothing here parses bodies globally (each family reads its own, so
 * size, encoding and syntax failures are answered in that family's shape).
 */
import express, { type ErrorRequestHandler, type Express } from 'express';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { AppContext } from './context.js';
import { healthRouter } from './routes/health.js';
import { metricsRouter } from './routes/metrics.js';
import { docsRouter } from './routes/docs.js';
import { requestLog } from './middleware/request-log.js';
import { adminRouter, type AdminExtension } from './routes/admin.js';
import { adminAuth, sameOriginWrites } from './middleware/admin-auth.js';
import { sendRouter } from './routes/send.js';
import { lookupRouter } from './routes/lookup.js';
import { xmlRouter } from './routes/xml.js';
import { sandboxRouter } from './routes/sandbox.js';
import { webhookAdmin } from './routes/admin-webhooks.js';
import { carrierAdmin } from './routes/admin-carriers.js';
import { restRouter } from './routes/rest.js';
import { whatsappRouter } from './routes/whatsapp.js';
import { suppressionsRouter } from './routes/rest-suppressions.js';
import { verifyRouter } from './routes/verify.js';
import { callbacksRouter } from './routes/callbacks.js';
import { knownError } from './middleware/errors.js';
import { BodyError } from './middleware/body.js';
import { AppError } from '../shared/errors.js';

export function buildApp(ctx: AppContext, adminExtensions: AdminExtension[] = []): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  app.use(requestLog(ctx.logger));

  // The sending API first: its calls are the hot path, and every router mounted before it is
  // walked (and its routes matched) on each of them.
  app.use(sendRouter(ctx));
  app.use(healthRouter(ctx));
  app.use(metricsRouter(ctx));
  app.use(docsRouter(ctx));
  app.use('/admin/api', adminRouter(ctx, [webhookAdmin, carrierAdmin, ...adminExtensions]));

  const board = new ExpressAdapter();
  board.setBasePath('/admin/queues');
  createBullBoard({ queues: ctx.queues.all().map((q) => new BullMQAdapter(q)), serverAdapter: board });
  app.use('/admin/queues', adminAuth(ctx.config.adminToken, { basicChallenge: true }), sameOriginWrites(), board.getRouter());

  app.use(lookupRouter(ctx));
  app.use(xmlRouter(ctx));
  app.use(restRouter(ctx));
  app.use(whatsappRouter(ctx));
  app.use(suppressionsRouter(ctx));
  app.use(verifyRouter(ctx));
  app.use(callbacksRouter(ctx));
  if (ctx.config.sandbox) {
    app.use(sandboxRouter(ctx));
  }

  app.use((_req, res) => {
    res.status(404).json({ message: 'Not found' });
  });
  // Whatever no family answered (bull-board, health, a path no family owns): the 404's shape.
  app.use(((caught, req, res, next) => {
    if (res.headersSent) {
      next(caught);
      return;
    }
    const err = knownError(caught, req, res, ctx.logger);
    if ((err instanceof AppError || err instanceof BodyError) && err.status !== 500) {
      res.status(err.status).json({ message: err.message });
      return;
    }
    ctx.logger.error({ err }, 'request failed');
    res.status(500).json({ message: 'Internal error' });
  }) satisfies ErrorRequestHandler);
  return app;
}
