/** The `sweep` role: the recovery sweep re-enqueues work that Redis lost (workers/recovery.ts); expired idempotency keys go. */
import { RecoverySweep } from '../workers/recovery.js';
import type { Core } from './core.js';
import { IdempotencyExpiry } from '../shared/sending/idempotency.js';

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
  // Idempotency keys older than 24 hours (issue 27) are deleted here too.
  const expiry = new IdempotencyExpiry(core.db, core.logger);
  expiry.start();
  return {
    stop: async () => {
      await sweep.stop();
      await expiry.stop();
    },
  };
}
