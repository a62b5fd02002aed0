/**
 * First delivery attempts made by the relay itself, right after it created the batches: the
 * batch's events are already in memory, so the attempt costs one POST and a share of one update
 * statement, instead of a queue job (three Redis scripts), two reads and an update of its own.
 * Batches stay durable and pending in Postgres until their outcome is recorded: a crash in
 * between leaves them to the recovery sweep (delivered again, at least once). A batch that finds
 * no free slot, and every retry, goes through the webhook queue as before.
 */
import type { Db } from '../db/pool.js';
import type { Logger } from '../logger.js';
import type { Queues } from '../queues.js';
import type { WebhookClient, WebhookPostResult } from './http.js';
import { failureReason, markDead, postBatch, recordOutcomes, type BatchToPost } from './deliver.js';
import { enqueueRetries, originOf } from './relay.js';

/**
 * Delivery slots per receiver (origin), shared by the direct deliveries and the webhook queue's
 * worker of a process: a slow or dead receiver cannot hold more than its share of either.
 */
export class OriginSlots {
  private readonly taken = new Map<string, number>();

  constructor(readonly perOrigin: number) {}

  tryTake(origin: string): boolean {
    const busy = this.taken.get(origin) ?? 0;
    if (busy >= this.perOrigin) {
      return false;
    }
    this.taken.set(origin, busy + 1);
    return true;
  }

  give(origin: string): void {
    const left = (this.taken.get(origin) ?? 1) - 1;
    if (left <= 0) {
      this.taken.delete(origin);
    } else {
      this.taken.set(origin, left);
    }
  }
}

export interface ReadyBatch extends BatchToPost {
  id: number;
}

export interface DirectDeliveryOptions {
  /** POSTs in flight at most (besides the queue worker's). */
  concurrency: number;
  allowPrivate: boolean;
  /** D4's retry schedule: its length is the number of retries after the first attempt. */
  retryScheduleMs: number[];
}

interface Outcome {
  batch: ReadyBatch;
  result: WebhookPostResult;
}

export class DirectDelivery {
  private inFlight = 0;
  private readonly running = new Set<Promise<void>>();
  private outcomes: Outcome[] = [];
  private recording: Promise<void> | null = null;

  constructor(
    private readonly deps: { db: Db; client: WebhookClient; queues: Queues; slots: OriginSlots; logger: Logger },
    private readonly opts: DirectDeliveryOptions,
  ) {}

  /** Starts delivering the batch if a slot is free for it and for its receiver; false: queue it instead. */
  offer(batch: ReadyBatch): boolean {
    if (this.inFlight >= this.opts.concurrency) {
      return false;
    }
    const origin = originOf(batch.url);
    if (!this.deps.slots.tryTake(origin)) {
      return false;
    }
    this.inFlight += 1;
    const delivery = postBatch(this.deps.client, batch, this.opts.allowPrivate).then((result) => {
      this.outcomes.push({ batch, result });
      this.recordSoon();
    }).finally(() => {
      this.inFlight -= 1;
      this.deps.slots.give(origin);
      this.running.delete(delivery);
    });
    this.running.add(delivery);
    return true;
  }

  /** Waits for the deliveries under way and the recording of their outcomes. */
  async drain(): Promise<void> {
    while (this.running.size > 0 || this.recording) {
      await Promise.all([...this.running, this.recording]);
    }
  }

  /** Outcomes that finish together are recorded in one statement. */
  private recordSoon(): void {
    this.recording ??= (async () => {
      await new Promise<void>((resolve) => setImmediate(resolve));
      while (this.outcomes.length > 0) {
        const list = this.outcomes;
        this.outcomes = [];
        try {
          await this.record(list);
        } catch (err) {
          // The batches stay pending: the recovery sweep queues them again (delivered twice at worst).
          this.deps.logger.error({ err: (err as Error).message, batches: list.length }, 'webhook delivery outcomes not recorded');
        }
      }
      this.recording = null;
    })();
  }

  private async record(list: Outcome[]): Promise<void> {
    const attempts = await recordOutcomes(this.deps.db, list.map((o) => ({ batchId: o.batch.id, result: o.result })));
    const retries: Array<{ id: number; url: string; attempts: number; retryAfterMs?: number }> = [];
    for (const { batch, result } of list) {
      if (result.ok) {
        continue;
      }
      const made = attempts.get(batch.id) ?? 1;
      if (made > this.opts.retryScheduleMs.length) {
        await markDead(this.deps.db, batch.id);
        this.deps.logger.warn({ batchId: batch.id, reason: failureReason(result) }, 'webhook batch dead-lettered');
      } else {
        retries.push({ id: batch.id, url: batch.url, attempts: made, ...(result.retryAfterMs !== undefined && { retryAfterMs: result.retryAfterMs }) });
      }
    }
    await enqueueRetries(this.deps.queues, retries, this.opts.retryScheduleMs);
  }
}
