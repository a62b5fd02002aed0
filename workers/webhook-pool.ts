/**
 * The webhook pool. Retries follow D4's schedule with ±20 % jitter, or the receiver's
 * `Retry-After` when it is longer; after the last attempt the batch is dead-lettered in Postgres.
 * A receiver (origin) may hold only a share of the pool's slots at once: a slow or dead endpoint
 * cannot starve the other customers' deliveries (its extra jobs step aside for a moment without
 * spending an attempt).
 */
import { Worker, DelayedError, type Job } from 'bullmq';
import type { Db } from '../shared/db/pool.js';
import type { Logger } from '../shared/logger.js';
import { WEBHOOK_QUEUE, type WebhookJob } from '../shared/queues.js';
import { WebhookClient } from '../shared/webhooks/http.js';
import { deliverBatch, markDead } from '../shared/webhooks/deliver.js';
import type { WorkerConnection } from './connection.js';

class RetryLater extends Error {
  constructor(readonly retryAfterMs: number | undefined, reason: string) {
    super(reason);
    this.name = 'RetryLater';
  }
}

export interface WebhookPoolOptions {
  concurrency: number;
  retryScheduleMs: number[];
  allowPrivate: boolean;
  /** Max concurrent deliveries to one origin; default a quarter of the pool (at least 2). */
  perOriginLimit?: number;
}

export function retryDelay(attemptsMade: number, schedule: number[], retryAfterMs: number | undefined, random = Math.random): number {
  const base = schedule[Math.min(attemptsMade - 1, schedule.length - 1)] ?? 1000;
  const jittered = Math.round(base * (0.8 + 0.4 * random()));
  return retryAfterMs !== undefined ? Math.max(jittered, Math.min(retryAfterMs, 24 * 3600e3)) : jittered;
}

export function startWebhookPool(db: Db, opts: WebhookPoolOptions, conn: WorkerConnection, logger: Logger): { worker: Worker; client: WebhookClient } {
  const client = new WebhookClient({ allowPrivate: opts.allowPrivate });
  const perOrigin = opts.perOriginLimit ?? Math.max(2, Math.floor(opts.concurrency / 4));
  const inflight = new Map<string, number>();
  const maxAttempts = opts.retryScheduleMs.length + 1;

  const worker = new Worker<WebhookJob>(
    WEBHOOK_QUEUE,
    async (job: Job<WebhookJob>, token?: string) => {
      const origin = job.data.origin;
      const busy = inflight.get(origin) ?? 0;
      if (busy >= perOrigin) {
        await job.moveToDelayed(Date.now() + 200 + Math.floor(Math.random() * 300), token);
        throw new DelayedError();
      }
      inflight.set(origin, busy + 1);
      try {
        const result = await deliverBatch(db, client, job.data.batchId, opts.allowPrivate);
        if (result.kind !== 'failed') {
          return result.kind;
        }
        if (job.attemptsMade + 1 >= maxAttempts) {
          await markDead(db, job.data.batchId);
          logger.warn({ batchId: job.data.batchId, reason: result.reason }, 'webhook batch dead-lettered');
          return 'dead';
        }
        throw new RetryLater(result.retryAfterMs, result.reason);
      } finally {
        const left = (inflight.get(origin) ?? 1) - 1;
        if (left <= 0) {
          inflight.delete(origin);
        } else {
          inflight.set(origin, left);
        }
      }
    },
    {
      connection: conn.connection,
      prefix: conn.prefix,
      concurrency: opts.concurrency,
      settings: {
        backoffStrategy: (attemptsMade: number, _type?: string, err?: Error) =>
          retryDelay(attemptsMade, opts.retryScheduleMs, err instanceof RetryLater ? err.retryAfterMs : undefined),
      },
    },
  );
  worker.on('error', (err) => logger.error({ err: err.message }, 'webhook worker error'));
  return { worker, client };
}

