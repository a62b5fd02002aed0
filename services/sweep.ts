/** The `sweep` role: the recovery sweep re-enqueues work that Redis lost (workers/recovery.ts). */
import { RecoverySweep } from '../workers/recovery.js';
import type { Core } from './core.js';

export interface SweepRole {
  stop(): Promise<void>;
}

export function startSweep(core: Core): SweepRole {
  const { config } = core;
  const sweep = new RecoverySweep(core.db, core.redis, core.queues, {
    intervalMs: config.recoverySweepMs, graceMs: Math.max(config.recoverySweepMs, 30_000), webhookRetries: config.webhookRetryScheduleMs.length,
    receiptWaitMs: config.receiptWaitHours * 3_600_000, redisPrefix: config.redisPrefix,
  }, core.logger);
  sweep.start();
  return { stop: async () => sweep.stop() };
}
