/** The `status` role: the status pool applies queued carrier reports and fires ttl timers. */
import type { Worker } from 'bullmq';
import { startStatusPool } from '../workers/status-pool.js';
import type { Core } from './core.js';

export interface StatusRole {
  workers: Worker[];
  stop(): Promise<void>;
}

export async function startStatus(core: Core): Promise<StatusRole> {
  const workers = await startStatusPool(core.engine, core.queues, { connection: core.connection, prefix: core.config.redisPrefix, outages: core.outages }, core.logger);
  return { workers, stop: async () => void await Promise.all(workers.map((w) => w.close())) };
}
