/**
 * What every API family's error handler does first, before it answers in its own shape: the
 * failures that are the same whatever the family (a path Express cannot decode, a storage
 * outage, an upload the client abandoned) become an `AppError` (or `BodyError`) with the right
 * status, so that none of them falls through to a 500.
 */
import type { Request, RequestHandler, Response } from 'express';
import { AppError } from '../../shared/errors.js';
import type { Logger } from '../../shared/logger.js';
import { isStorageUnavailable, STORAGE_RETRY_AFTER_S } from '../../shared/storage-unavailable.js';
import { BodyError, CLIENT_ABORTED } from './body.js';
import { maskPath, requestLogger } from './request-log.js';

/** The message of every family's 503 (issue 22): nothing of the call was stored. */
export const UNAVAILABLE_MESSAGE = 'Service temporarily unavailable: nothing was accepted; retry later';

const MAX_PATH_IN_MESSAGE = 200;

const cut = (path: string): string => (path.length > MAX_PATH_IN_MESSAGE ? `${path.slice(0, MAX_PATH_IN_MESSAGE)}…` : path);
const rawPath = (req: Request): string => (req.originalUrl || req.url).split('?')[0]!;

/** The request's path as received (not decoded), cut to a length fit for an error message. */
export function requestPath(req: Request): string {
  return cut(rawPath(req));
}

/**
 * A line about a request: through the request's logger (its `reqId`), naming the path with the
 * tokens in it masked (a verification session's, a carrier callback's) as the request's own line
 * does; masked before it is cut to length, so that no part of a token is shown.
 */
function logFor(req: Request, logger: Logger): [Logger, string] {
  return [requestLogger(req, logger), cut(maskPath(rawPath(req)))];
}

/**
 * Translate the family-independent failures; anything else is returned unchanged (the family's
 * own errors, and program errors that stay a 500). A 503 gets its `Retry-After` header here.
 */
export function knownError(err: unknown, req: Request, res: Response, logger: Logger): unknown {
  if (err instanceof AppError || err instanceof BodyError) {
    if (err instanceof BodyError && err.status === CLIENT_ABORTED) {
      // Nobody is left to read an answer: one line, no stack (a client giving up is not our fault).
      const [log, path] = logFor(req, logger);
      log.info({ method: req.method, path }, 'client closed the connection during the upload');
    }
    return err;
  }
  // Express decodes path parameters with decodeURIComponent; a malformed %-escape throws URIError.
  if (err instanceof URIError) {
    return new AppError(400, 'BAD_REQUEST', `path: malformed percent-escape in ${requestPath(req)}`, { field: 'path' });
  }
  if (isStorageUnavailable(err)) {
    const [log, path] = logFor(req, logger);
    log.warn({ method: req.method, path, err: (err as Error).message }, 'storage unavailable; answered 503');
    res.set('Retry-After', String(STORAGE_RETRY_AFTER_S));
    return new AppError(503, 'SERVICE_UNAVAILABLE', UNAVAILABLE_MESSAGE);
  }
  return err;
}

/**
 * Refuse a NUL character (`%00`) anywhere in the path, for a family whose path parameters reach
 * Postgres (which refuses NUL in text): answered by the family's error handler, naming the path.
 * Other unstorable text cannot come through a path: a %-escaped surrogate is malformed UTF-8,
 * which the parameter decoding already refuses.
 */
export const refuseNulInPath: RequestHandler = (req, _res, next) => {
  next(/%00/.test(req.path) ? new AppError(400, 'BAD_REQUEST', `path: must not contain NUL characters (%00): ${requestPath(req)}`, { field: 'path' }) : undefined);
};
