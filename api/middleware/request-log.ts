/**
 * Request logs and HTTP metrics. Every request gets an id: the caller's `x-request-id` when it is a
 * plain token, else a new UUID; it is echoed in the answer's `x-request-id` and is on every line
 * logged through `requestLogger(req)` (`reqId`), the final line included. That line names the full
 * path (router prefixes too) with tokens in it masked; the query string is never logged (the
 * simple endpoint takes the API key there). Successful calls log at debug, so the hot path stays
 * quiet at `info`; 4xx at info, 5xx at error. The line has pino-http's shape (`req.method`,
 * `req.path`, `res.status`, `responseTime`).
 *
 * Hand-written rather than pino-http: pino-http makes two child loggers per request (redaction
 * included) whether anything is logged or not, ~120 µs per request here (docs/benchmarks.md,
 * "request logs"); this makes the request's child logger only when a handler logs through it, and
 * the final line only at an enabled level.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Request, RequestHandler } from 'express';
import type { Logger } from '../../shared/logger.js';
import { observeHttpRequest } from '../../shared/metrics.js';

const GIVEN_ID = /^[A-Za-z0-9._:-]{1,100}$/;

/**
 * Paths with a secret in them: a carrier callback's token, a verification session's token. Matched
 * as the router matches them: in any case, and with repeated slashes.
 */
export function maskPath(path: string): string {
  return path
    .replace(/^(\/+callbacks\/+[^/]+\/+[^/]+)\/.+$/i, '$1/***')
    .replace(/^(\/+v1\/+validations\/+)[^/]+/i, '$1***');
}

function pathOf(req: IncomingMessage): string {
  const url = (req as IncomingMessage & { originalUrl?: string }).originalUrl ?? req.url ?? '/';
  const q = url.indexOf('?');
  return maskPath(q === -1 ? url : url.slice(0, q));
}

/**
 * The route pattern that answered (`/admin/api/accounts/:id`), never the path itself: bounded label
 * values. Read as the router matched it: an error handler mounted on a path (`router.use(PATHS,
 * restErrors)`) rewrites `req.baseUrl` to that path while `req.route` stays, which doubled the
 * label (`/v1/credit/v1/credit`); `recordRouteOnMatch` keeps the mount the route was matched under.
 */
function routeLabel(req: Request, matched: string | undefined): string {
  if (matched !== undefined) return matched;
  return req.baseUrl ? `${req.baseUrl}/*` : 'unmatched';
}

function patternOf(route: unknown): string {
  const path = (route as { path?: unknown } | undefined)?.path;
  return Array.isArray(path) ? path.join('|') : String(path);
}

/**
 * Express sets `req.route` when a route matches (the one that answers last); each assignment
 * records the route's label in `state` with the `baseUrl` of that moment (the route's own
 * router's mount).
 */
function recordRouteOnMatch(req: Request, state: RequestLogState): void {
  let route: unknown;
  Object.defineProperty(req, 'route', {
    configurable: true,
    enumerable: true,
    get: () => route,
    set(value: unknown) {
      route = value;
      if (value) state.route = `${req.baseUrl}${patternOf(value)}`;
    },
  });
}

/** Where a request keeps its id and (once made) its child logger. */
const REQUEST_LOG = Symbol('requestLog');
interface RequestLogState {
  id: string;
  base: Logger;
  child?: Logger;
  /** The label of the route that matched (recordRouteOnMatch); undefined before one did. */
  route?: string;
}

/** The logger of the request being served (its lines carry the request id), else `fallback`. */
export function requestLogger(req: IncomingMessage, fallback: Logger): Logger {
  const state = (req as IncomingMessage & { [REQUEST_LOG]?: RequestLogState })[REQUEST_LOG];
  if (!state) return fallback;
  state.child ??= state.base.child({ reqId: state.id });
  return state.child;
}

export function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = performance.now();
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && GIVEN_ID.test(given) ? given : randomUUID();
    res.setHeader('x-request-id', id);
    const state: RequestLogState = { id, base: logger };
    (req as Request & { [REQUEST_LOG]?: RequestLogState })[REQUEST_LOG] = state;
    recordRouteOnMatch(req, state);
    const done = (): void => {
      res.removeListener('finish', done);
      res.removeListener('close', done);
      const seconds = (performance.now() - started) / 1000;
      const status = res.statusCode;
      observeHttpRequest(req.method, routeLabel(req, state.route), status, seconds);
      const aborted = !res.writableFinished;
      // 503 is a store being down (logged where it is noticed), not a failure of this request's
      // code: at warn, so that a readiness probe every few seconds does not fill the error log.
      const level = status === 503 ? 'warn' : status >= 500 ? 'error' : status >= 400 || aborted ? 'info' : 'debug';
      if (!logger.isLevelEnabled(level)) return;
      const line = { reqId: id, req: { method: req.method, path: pathOf(req) }, res: { status }, responseTime: Math.round(seconds * 1000) };
      logger[level](line, aborted ? 'request aborted' : status >= 500 ? 'request failed' : status >= 400 ? 'request refused' : 'request');
    };
    res.once('finish', done);
    res.once('close', done);
    next();
  };
}
