/**
 * Assembling a process from its roles. `all` runs every role in one process; the Procfile (and
 * `npm start`, services/start.ts, which runs the Procfile's roles as children) runs `web` and
 * `worker --pools=…` processes, so the one-process mode and the scaled-out deployment run the same
 * start modules. Shutdown goes in order: stop taking requests,
 * stop producing work (relay, sweep), let running jobs finish while carrier connections close, then
 * flush the engine and close the connections to Redis and Postgres.
 */
import type { Server } from 'node:http';
import type { Worker } from 'bullmq';
import type { Config } from '../shared/config.js';
import type { Logger } from '../shared/logger.js';
import type { Db } from '../shared/db/pool.js';
import type { Redis } from '../shared/redis.js';
import { CHANNEL_POOLS, LANES, type ChannelPool, type Lane, type Queues } from '../shared/queues.js';
import type { Engine } from '../shared/engine/engine.js';
import type { ConnectionManager } from '../shared/carriers/connections.js';
import { startCore, StartupError, type Core, type Role } from './core.js';
import { startMetricsServer } from './metrics-server.js';
import { ConfigError, loadConfig, metricsPortCollision } from '../shared/config.js';
import { createLogger } from '../shared/logger.js';
import { startWeb, type WebRole } from './web.js';
import { startDispatch, type DispatchRole } from './dispatch.js';
import { startStatus, type StatusRole } from './status.js';
import { startWebhooks, type WebhooksRole } from './webhooks.js';
import { startSweep, type SweepRole } from './sweep.js';

export { StartupError, type Role };

export type PoolName = ChannelPool | 'status' | 'webhooks' | 'relay' | 'sweep';
export const ALL_POOLS: PoolName[] = [...CHANNEL_POOLS, 'status', 'webhooks', 'relay', 'sweep'];

export interface Runtime {
  config: Config;
  logger: Logger;
  db: Db;
  redis: Redis;
  queues: Queues;
  engine: Engine;
  /** The carrier connections of the families this process dispatches, or null. */
  connections: ConnectionManager | null;
  server: Server | null;
  workers: Worker[];
  /** Port the HTTP server listens on (useful when PORT=0). */
  port: number | null;
  /** Port of the METRICS_PORT listener, or null. */
  metricsPort: number | null;
  stop(): Promise<void>;
}

export async function startRuntime(opts: {
  role: Role; pools?: PoolName[]; lanes?: readonly Lane[]; config?: Config; logger?: Logger;
  /** Named in every log line as `process` (`switchboard start` names each child by its Procfile role). */
  processName?: string;
}): Promise<Runtime> {
  const pools = new Set(opts.role === 'web' ? [] : (opts.pools ?? ALL_POOLS));
  const lanes = opts.lanes ?? LANES;
  const channelPools = CHANNEL_POOLS.filter((p) => pools.has(p));
  const config = opts.config ?? loadConfig();
  const base = opts.logger ?? createLogger(config.logLevel);
  const logger = opts.processName ? base.child({ process: opts.processName }) : base;
  // A process that listens on PORT too refuses a METRICS_PORT equal to it before either listens.
  const collision = opts.role !== 'worker' ? metricsPortCollision(config, [opts.processName ?? opts.role]) : null;
  if (collision) throw new ConfigError([collision]);
  // Opened first: a taken METRICS_PORT stops the process before anything else starts, and probes
  // answer (live, not yet ready) while it connects.
  const metrics = config.metricsPort !== null ? await startMetricsServer(config, logger, config.metricsPort) : null;
  let core: Core;
  try {
    core = await startCore({ role: opts.role, dispatching: channelPools.length > 0, lanes, config, logger });
  } catch (err) {
    await metrics?.stop();
    throw err;
  }
  metrics?.setHealth({ db: core.db, redis: core.redis, config, secrets: core.secrets });
  let dispatch: DispatchRole | null = null;
  let status: StatusRole | null = null;
  let webhooks: WebhooksRole | null = null;
  let sweep: SweepRole | null = null;
  let web: WebRole | null = null;
  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      await web?.stop();
      await webhooks?.stopRelay();
      await sweep?.stop();
      await Promise.all([dispatch?.stop(), status?.stop(), webhooks?.stop()]);
      await core.close();
      await metrics?.stop();
      core.logger.info('switchboard stopped');
    })();
    return stopping;
  };
  try {
    dispatch = channelPools.length > 0 ? await startDispatch(core, channelPools, lanes) : null;
    status = pools.has('status') ? await startStatus(core) : null;
    webhooks = pools.has('webhooks') || pools.has('relay') ? startWebhooks(core, { pool: pools.has('webhooks'), relay: pools.has('relay') }) : null;
    sweep = pools.has('sweep') ? startSweep(core) : null;
    web = opts.role !== 'worker' ? await startWeb(core) : null;
  } catch (err) {
    // What started is stopped again (a taken port must not leave workers running behind it).
    await stop().catch(() => undefined);
    throw err;
  }
  core.logger.info({ role: opts.role, pools: [...pools] }, 'switchboard started');
  return {
    config: core.config, logger: core.logger, db: core.db, redis: core.redis, queues: core.queues, engine: core.engine,
    connections: dispatch?.connections ?? null, server: web?.server ?? null,
    workers: [...(dispatch?.workers ?? []), ...(status?.workers ?? []), ...(webhooks?.workers ?? [])], port: web?.port ?? null,
    metricsPort: metrics?.port ?? null, stop,
  };
}
