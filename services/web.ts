/** The `web` role: the one HTTP listener for every API (D1), on the core's API pool. */
import { createServer, type Server, type ServerOptions } from 'node:http';
import { buildApp } from '../api/app.js';
import type { Core } from './core.js';
import { listen } from './listen.js';
import { addQueueSource, trackLargeCallTurns } from '../shared/metrics.js';
import { LargeCallTurns, SMALL_CALL_QUIET_MS } from '../shared/sending/large-call-turns.js';
import { readQueueDepths } from '../shared/queue-depths.js';

export interface WebRole {
  server: Server;
  port: number;
  stop(): Promise<void>;
}

/**
 * A client has `requestTimeoutMs` for its whole request and at most 15 s of it for the headers;
 * Node checks every 5 s (a quarter of the timeout when shorter) and answers a late one 408, closing
 * its connection. Node's defaults (300 s, 60 s, checked every 30 s) let a client that sends a byte
 * now and then hold a connection for five minutes. A response that takes long is not limited.
 */
export function serverTimeouts(requestTimeoutMs: number): ServerOptions {
  return {
    requestTimeout: requestTimeoutMs,
    headersTimeout: Math.min(15_000, requestTimeoutMs),
    connectionsCheckingInterval: Math.min(5_000, Math.max(250, Math.floor(requestTimeoutMs / 4))),
  };
}

export async function startWeb(core: Core): Promise<WebRole> {
  const { config, logger } = core;
  const largeCalls = new LargeCallTurns({
    narrow: config.acceptLargeCallConcurrency,
    wide: config.acceptLargeCallConcurrencyAlone,
    quietMs: SMALL_CALL_QUIET_MS,
  }, config.acceptLargeCallBacklogBytes, (turns) => {
    logger.info({ turns, narrow: config.acceptLargeCallConcurrency }, turns > config.acceptLargeCallConcurrency
      ? 'large send calls get more turns: no small call came for a while'
      : 'large send calls get fewer turns: small calls came');
  });
  const untrackTurns = trackLargeCallTurns(() => ({ size: largeCalls.limit, inUse: largeCalls.running, waitingBytes: largeCalls.waiting }));
  const app = buildApp({
    config, db: core.apiDb, redis: core.redis, queues: core.queues, logger, engine: core.engine, secrets: core.secrets, largeCalls,
  });
  const server = createServer(serverTimeouts(config.httpRequestTimeoutMs), app);
  server.keepAliveTimeout = 65_000;
  const port = await listen(server, config.port, '0.0.0.0', 'PORT');
  // Queue depths are the deployment's, not a process's: the web process reads them on scrape.
  const removeQueueSource = addQueueSource(() => readQueueDepths(core.queues));
  logger.info({ port, sandbox: config.sandbox }, 'HTTP listening');
  if (!config.adminToken) {
    logger.warn('ADMIN_TOKEN is not set: the admin API and bull-board refuse every call');
  }
  return {
    server,
    port,
    // Stop taking requests; idle keep-alive connections close now, busy ones within 5 s.
    stop: () => new Promise<void>((resolve) => {
      removeQueueSource();
      untrackTurns();
      server.close(() => resolve());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 5000).unref();
    }),
  };
}
