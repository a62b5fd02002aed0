/**
 * One structured log line per request. The query string is never logged (the simple endpoint
 * takes the API key there), nor a carrier callback's path below its connection (a Viber
 * connection's token); successful calls log at debug so the hot path stays quiet at `info`.
 */
import type { RequestHandler } from 'express';
import type { Logger } from '../../shared/logger.js';

/** A path as logged: what follows `/callbacks/<kind>/<connection>` may be a callback token (D12). */
export function loggedPath(path: string): string {
  return path.replace(/^(\/callbacks\/[^/]+\/[^/]+)\/.+$/, '$1/***');
}

export function requestLog(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const entry = { method: req.method, path: loggedPath(req.path), status: res.statusCode, ms: Math.round(ms * 10) / 10 };
      if (res.statusCode >= 500) {
        logger.error(entry, 'request failed');
      } else if (res.statusCode >= 400) {
        logger.info(entry, 'request refused');
      } else {
        logger.debug(entry, 'request');
      }
    });
    next();
  };
}
