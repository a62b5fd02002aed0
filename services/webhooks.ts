/**
 * The webhook roles: the outbox relay (events into batches, each batch's first attempt made at
 * once when its receiver has a free slot) and the webhook pool (every retry). One HTTP client and
 * one set of per-receiver slots serve both in a process.
 */
import type { Worker } from 'bullmq';
import { OutboxRelay } from '../shared/webhooks/relay.js';
import { DirectDelivery, OriginSlots } from '../shared/webhooks/direct.js';
import { WebhookClient } from '../shared/webhooks/http.js';
import { WebhookFailureLog } from '../shared/webhooks/failure-log.js';
import { BatchHolder } from '../shared/webhooks/holders.js';
import { perOriginLimit, startWebhookPool } from '../workers/webhook-pool.js';
import type { Core } from './core.js';
import { RepeatedFailureLog } from '../shared/repeated-failure-log.js';

export interface WebhooksRole {
  workers: Worker[];
  /** Stops the relay's passes (no new batches); the pool's workers close in `stop`. */
  stopRelay(): Promise<void>;
  stop(): Promise<void>;
}

export function startWebhooks(core: Core, run: { pool: boolean; relay: boolean }): WebhooksRole {
  const { config, logger, db, queues } = core;
  const client = new WebhookClient({ allowPrivate: config.allowPrivateCallbacks });
  const slots = new OriginSlots(perOriginLimit(config.concurrency.webhooks));
  const failures = new WebhookFailureLog(logger);
  const workers: Worker[] = [];
  if (run.pool) {
    workers.push(startWebhookPool(db, {
      concurrency: config.concurrency.webhooks, retryScheduleMs: config.webhookRetryScheduleMs, allowPrivate: config.allowPrivateCallbacks,
    }, { client, slots, failures, box: core.secrets }, { connection: core.connection, prefix: config.redisPrefix, outages: core.outages }, logger));
  }
  let relay: OutboxRelay | null = null;
  let holder: BatchHolder | null = null;
  if (run.relay) {
    // The batches this relay delivers itself carry its holder id while its key lives (holders.ts).
    holder = new BatchHolder(core.redis, config.redisPrefix, logger);
    holder.start();
    const direct = new DirectDelivery({ db, client, queues, slots, logger, failures, box: core.secrets }, {
      concurrency: config.concurrency.webhooks, allowPrivate: config.allowPrivateCallbacks, retryScheduleMs: config.webhookRetryScheduleMs,
      maxWaitingBytes: config.webhookDirectBacklogBytes, holder: holder.id,
    });
    // A pass runs every ~200 ms: while Postgres is down, one line per 30 s, not one per pass.
    const relayFailures = new RepeatedFailureLog(logger, 'outbox relay pass failed');
    relay = new OutboxRelay(db, queues, {
      batchMax: config.webhookBatchMax, lingerMs: config.webhookLingerMs, retries: config.webhookRetryScheduleMs.length,
      intervalMs: Math.max(20, Math.min(200, config.webhookLingerMs)), rescanMs: config.webhookRelayRescanMs,
    }, (err) => relayFailures.failed(err), direct);
    relay.start();
  }
  return {
    workers,
    stopRelay: async () => {
      // The relay's stop queues the batches still waiting and records the deliveries under way:
      // then nothing is held here any more.
      await relay?.stop();
      await holder?.stop();
    },
    stop: async () => {
      await relay?.stop();
      await holder?.stop();
      await Promise.all(workers.map((w) => w.close()));
      await client.close();
    },
  };
}
