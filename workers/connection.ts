import type { ConnectionOptions, Worker } from 'bullmq';
import type { Logger } from '../shared/logger.js';
import type { RedisOutages } from '../shared/redis.js';

/** How workers reach Redis: BullMQ duplicates the connection for its blocking commands. */
export interface WorkerConnection {
  connection: ConnectionOptions;
  prefix: string;
  /** Where connection errors go (one line per outage); other worker errors are logged. */
  outages?: RedisOutages;
}

/** Logs a worker's errors: Redis outages once each (through `outages`), anything else as it comes. */
export function logWorkerErrors(worker: Worker, conn: WorkerConnection, logger: Logger, what: string): void {
  worker.on('error', (err) => {
    if (conn.outages?.error(`worker ${worker.name}`, err)) return;
    logger.error({ queue: worker.name, err: err.message }, `${what} worker error`);
  });
}
