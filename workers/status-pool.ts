/**
 * The status-update pool: applies batches of carrier reports (and the ttl jobs of earlier versions;
 * ttl timers are fired by TtlExpiry, shared/engine/ttl-timers.ts). One worker per
 * status partition; each partition is limited to one job at a time across every process (BullMQ
 * global concurrency), so one attempt's reports are applied in the order they arrived.
 */
import { Worker, type Job } from 'bullmq';
import type { Engine } from '../shared/engine/engine.js';
import type { Logger } from '../shared/logger.js';
import type { Queues, StatusJob } from '../shared/queues.js';
import { logWorkerErrors, workerPrefix, type WorkerConnection } from './connection.js';

export async function startStatusPool(engine: Engine, queues: Queues, conn: WorkerConnection, logger: Logger): Promise<Worker[]> {
  return Promise.all(queues.status.map(async (queue) => {
    await queue.setGlobalConcurrency(1);
    const worker = new Worker<StatusJob>(
      queue.name,
      async (job: Job<StatusJob>) => engine.applyStatusJob(job.data),
      { connection: conn.connection, prefix: workerPrefix(conn, queue.name), concurrency: 1 },
    );
    logWorkerErrors(worker, conn, logger, 'status');
    worker.on('failed', (job, err) => {
      if (job && job.attemptsMade >= (job.opts.attempts ?? 1)) {
        logger.error({ queue: queue.name, jobId: job.id, err: err.message }, 'status job failed for good');
      }
    });
    return worker;
  }));
}
