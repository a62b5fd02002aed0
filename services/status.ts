/** The `status` role: the status pool applies queued carrier reports; due ttl timers are fired. */
import type { Worker } from 'bullmq';
import { startStatusPool } from '../workers/status-pool.js';
import { TtlExpiry } from '../shared/engine/ttl-timers.js';
import type { Core } from './core.js';

export interface StatusRole {
  workers: Worker[];
  stop(): Promise<void>;
}

export async function startStatus(core: Core): Promise<StatusRole> {
  const workers = await startStatusPool(core.engine, core.queues, { connection: core.connection, prefix: core.config.redisPrefix, outages: core.outages }, core.logger);
  const expiry = new TtlExpiry(core.engine.ttlTimers, (ids) => core.engine.expire(ids), core.logger);
  expiry.start();
  return {
    workers,
    stop: async () => {
      await expiry.stop();
      await Promise.all(workers.map((w) => w.close()));
    },
  };
}
