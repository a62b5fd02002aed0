import type { ConnectionOptions, Worker } from 'bullmq';
import type { Logger } from '../shared/logger.js';
import { isCluster, type RedisOutages } from '../shared/redis.js';
import { queuePrefix } from '../shared/queues.js';

/**
 * How workers reach Redis: BullMQ duplicates the connection for its blocking commands. On a Redis
 * Cluster `connection` is the cluster client (see `Queues`).
 */
export interface WorkerConnection {
  connection: ConnectionOptions;
  /** REDIS_PREFIX; a queue's own BullMQ prefix is `workerPrefix(conn, name)`. */
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

/** The BullMQ prefix of a worker on the queue `name`: the one its producers use (`queuePrefix`). */
export function workerPrefix(conn: WorkerConnection, name: string): string {
  return queuePrefix(conn.prefix, name, isCluster(conn.connection));
}
