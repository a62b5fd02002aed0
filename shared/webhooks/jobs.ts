/**
 * Webhook delivery jobs and the retry rules (D4) in one place: the relay's direct deliveries and
 * the webhook pool both decide with these when a failed batch is tried again and when it is
 * dead-lettered.
 */
import type { JobsOptions } from 'bullmq';
import type { Db } from '../db/pool.js';
import type { Logger } from '../logger.js';
import { isQueueConnected, webhookJobId, type Queues, type WebhookJob } from '../queues.js';
import { markDead } from './deliver.js';
import { countDeadLettered } from '../metrics.js';

/**
 * Attempts are one more than the retry schedule's length; delays come from the pool's backoff
 * strategy. The batch row counts the attempts that decide (its first may have been made without a
 * job), so the queue's own count only has to be large enough.
 */
export function webhookJobOptions(retries: number): JobsOptions {
  return { removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600 }, attempts: retries + 1, backoff: { type: 'custom' } };
}

/** D4's delay before the next attempt, ±20 % jitter, or the receiver's Retry-After when longer (capped at a day). */
export function retryDelay(attemptsMade: number, schedule: number[], retryAfterMs: number | undefined, random = Math.random): number {
  const base = schedule[Math.min(attemptsMade - 1, schedule.length - 1)] ?? 1000;
  const jittered = Math.round(base * (0.8 + 0.4 * random()));
  return retryAfterMs !== undefined ? Math.max(jittered, Math.min(retryAfterMs, 24 * 3600e3)) : jittered;
}

/**
 * D4: after the last attempt of the schedule (one more than its delays) a failed batch is
 * dead-lettered. `attempts`: the attempts recorded on the batch row, this one included.
 */
export function isExhausted(attempts: number, schedule: readonly number[]): boolean {
  return attempts > schedule.length;
}

/** Dead-letters a failed batch whose attempts are exhausted; false when it is to be tried again. */
export async function deadLetterIfExhausted(
  db: Db, logger: Logger, batchId: number, attempts: number, schedule: readonly number[], reason: string,
): Promise<boolean> {
  if (!isExhausted(attempts, schedule)) {
    return false;
  }
  await markDead(db, batchId);
  countDeadLettered();
  logger.warn({ batchId, attempts, reason }, 'webhook batch dead-lettered');
  return true;
}

export async function enqueueBatches(queues: Queues, batches: Array<{ id: number; url: string }>, retries: number): Promise<void> {
  if (batches.length === 0) {
    return;
  }
  const options = webhookJobOptions(retries);
  await queues.webhooks.addBulk(batches.map((b) => ({
    name: 'deliver',
    data: { batchId: b.id, origin: originOf(b.url) } satisfies WebhookJob,
    opts: { ...options, jobId: webhookJobId(b.id) },
  })));
}

/**
 * Queues the batches a replay made pending again (REST and admin). The replay is committed by
 * then: when Redis cannot take the jobs, the batches are delivered all the same, as the recovery
 * sweep queues a pending batch after a minute without progress (workers/recovery.ts). So the
 * failure is logged, and the call answers what it replayed at once: while Redis is down the
 * queue's client holds commands until it reconnects (the call hung for the whole outage), and a
 * 503 saying nothing was accepted would be untrue (a retry would replay nothing: the batches are
 * no longer dead).
 */
export async function enqueueReplayed(queues: Queues, batches: Array<{ id: number; url: string }>, retries: number, logger: Logger): Promise<void> {
  try {
    if (batches.length > 0 && !(await isQueueConnected(queues.webhooks))) {
      throw new Error('Redis is not connected');
    }
    await enqueueBatches(queues, batches, retries);
  } catch (err) {
    logger.warn({ err: (err as Error).message, batches: batches.length },
      'replayed webhook batches not queued; the recovery sweep queues them once they have waited a minute');
  }
}

/** Jobs for batches whose attempt failed, each after its delay (`retryDelay`). */
export async function enqueueRetries(
  queues: Queues, batches: Array<{ id: number; url: string; delayMs: number }>, schedule: number[],
): Promise<void> {
  if (batches.length === 0) {
    return;
  }
  const options = webhookJobOptions(schedule.length);
  await queues.webhooks.addBulk(batches.map((b) => ({
    name: 'deliver',
    data: { batchId: b.id, origin: originOf(b.url) } satisfies WebhookJob,
    opts: { ...options, jobId: webhookJobId(b.id), delay: b.delayMs },
  })));
}

export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return 'invalid';
  }
}

