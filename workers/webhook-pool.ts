/**
 * The webhook pool. Retries follow D4's schedule with ±20 % jitter, or the receiver's
 * `Retry-After` when it is longer; after the last attempt the batch is dead-lettered in Postgres.
 * A receiver (origin) may hold only a share of the pool's slots at once: a slow or dead endpoint
 * cannot starve the other customers' deliveries (its extra jobs step aside for a moment without
 * spending an attempt). The slots are shared with the relay's direct deliveries in the same process.
 * Retry delays and the dead-letter decision follow the attempts recorded on the batch, which include
 * a first attempt the relay may have made without a job.
 */
import { Worker, DelayedError, type Job } from 'bullmq';
import type { Db } from '../shared/db/pool.js';
import type { Logger } from '../shared/logger.js';
import { WEBHOOK_QUEUE, type WebhookJob } from '../shared/queues.js';
import type { WebhookClient } from '../shared/webhooks/http.js';
import { deliverBatch } from '../shared/webhooks/deliver.js';
import { deadLetterIfExhausted, retryDelay } from '../shared/webhooks/jobs.js';
import type { OriginSlots } from '../shared/webhooks/direct.js';
import type { WebhookFailureLog } from '../shared/webhooks/failure-log.js';
import { logWorkerErrors, workerPrefix, type WorkerConnection } from './connection.js';
import type { SecretBox } from '../shared/secrets/sealed.js';
import { countDeadLettered } from '../shared/metrics.js';

/** A failed attempt to be made again after `delayMs` (D4's schedule, computed once, logged with it). */
class RetryLater extends Error {
  constructor(readonly delayMs: number, reason: string) {
    super(reason);
    this.name = 'RetryLater';
  }
}

export interface WebhookPoolOptions {
  concurrency: number;
  retryScheduleMs: number[];
  allowPrivate: boolean;
}

/** Deliveries to one origin at once: a quarter of the pool, at least 2. */
export function perOriginLimit(concurrency: number): number {
  return Math.max(2, Math.floor(concurrency / 4));
}

export function startWebhookPool(
  db: Db, opts: WebhookPoolOptions, deps: { client: WebhookClient; slots: OriginSlots; failures: WebhookFailureLog; box: SecretBox }, conn: WorkerConnection, logger: Logger,
): Worker {
  const { client, slots, failures, box } = deps;

  const worker = new Worker<WebhookJob>(
    WEBHOOK_QUEUE,
    async (job: Job<WebhookJob>, token?: string) => {
      const origin = job.data.origin;
      if (!slots.tryTake(origin)) {
        await job.moveToDelayed(Date.now() + 200 + Math.floor(Math.random() * 300), token);
        throw new DelayedError();
      }
      try {
        const result = await deliverBatch(db, box, client, job.data.batchId, opts.allowPrivate);
        if (result.kind === 'dead') {
          countDeadLettered();
          logger.warn({ batchId: job.data.batchId }, 'webhook batch dead-lettered: its events are no longer stored');
        }
        if (result.kind !== 'failed') {
          return result.kind;
        }
        const failure = { keyId: result.keyId, url: result.url, status: result.status, reason: result.reason, attempts: result.attempts };
        if (await deadLetterIfExhausted(db, logger, job.data.batchId, result.attempts, opts.retryScheduleMs, result.reason)) {
          failures.failed({ ...failure, nextRetryMs: null });
          return 'dead';
        }
        const delayMs = retryDelay(result.attempts, opts.retryScheduleMs, result.retryAfterMs);
        failures.failed({ ...failure, nextRetryMs: delayMs });
        throw new RetryLater(delayMs, result.reason);
      } finally {
        slots.give(origin);
      }
    },
    {
      connection: conn.connection,
      prefix: workerPrefix(conn, WEBHOOK_QUEUE),
      concurrency: opts.concurrency,
      settings: {
        backoffStrategy: (attemptsMade: number, _type?: string, err?: Error) =>
          err instanceof RetryLater ? err.delayMs : retryDelay(attemptsMade, opts.retryScheduleMs, undefined),
      },
    },
  );
  logWorkerErrors(worker, conn, logger, 'webhook');
  return worker;
}

