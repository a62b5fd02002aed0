/**
 * First delivery attempts made by the relay itself, right after it created the batches: the
 * batch's events are already in memory, so the attempt costs one POST and a share of one update
 * statement, instead of a queue job (three Redis scripts), two reads and an update of its own.
 * Batches stay durable and pending in Postgres until their outcome is recorded: a crash in
 * between leaves them to the recovery sweep (delivered again, at least once). A batch that finds
 * its receiver's slots taken waits in memory for one (a relay pass creates a burst of batches for
 * a busy receiver; queue jobs would only step aside and come back); beyond a bounded number of
 * bytes of waiting batches, and for every retry, the webhook queue takes them as before.
 */
import type { Db } from '../db/pool.js';
import type { Logger } from '../logger.js';
import type { Queues } from '../queues.js';
import type { WebhookClient, WebhookPostResult } from './http.js';
import { failureReason, postBatch, recordOutcomes, type BatchToPost } from './deliver.js';
import { deadLetterIfExhausted, enqueueBatches, enqueueRetries, originOf, retryDelay } from './jobs.js';
import type { WebhookFailureLog } from './failure-log.js';
import type { SecretBox } from '../secrets/sealed.js';

/**
 * Delivery slots per receiver (origin), shared by the direct deliveries and the webhook queue's
 * worker of a process: a slow or dead receiver cannot hold more than its share of either.
 */
export class OriginSlots {
  private readonly taken = new Map<string, number>();
  private readonly listeners: Array<() => void> = [];

  constructor(readonly perOrigin: number) {}

  /** Called after every slot given back (whoever held it). */
  onRelease(listener: () => void): void {
    this.listeners.push(listener);
  }

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
    for (const listener of this.listeners) {
      listener();
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
  /**
   * Bodies of batches waiting for a slot kept in memory at most (one receiver: half of it);
   * beyond, batches go to the queue. A relay pass can make hundreds of batches at once (a burst
   * of events), which the queue would only hand back to the same slots later, at three Redis
   * scripts and two reads each.
   */
  maxWaitingBytes: number;
  /**
   * This process's holder id (holders.ts), written on the batches it delivers itself so that the
   * recovery sweep can tell when they were left by a process that is gone; null: not written.
   */
  holder?: string | null;
}

interface Outcome {
  batch: ReadyBatch;
  result: WebhookPostResult;
}

export class DirectDelivery {
  private inFlight = 0;
  private readonly running = new Set<Promise<void>>();
  /** Batches waiting for a slot, per receiver in the order the relay made them, with their bodies' bytes. */
  private readonly waiting = new Map<string, { batches: ReadyBatch[]; bytes: number }>();
  /** Bytes of all waiting batches' bodies. */
  private waitingBytes = 0;
  private stopping = false;
  private outcomes: Outcome[] = [];
  private recording: Promise<void> | null = null;

  constructor(
    private readonly deps: { db: Db; client: WebhookClient; queues: Queues; slots: OriginSlots; logger: Logger; box: SecretBox; failures?: WebhookFailureLog },
    private readonly opts: DirectDeliveryOptions,
  ) {
    // A slot the queue worker gives back may be the one a waiting batch needs.
    deps.slots.onRelease(() => this.startWaiting());
  }

  /** Opens the keys' webhook secrets the batches offered here are signed with. */
  get box(): SecretBox {
    return this.deps.box;
  }

  /** The id the relay writes on the batches it offers here (holders.ts); null when none. */
  get holder(): string | null {
    return this.opts.holder ?? null;
  }

  /** Takes the batch (delivers it now or once its receiver has a free slot); false: queue it instead. */
  offer(batch: ReadyBatch): boolean {
    if (this.stopping) {
      return false;
    }
    const origin = originOf(batch.url);
    let line = this.waiting.get(origin);
    if (!line && this.start(batch, origin)) {
      return true;
    }
    const bytes = batch.body.length;
    if (this.waitingBytes + bytes > this.opts.maxWaitingBytes || (line?.bytes ?? 0) + bytes > this.opts.maxWaitingBytes / 2) {
      return false;
    }
    if (!line) {
      line = { batches: [], bytes: 0 };
      this.waiting.set(origin, line);
    }
    line.batches.push(batch);
    line.bytes += bytes;
    this.waitingBytes += bytes;
    return true;
  }

  /**
   * For shutdown: batches still waiting go to the queue (another process delivers them), then
   * this waits for the deliveries under way and the recording of their outcomes.
   */
  async drain(): Promise<void> {
    this.stopping = true;
    const left = [...this.waiting.values()].flatMap((line) => line.batches);
    this.waiting.clear();
    this.waitingBytes = 0;
    try {
      await enqueueBatches(this.deps.queues, left, this.opts.retryScheduleMs.length);
    } catch (err) {
      this.deps.logger.error({ err: (err as Error).message, batches: left.length }, 'waiting webhook batches not queued; left to the recovery sweep');
    }
    while (this.running.size > 0 || this.recording) {
      await Promise.all([...this.running, this.recording]);
    }
  }

  private start(batch: ReadyBatch, origin: string): boolean {
    if (this.inFlight >= this.opts.concurrency || !this.deps.slots.tryTake(origin)) {
      return false;
    }
    this.inFlight += 1;
    const delivery = postBatch(this.deps.client, batch, this.opts.allowPrivate).then((result) => {
      this.outcomes.push({ batch, result });
      this.recordSoon();
    }).finally(() => {
      this.inFlight -= 1;
      this.running.delete(delivery);
      this.deps.slots.give(origin);
    });
    this.running.add(delivery);
    return true;
  }

  /** Starts waiting batches while slots are free: the first receivers in line first, each in its own order. */
  private startWaiting(): void {
    for (const [origin, line] of this.waiting) {
      while (line.batches.length > 0 && this.start(line.batches[0]!, origin)) {
        const started = line.batches.shift()!;
        line.bytes -= started.body.length;
        this.waitingBytes -= started.body.length;
      }
      if (line.batches.length === 0) {
        this.waiting.delete(origin);
      }
      if (this.inFlight >= this.opts.concurrency) {
        return;
      }
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
    const retries: Array<{ id: number; url: string; delayMs: number }> = [];
    for (const { batch, result } of list) {
      if (result.ok) {
        continue;
      }
      const made = attempts.get(batch.id) ?? 1;
      const reason = failureReason(result);
      const dead = await deadLetterIfExhausted(this.deps.db, this.deps.logger, batch.id, made, this.opts.retryScheduleMs, reason);
      const delayMs = dead ? null : retryDelay(made, this.opts.retryScheduleMs, result.retryAfterMs);
      this.deps.failures?.failed({ keyId: batch.keyId ?? null, url: batch.url, status: result.status, reason, attempts: made, nextRetryMs: delayMs });
      if (delayMs !== null) retries.push({ id: batch.id, url: batch.url, delayMs });
    }
    await enqueueRetries(this.deps.queues, retries, this.opts.retryScheduleMs);
  }
}
