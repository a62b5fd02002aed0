/** The status-update pool: applies batches of carrier reports and fires ttl timers. */
import { Worker, type Job } from 'bullmq';
import type { Engine } from '../shared/engine/engine.js';
import type { Logger } from '../shared/logger.js';
import { STATUS_QUEUE, type StatusJob } from '../shared/queues.js';
import type { WorkerConnection } from './connection.js';

export function startStatusPool(engine: Engine, concurrency: number, conn: WorkerConnection, logger: Logger): Worker {
  const worker = new Worker<StatusJob>(
    STATUS_QUEUE,
    async (job: Job<StatusJob>) => engine.applyStatusJob(job.data),
    { connection: conn.connection, prefix: conn.prefix, concurrency },
  );
  worker.on('error', (err) => logger.error({ err: err.message }, 'status worker error'));
  worker.on('failed', (job, err) => {
    if (job && job.attemptsMade >= (job.opts.attempts ?? 1)) {
      logger.error({ jobId: job.id, err: err.message }, 'status job failed for good');
    }
  });
  return worker;
}
