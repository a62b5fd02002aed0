/**
 * Request logs (pino-http) and HTTP metrics. Every request gets an id: the caller's `x-request-id`
 * when it is a plain token, else a new UUID; it is echoed in the answer's `x-request-id` and is on
 * every line logged through `req.log` (`reqId`), the final line included. That line names the
 * full path (router prefixes too) with tokens in it masked; the query string is never logged (the
 * simple endpoint takes the API key there). Successful calls log at debug, so the hot path stays
 * quiet at `info`; 4xx at info, 5xx at error.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler } from 'express';
import { pinoHttp } from 'pino-http';
import type { Logger } from '../../shared/logger.js';
import { observeHttpRequest } from '../../shared/metrics.js';

const GIVEN_ID = /^[A-Za-z0-9._:-]{1,100}$/;

/** Paths with a secret in them: a carrier callback's token, a verification session's token. */
export function maskPath(path: string): string {
  return path
    .replace(/^(\/callbacks\/[^/]+\/[^/]+)\/.+$/, '$1/***')
    .replace(/^(\/v1\/validations\/)[^/]+/, '$1***');
}

function pathOf(req: IncomingMessage): string {
  const url = (req as IncomingMessage & { originalUrl?: string }).originalUrl ?? req.url ?? '/';
  const q = url.indexOf('?');
  return maskPath(q === -1 ? url : url.slice(0, q));
}

/** The route pattern that answered (`/admin/api/accounts/:id`), never the path itself: bounded label values. */
export function routeLabel(req: Request): string {
  const route = (req as Request & { route?: { path: unknown } }).route;
  if (route) {
    const pattern = Array.isArray(route.path) ? route.path.join('|') : String(route.path);
    return `${req.baseUrl}${pattern}`;
  }
  return req.baseUrl ? `${req.baseUrl}/*` : 'unmatched';
}

/** The logger of the request being served (its lines carry the request id), else `fallback`. */
export function requestLogger(req: IncomingMessage, fallback: Logger): Logger {
  return (req as Partial<Pick<IncomingMessage, 'log'>>).log ?? fallback;
}

export function requestLog(logger: Logger): RequestHandler {
  const http = pinoHttp<IncomingMessage, ServerResponse>({
    logger,
    quietReqLogger: true,
    genReqId: (req, res) => {
      const given = req.headers['x-request-id'];
      const id = typeof given === 'string' && GIVEN_ID.test(given) ? given : randomUUID();
      res.setHeader('x-request-id', id);
      return id;
    },
    serializers: {
      req: (req: { method?: string; raw?: IncomingMessage }) => ({ method: req.method, path: req.raw ? pathOf(req.raw) : undefined }),
      res: (res: { statusCode?: number }) => ({ status: res.statusCode }),
    },
    customLogLevel: (_req, res, err) => (err || res.statusCode >= 500 ? 'error' : res.statusCode >= 400 ? 'info' : 'debug'),
    customSuccessMessage: (_req, res) => (res.statusCode >= 400 ? 'request refused' : 'request'),
    customErrorMessage: () => 'request failed',
  });
  return (req, res, next) => {
    const started = performance.now();
    res.once('finish', () => {
      observeHttpRequest(req.method, routeLabel(req), res.statusCode, (performance.now() - started) / 1000);
    });
    http(req, res, next);
  };
}
