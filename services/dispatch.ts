/**
 * The dispatch roles: for each channel family (pool) a process serves, a BullMQ worker per lane,
 * and the carrier connections of the connector kinds that carry that family (with their routes).
 */
import type { Worker } from 'bullmq';
import type { ChannelPool, Lane } from '../shared/queues.js';
import { PROVIDERS } from '../shared/carriers/providers.js';
import { ConnectionManager } from '../shared/carriers/connections.js';
import { startDispatchPool } from '../workers/dispatch-pool.js';
import type { Core } from './core.js';

export interface DispatchRole {
  workers: Worker[];
  connections: ConnectionManager;
  stop(): Promise<void>;
}

export async function startDispatch(core: Core, pools: readonly ChannelPool[], lanes: readonly Lane[]): Promise<DispatchRole> {
  const { config, logger } = core;
  // Only a process that dispatches a family runs that family's connections (an SMPP bind also
  // receives its receipts and MO).
  const providers = [...PROVIDERS.values()].filter((p) => pools.includes(p.family));
  const connections = new ConnectionManager({
    providers,
    context: { db: core.db, redis: core.redis, config, sink: core.engine.sink, logger },
    box: core.secrets,
    registry: core.registry,
  });
  await connections.start();
  const conn = { connection: core.connection, prefix: config.redisPrefix, outages: core.outages };
  const workers = pools.flatMap((pool) => startDispatchPool(core.engine, pool, config.concurrency[pool], conn, logger, lanes, config.dispatchLockMs));
  return {
    workers,
    connections,
    // The connections close alongside the workers: what was not yet written to a carrier goes back
    // to the engine at once, so running dispatch jobs end instead of waiting behind a backlog.
    stop: async () => {
      await Promise.all([...workers.map((w) => w.close()), connections.close()]);
    },
  };
}
