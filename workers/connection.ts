import type { ConnectionOptions } from 'bullmq';

/** How workers reach Redis: BullMQ duplicates the connection for its blocking commands. */
export interface WorkerConnection {
  connection: ConnectionOptions;
  prefix: string;
}
