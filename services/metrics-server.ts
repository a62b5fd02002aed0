/**
 * METRICS_PORT: a small listener of its own in any process (a worker has no HTTP API) for
 * `/metrics`, `/health/live` and `/health/ready`, so every process can be scraped and probed (the
 * container HEALTHCHECK uses it). It is opened first and closed last: probes answer while a
 * process starts and drains.
 */
import { createServer, type Server } from 'node:http';
import { scrape } from '../shared/metrics.js';
import { checkReadiness, type HealthDeps } from '../shared/health.js';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import { listen } from './listen.js';

export interface MetricsServer {
  port: number;
  /** Set once the process's Postgres and Redis are connected: readiness is checked from then on. */
  setHealth(deps: HealthDeps): void;
  stop(): Promise<void>;
}

export async function startMetricsServer(config: Config, logger: Logger, port: number): Promise<MetricsServer> {
  let health: HealthDeps | null = null;
  const json = (res: import('node:http').ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' }).end(JSON.stringify(body));
  };
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    void (async () => {
      if (req.method !== 'GET') {
        json(res, 405, { message: 'Method not allowed' });
      } else if (path === '/metrics') {
        const answer = await scrape(req.headers.authorization, config.metricsToken);
        res.writeHead(answer.status, { 'content-type': answer.contentType }).end(answer.body);
      } else if (path === '/health/live') {
        json(res, 200, { status: 'ok' });
      } else if (path === '/health/ready') {
        if (!health) {
          json(res, 503, { status: 'starting' });
          return;
        }
        const readiness = await checkReadiness(health);
        json(res, readiness.status === 'unavailable' ? 503 : 200, readiness);
      } else {
        json(res, 404, { message: 'Not found (this listener serves /metrics, /health/live and /health/ready)' });
      }
    })().catch((err: unknown) => {
      logger.error({ err }, 'metrics listener failed');
      if (!res.headersSent) json(res, 500, { message: 'Internal error' });
    });
  });
  server.keepAliveTimeout = 65_000;
  const taken = await listen(server, port, '0.0.0.0', 'METRICS_PORT');
  logger.info({ port: taken }, 'metrics listening');
  return {
    port: taken,
    setHealth: (deps) => {
      health = deps;
    },
    stop: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
      setTimeout(() => server.closeAllConnections(), 2000).unref();
    }),
  };
}
