/**
 * "No accepted message is left without a way forward", read once a run settled: every attempt of
 * the run that still waits for its step's condition (a WhatsApp or Viber attempt `sent` without a
 * receipt, say) holds a ttl timer in Redis (`<prefix>:ttl-timers`, shared/engine/ttl-timers.ts),
 * which ends it `undelivered` at its deadline and moves its flow on. One without a timer would
 * wait for the recovery sweep instead, which looks at attempts only once they are
 * RECEIPT_WAIT_HOURS (72) old. SMS attempts are left out: their step
 * succeeds at `sent`, and one still `sending` over SMPP is the sweep's by design (no timer).
 */
import type pg from 'pg';
import type { Redis } from 'ioredis';
import { chargeFigures, type ChargeFigures } from './charges.js';
import { BENCH_CREDIT_CZK } from './stack.js';
import { isChannel } from '../../shared/channels/index.js';
import { mayHoldTtlTimer, ttlTimersKey } from '../../shared/engine/ttl-timers.js';
import { ttlExpiryApplies } from '../../shared/engine/transitions.js';
import type { AttemptState } from '../../shared/carriers/types.js';

export interface TimersCheck {
  /** Attempts of the run still waiting for their step's condition. */
  waiting: number;
  /** Of those, the ones without a timer. */
  withoutTimer: number;
  /** Up to 10 of them (attempt ids). */
  examples: number[];
  passed: boolean;
}

/** `since`: the run's first attempt was created at or after it. `redisPrefix`: the service's REDIS_PREFIX. */
export async function timersCheck(db: pg.Pool, redis: Redis, redisPrefix: string, since: Date): Promise<TimersCheck> {
  const { rows } = await db.query<{ id: string; channel: string; state: AttemptState }>(
    `SELECT id, channel, state FROM attempts WHERE created_at >= $1 AND state IN ('sending', 'sent')`, [since]);
  const waiting = rows.filter((r) => isChannel(r.channel) && mayHoldTtlTimer(r.channel) && ttlExpiryApplies(r.channel, r.state)).map((r) => r.id);
  const missing: number[] = [];
  for (let i = 0; i < waiting.length; i += 1000) {
    const ids = waiting.slice(i, i + 1000);
    const scores = await redis.zmscore(ttlTimersKey(redisPrefix), ...ids);
    scores.forEach((score, k) => {
      if (score === null) missing.push(Number(ids[k]));
    });
  }
  return { waiting: waiting.length, withoutTimer: missing.length, examples: missing.slice(0, 10), passed: missing.length === 0 };
}

/** The checks of a run once it settled (charges and timers), each failing one noted in `notes`. */
export async function settledChecks(
  db: pg.Pool, redis: Redis, redisPrefix: string, accountId: number, since: Date, notes: string[],
): Promise<{ charges: ChargeFigures; timersCheck: TimersCheck }> {
  const charges = await chargeFigures(db, accountId, BENCH_CREDIT_CZK);
  if (!charges.passed) {
    notes.push(`charges: balance ${charges.balance} ≠ ${charges.expectedBalance} (credit − Σ charged), or ` +
      `${charges.recipientsWithSeveralAttempts} recipients with more than one attempt`);
  }
  const timers = await timersCheck(db, redis, redisPrefix, since);
  if (!timers.passed) notes.push(`${timers.withoutTimer} of ${timers.waiting} attempts still waiting hold no ttl timer (e.g. ${timers.examples.join(', ')})`);
  return { charges, timersCheck: timers };
}
