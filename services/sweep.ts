/**
 * The `sweep` role: the recovery sweep re-enqueues work that Redis lost (workers/recovery.ts);
 * expired idempotency keys go, and so do verification code copies a day after their session expired,
 * receipts parked past the receipt wait for ids never registered, (with EVENT_RETENTION_DAYS, or
 * MESSAGE_RETENTION_DAYS) events and webhook batches older than the retention that no delivery
 * needs, and (with MESSAGE_RETENTION_DAYS) messages older than the retention whose work is over,
 * with all their rows, and inbound messages.
 */
import { RecoverySweep } from '../workers/recovery.js';
import type { Core } from './core.js';
import { IdempotencyExpiry } from '../shared/sending/idempotency.js';
import { CodeCopyExpiry } from '../shared/verification/hooks.js';
import { ParkedReceiptExpiry } from '../shared/engine/parked-receipts.js';
import { EventRetention } from '../shared/webhooks/retention.js';
import { MessageRetention } from '../shared/engine/message-retention.js';
import { eventRetentionDaysOf } from '../shared/config.js';

export interface SweepRole {
  stop(): Promise<void>;
}

export function startSweep(core: Core): SweepRole {
  const { config } = core;
  const sweep = new RecoverySweep(core.db, core.redis, core.queues, core.engine.ttlTimers, {
    intervalMs: config.recoverySweepMs, graceMs: Math.max(config.recoverySweepMs, 30_000), webhookRetries: config.webhookRetryScheduleMs.length,
    receiptWaitMs: config.receiptWaitHours * 3_600_000, redisPrefix: config.redisPrefix,
  }, core.logger);
  sweep.start();
  // Idempotency keys older than 24 hours (issue 27), stale verification code copies (D8),
  // receipts parked for ids never registered and, with EVENT_RETENTION_DAYS (or, unset,
  // MESSAGE_RETENTION_DAYS: events never outlive their messages), old events and webhook batches,
  // and with MESSAGE_RETENTION_DAYS old messages and inbound messages go here too.
  const eventRetentionDays = eventRetentionDaysOf(config);
  const cleanups = [
    new IdempotencyExpiry(core.db, core.logger), new CodeCopyExpiry(core.db, core.logger),
    new ParkedReceiptExpiry(core.db, core.logger, config.receiptWaitHours),
    ...(eventRetentionDays > 0 ? [new EventRetention(core.db, core.logger, eventRetentionDays)] : []),
    ...(config.messageRetentionDays > 0 ? [new MessageRetention(core.db, core.logger, config.messageRetentionDays, config.receiptWaitHours)] : []),
  ];
  for (const c of cleanups) c.start();
  return {
    stop: async () => {
      await sweep.stop();
      await Promise.all(cleanups.map((c) => c.stop()));
    },
  };
}
