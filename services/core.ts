/**
 * What every process role stands on: configuration, logging, Postgres (created and migrated when
 * asked), Redis, the queues, the engine with its route table, and the sandbox while it is on. Each
 * role's start module (web.ts, dispatch.ts, status.ts, webhooks.ts, sweep.ts) takes it.
 */
import type { ConnectionOptions } from 'bullmq';
import { loadConfig, type Config } from '../shared/config.js';
import { createLogger, type Logger } from '../shared/logger.js';
import { createPool, ensureDatabase, migrate, type Db } from '../shared/db/pool.js';
import { SchemaNotReadyError, describe as describeMigrations, waitForSchema } from '../shared/db/schema.js';
import { createRedis, describeRedisTarget, keepReconnecting, RedisOutages, type Redis } from '../shared/redis.js';
import { Queues, type Lane } from '../shared/queues.js';
import { Engine, type EnginePools } from '../shared/engine/engine.js';
import { CarrierRegistry } from '../shared/engine/routing.js';
import { ingestInbound } from '../shared/engine/inbound.js';
import { SandboxCarrier } from '../shared/carriers/sandbox/sandbox-carrier.js';
import { PROVIDERS, SENDER_ROUTED_FAMILIES } from '../shared/carriers/providers.js';
import { sealLegacyConnections } from '../shared/carriers/store.js';
import { sealLegacyRowSecrets } from '../shared/secrets/row-secrets.js';
import { sealLegacyServiceSecrets } from '../shared/secrets/service-secrets.js';
import { SecretBox } from '../shared/secrets/sealed.js';
import { checkCredentialsKey } from '../shared/secrets/key-check.js';
import { verificationHooks } from '../shared/verification/hooks.js';
import { redactUrl } from '../shared/net/redact-url.js';

export type Role = 'all' | 'web' | 'worker';

export class StartupError extends Error {}

export interface Core {
  role: Role;
  config: Config;
  logger: Logger;
  /** The process's main pool (the engine's, in a worker). */
  db: Db;
  /** The HTTP API's pool: its own in the all-in-one process, else `db`. */
  apiDb: Db;
  enginePools: EnginePools;
  redis: Redis;
  queues: Queues;
  /** How BullMQ workers reach Redis (they duplicate it for their blocking commands). */
  connection: ConnectionOptions;
  /** Redis outages logged once each, for every connection of the process. */
  outages: RedisOutages;
  engine: Engine;
  registry: CarrierRegistry;
  secrets: SecretBox;
  sandbox: SandboxCarrier | null;
  /** Flushes the engine, closes the sandbox, the queues, Redis and Postgres. */
  close(): Promise<void>;
}

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

/** Carrier connections configured by variables (SMPP_URL) that cannot work are a StartupError naming the variable. */
export function checkEnvConnections(config: Config): void {
  for (const provider of PROVIDERS.values()) {
    for (const spec of provider.envConnections?.(config) ?? []) {
      const problem = provider.check?.(spec);
      if (problem) throw new StartupError(`SMPP_URL: ${problem.replace(/^config\.url: /, '')}`);
    }
  }
}

/** A driver's error message ended as one sentence (ioredis' own end in a period: not two). */
function sentence(message: string): string {
  return /[.!?]$/.test(message) ? message : `${message}.`;
}

/** Creates the database when it is missing; unreachable Postgres is a StartupError saying how to start it. */
export async function reachPostgres(config: Config): Promise<void> {
  try {
    await withTimeout(ensureDatabase(config.databaseUrl), 8000, 'Postgres');
  } catch (err) {
    throw new StartupError(`Cannot reach PostgreSQL at ${redactUrl(config.databaseUrl)}: ${sentence((err as Error).message)}\n` +
      'Start it (on this kind of machine: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start) or set DATABASE_URL.');
  }
}

/** A connected Redis client that does not reconnect (yet); unreachable Redis is a StartupError saying how to start it. */
export async function connectRedis(config: Config): Promise<Redis> {
  const target = redisTarget(config);
  const redis = createRedis(target, { lazyConnect: true, retryStrategy: () => null });
  try {
    await withTimeout(redis.connect(), 5000, 'Redis');
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    throw new StartupError(`Cannot reach Redis at ${describeRedisTarget(target, redactUrl)}: ${sentence((err as Error).message)}\n` +
      (config.redisCluster
        ? 'Check REDIS_CLUSTER_NODES (seed nodes of a Redis Cluster whose slots are all assigned).'
        : 'Start it (on this kind of machine: redis-server --daemonize yes --port 6379) or set REDIS_URL.'));
  }
  // A database number the server does not have: ioredis reports the failed SELECT as an event and
  // goes on in database 0, so every queue and counter would silently land there. Ask ourselves.
  const db = config.redisCluster ? 0 : Number(new URL(config.redisUrl).pathname.slice(1) || 0);
  if (db > 0) {
    try {
      await withTimeout(redis.select(db), 5000, 'Redis');
    } catch (err) {
      redis.disconnect();
      throw new StartupError(`REDIS_URL: Redis at ${describeRedisTarget(target, redactUrl)} cannot use database ${db}: ${sentence((err as Error).message)}\n` +
        'Name a database the server has (its `databases` setting; 16 by default: 0 to 15) in REDIS_URL.');
    }
  }
  return redis;
}

/** The Redis this process uses: one server (REDIS_URL) or a cluster's seed nodes (REDIS_CLUSTER_NODES). */
function redisTarget(config: Config) {
  return { url: config.redisUrl, cluster: config.redisCluster };
}

/**
 * Who migrates at start (MIGRATE_ON_START unset): the all-in-one process (`npm start`) and every
 * process outside production. Production `web` and `worker` processes wait for the release step,
 * so that several processes of a new version never migrate at once while old ones still run.
 */
export function migratesOnStart(config: Config, role: Role): boolean {
  return config.migrateOnStart ?? (role === 'all' || !config.production);
}

export interface CoreOptions {
  role: Role;
  /** Whether this process dispatches (it keeps Postgres connections apart for the priority lane and the status intake). */
  dispatching: boolean;
  lanes: readonly Lane[];
  config?: Config;
  logger?: Logger;
}

export async function startCore(opts: CoreOptions): Promise<Core> {
  const config = opts.config ?? loadConfig();
  const logger = opts.logger ?? createLogger(config.logLevel);
  checkEnvConnections(config);
  await reachPostgres(config);
  // Connections add up over the Procfile's processes (about 72 with these defaults, under
  // Postgres' default max_connections of 100); pools open them only when needed. The engine's
  // connections (workers; the all-in-one process's engine) plan with sequential scans off; the
  // API's keep the planner's defaults for its listings.
  const db = createPool(config.databaseUrl, config.dbPoolSize ?? { all: 20, web: 16, worker: 10 }[opts.role], { indexOnly: opts.role !== 'web' });
  if (migratesOnStart(config, opts.role)) {
    const applied = await migrate(db);
    if (applied.length) {
      logger.info({ applied }, 'migrations applied');
    }
  } else {
    try {
      await waitForSchema(db, {
        timeoutMs: config.schemaWaitMs,
        onWait: (pending) => logger.warn({ pending }, `waiting for migrations ${describeMigrations(pending)} (the release step \`switchboard migrate\` applies them)`),
      });
    } catch (err) {
      await db.end();
      if (err instanceof SchemaNotReadyError) throw new StartupError(err.message);
      throw err;
    }
  }
  if (config.sandboxInProduction) {
    logger.warn('SANDBOX=true in production: the sandbox carrier answers every channel without any network and /sandbox/* is open to every API key');
  }
  const secrets = new SecretBox(config.credentialsKey);
  const keyProblem = await checkCredentialsKey(db, secrets);
  if (keyProblem) {
    await db.end();
    throw new StartupError(keyProblem);
  }
  if (config.credentialsKeyIsDevelopmentDefault) {
    logger.warn('CREDENTIALS_KEY is not set: carrier credentials are sealed with the development key (set it before storing real ones)');
  }
  const sealed = await sealLegacyConnections(db, secrets, PROVIDERS);
  if (sealed > 0) {
    logger.info({ connections: sealed }, 'stored SMPP passwords sealed with CREDENTIALS_KEY');
  }
  const sealedRows = await sealLegacyRowSecrets(db, secrets);
  const sealedMasters = await sealLegacyServiceSecrets(db, secrets);
  if (sealedRows + sealedMasters > 0) {
    logger.info({ rows: sealedRows, masters: sealedMasters }, 'stored verification and webhook secrets and master secrets sealed with CREDENTIALS_KEY');
  }

  const target = redisTarget(config);
  let redis: Redis;
  try {
    redis = await connectRedis(config);
  } catch (err) {
    await db.end();
    throw err;
  }
  // Reconnect from now on: a Redis restart should not take the service down.
  keepReconnecting(redis);
  const outages = new RedisOutages(logger);
  outages.watch(redis, 'main');
  // One Redis: each queue and worker opens its own connections from these options. A cluster: they
  // share one cluster client (BullMQ duplicates it for the workers' blocking commands), and every
  // queue's keys carry a hash tag of their own (queuePrefix).
  let queueClient: Redis | null = null;
  if (config.redisCluster) {
    queueClient = createRedis(target);
    outages.watch(queueClient, 'queues');
  }
  const connection: ConnectionOptions = queueClient ?? { url: config.redisUrl, maxRetriesPerRequest: null };
  const queues = new Queues(connection, config.redisPrefix, config.concurrency.status, (source, err) => {
    if (!outages.error(source, err)) logger.error({ source, err: err.message }, 'queue error');
  });

  const registry = new CarrierRegistry(SENDER_ROUTED_FAMILIES);
  // A dispatching process keeps a few connections apart for the priority lane (unless it serves
  // only that lane) and the status intake.
  const enginePools: EnginePools = opts.dispatching
    ? {
      ...(opts.lanes.includes('priority') && opts.lanes.length > 1 && { priority: createPool(config.databaseUrl, 4, { indexOnly: true }) }),
      status: createPool(config.databaseUrl, 2, { indexOnly: true }),
    }
    : {};
  // In the all-in-one process the HTTP API gets connections of its own, so an accept never waits
  // for the workers' transactions (and a priority message's accept is not queued behind them).
  const apiDb = opts.role === 'all' ? createPool(config.databaseUrl, 10) : db;
  const engine = new Engine({ db, queues, redis, config, logger, carriers: registry }, {}, enginePools);
  engine.setHooks(verificationHooks(db, config));
  engine.onInbound(async (message) => {
    await ingestInbound(db, message);
  });
  const sandbox = config.sandbox ? new SandboxCarrier(db, engine.sink, logger, { slowDeliveryMs: config.sandboxSlowDeliveryMs }) : null;
  registry.setDefault(sandbox);
  // Only a process that hands attempts to the sandbox replays what a stopped one left pending.
  if (sandbox && opts.dispatching) sandbox.start();

  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      await engine.close();
      await sandbox?.close();
      await queues.close();
      queueClient?.disconnect();
      redis.disconnect();
      await Promise.all([db.end(), apiDb === db ? null : apiDb.end(), enginePools.priority?.end(), enginePools.status?.end()]);
    })();
    return closing;
  };
  return { role: opts.role, config, logger, db, apiDb, enginePools, redis, queues, connection, outages, engine, registry, secrets, sandbox, close };
}
