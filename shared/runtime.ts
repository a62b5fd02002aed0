/**
 * Assembling the service: connections, queues, carriers, engine, HTTP and worker pools, and an
 * ordered shutdown. One function builds every process role (`all`, `web`, `worker`), so the
 * single-process default and the scaled-out Procfile run the same code.
 */
import type { Server } from 'node:http';
import type { Worker } from 'bullmq';
import { loadConfig, type Config } from './config.js';
import { createLogger, type Logger } from './logger.js';
import { createPool, ensureDatabase, migrate, type Db } from './db/pool.js';
import { createRedis, type Redis } from './redis.js';
import { Queues, CHANNEL_POOLS, LANES, type ChannelPool, type Lane } from './queues.js';
import { Engine, type EnginePools } from './engine/engine.js';
import { CarrierRegistry } from './engine/routing.js';
import { ingestInbound } from './engine/inbound.js';
import { SandboxCarrier } from './carriers/sandbox/sandbox-carrier.js';
import { SmppConnections } from './carriers/smpp/connections.js';
import { parseSmppUrl } from './carriers/smpp/session.js';
import { buildApp } from '../api/app.js';
import { startDispatchPool } from '../workers/dispatch-pool.js';
import { startStatusPool } from '../workers/status-pool.js';
import { perOriginLimit, startWebhookPool } from '../workers/webhook-pool.js';
import { OutboxRelay } from './webhooks/relay.js';
import { DirectDelivery, OriginSlots } from './webhooks/direct.js';
import { WebhookClient } from './webhooks/http.js';
import { RecoverySweep } from '../workers/recovery.js';
import { verificationHooks } from './verification/hooks.js';

export type Role = 'all' | 'web' | 'worker';
export type PoolName = ChannelPool | 'status' | 'webhooks' | 'relay' | 'sweep';
export const ALL_POOLS: PoolName[] = [...CHANNEL_POOLS, 'status', 'webhooks', 'relay', 'sweep'];

export interface Runtime {
  config: Config;
  logger: Logger;
  db: Db;
  redis: Redis;
  queues: Queues;
  engine: Engine;
  server: Server | null;
  workers: Worker[];
  /** Port the HTTP server listens on (useful when PORT=0). */
  port: number | null;
  stop(): Promise<void>;
}

export class StartupError extends Error {}

async function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    })]);
  } finally {
    clearTimeout(timer);
  }
}

export async function startRuntime(opts: { role: Role; pools?: PoolName[]; lanes?: readonly Lane[]; config?: Config; logger?: Logger }): Promise<Runtime> {
  const config = opts.config ?? loadConfig();
  const logger = opts.logger ?? createLogger(config.logLevel);
  const pools = new Set(opts.role === 'web' ? [] : (opts.pools ?? ALL_POOLS));
  const lanes = opts.lanes ?? LANES;
  if (config.smppUrl) {
    try {
      parseSmppUrl(config.smppUrl);
    } catch (err) {
      throw new StartupError(`SMPP_URL: ${(err as Error).message}`);
    }
  }

  try {
    await withTimeout(ensureDatabase(config.databaseUrl), 8000, 'Postgres');
  } catch (err) {
    throw new StartupError(`Cannot reach PostgreSQL at ${redactUrl(config.databaseUrl)}: ${(err as Error).message}.\n` +
      'Start it (on this kind of machine: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start) or set DATABASE_URL.');
  }
  // Connections add up over the Procfile's processes (about 72 with these defaults, under
  // Postgres' default max_connections of 100); pools open them only when needed.
  // The engine's connections (workers; the all-in-one process's engine) plan with sequential scans
  // off; the API's keep the planner's defaults for its listings.
  const db = createPool(config.databaseUrl, config.dbPoolSize ?? { all: 20, web: 16, worker: 10 }[opts.role], { indexOnly: opts.role !== 'web' });
  if (config.migrateOnStart) {
    const applied = await migrate(db);
    if (applied.length) {
      logger.info({ applied }, 'migrations applied');
    }
  }
  const redis = createRedis(config.redisUrl, { lazyConnect: true, retryStrategy: () => null });
  try {
    await withTimeout(redis.connect(), 5000, 'Redis');
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    await db.end();
    throw new StartupError(`Cannot reach Redis at ${redactUrl(config.redisUrl)}: ${(err as Error).message}.\n` +
      'Start it (on this kind of machine: redis-server --daemonize yes --port 6379) or set REDIS_URL.');
  }
  // Reconnect from now on: a Redis restart should not take the service down.
  redis.options.retryStrategy = (times: number) => Math.min(times * 200, 2000);
  const connection = { url: config.redisUrl, maxRetriesPerRequest: null };
  const queues = new Queues(connection, config.redisPrefix, config.concurrency.status);

  const registry = new CarrierRegistry(null);
  // A dispatching process keeps a few connections apart for the priority lane and the status intake.
  const dispatching = CHANNEL_POOLS.some((p) => pools.has(p));
  // A process that serves only the priority lane needs no pool apart for it.
  const enginePools: EnginePools = dispatching
    ? { ...(lanes.includes('priority') && lanes.length > 1 && { priority: createPool(config.databaseUrl, 4, { indexOnly: true }) }), status: createPool(config.databaseUrl, 2, { indexOnly: true }) }
    : {};
  // In the all-in-one process the HTTP API gets connections of its own, so an accept never waits
  // for the workers' transactions (and a priority message's accept is not queued behind them).
  const apiDb = opts.role === 'all' ? createPool(config.databaseUrl, 10) : db;
  const engine = new Engine({ db, queues, config, logger, carriers: registry }, {}, enginePools);
  engine.setHooks(verificationHooks(db, config));
  if (config.sandbox) {
    registry.setFallback(new SandboxCarrier(db, engine.sink, logger, config.sandboxSlowDeliveryMs));
  }
  engine.onInbound(async (message) => {
    await ingestInbound(db, message);
  });
  // Only a process that dispatches SMS binds to SMSCs (and receives their receipts and MO).
  let smpp: SmppConnections | null = null;
  if (pools.has('sms')) {
    smpp = new SmppConnections({
      db, redis, redisPrefix: config.redisPrefix, smppUrl: config.smppUrl, sink: engine.sink, registry, logger,
    });
    await smpp.start();
  }

  const workers: Worker[] = [];
  const conn = { connection, prefix: config.redisPrefix };
  for (const pool of CHANNEL_POOLS) {
    if (pools.has(pool)) {
      workers.push(...startDispatchPool(engine, pool, config.concurrency[pool], conn, logger, lanes));
    }
  }
  if (pools.has('status')) {
    workers.push(...await startStatusPool(engine, queues, conn, logger));
  }
  // One HTTP client and one set of per-receiver slots for the webhook pool and the relay's direct deliveries.
  const webhookClient = pools.has('webhooks') || pools.has('relay') ? new WebhookClient({ allowPrivate: config.allowPrivateCallbacks }) : null;
  const originSlots = new OriginSlots(perOriginLimit(config.concurrency.webhooks));
  if (pools.has('webhooks')) {
    workers.push(startWebhookPool(db, {
      concurrency: config.concurrency.webhooks, retryScheduleMs: config.webhookRetryScheduleMs, allowPrivate: config.allowPrivateCallbacks,
    }, { client: webhookClient!, slots: originSlots }, conn, logger));
  }
  let relay: OutboxRelay | null = null;
  if (pools.has('relay')) {
    const direct = new DirectDelivery({ db, client: webhookClient!, queues, slots: originSlots, logger }, {
      concurrency: config.concurrency.webhooks, allowPrivate: config.allowPrivateCallbacks, retryScheduleMs: config.webhookRetryScheduleMs,
      maxWaitingBytes: config.webhookDirectBacklogBytes,
    });
    relay = new OutboxRelay(db, queues, {
      batchMax: config.webhookBatchMax, lingerMs: config.webhookLingerMs, retries: config.webhookRetryScheduleMs.length,
      intervalMs: Math.max(20, Math.min(200, config.webhookLingerMs)), rescanMs: config.webhookRelayRescanMs,
    }, (err) => logger.error({ err: err.message }, 'outbox relay pass failed'), direct);
    relay.start();
  }
  let sweep: RecoverySweep | null = null;
  if (pools.has('sweep')) {
    sweep = new RecoverySweep(db, queues, {
      intervalMs: config.recoverySweepMs, graceMs: Math.max(config.recoverySweepMs, 30_000), webhookRetries: config.webhookRetryScheduleMs.length,
    }, logger);
    sweep.start();
  }

  let server: Server | null = null;
  let port: number | null = null;
  if (opts.role !== 'worker') {
    const app = buildApp({ config, db: apiDb, redis, queues, logger, engine });
    server = await new Promise<Server>((resolve, reject) => {
      const s = app.listen(config.port, '0.0.0.0', () => resolve(s));
      s.once('error', reject);
    });
    server.keepAliveTimeout = 65_000;
    const address = server.address();
    port = typeof address === 'object' && address ? address.port : config.port;
    logger.info({ port, sandbox: config.sandbox }, 'HTTP listening');
  }
  if (!config.adminToken) {
    logger.warn('ADMIN_TOKEN is not set: the admin API and bull-board refuse every call');
  }
  logger.info({ role: opts.role, pools: [...pools] }, 'switchboard started');

  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      // 1. stop taking requests; 2. stop taking jobs and let running ones finish; 3. close connections.
      if (server) {
        const s = server;
        await new Promise<void>((resolve) => {
          s.close(() => resolve());
          s.closeIdleConnections();
          setTimeout(() => s.closeAllConnections(), 5000).unref();
        });
      }
      await relay?.stop();
      sweep?.stop();
      // SMPP closes alongside the workers: PDUs not yet written go back to the engine at once, so
      // running dispatch jobs end instead of waiting behind a rate-limited backlog.
      await Promise.all([...workers.map((w) => w.close()), smpp?.close()]);
      await engine.close();
      await webhookClient?.close();
      await queues.close();
      redis.disconnect();
      await Promise.all([db.end(), apiDb === db ? null : apiDb.end(), enginePools.priority?.end(), enginePools.status?.end()]);
      logger.info('switchboard stopped');
    })();
    return stopping;
  };
  return { config, logger, db, redis, queues, engine, server, workers, port, stop };
}

function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) {
      url.password = '***';
    }
    return url.toString();
  } catch {
    return '(unparsable URL)';
  }
}
