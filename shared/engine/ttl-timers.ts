/**
 * Ttl timers (D3): the moment by which a step's attempt must have met its condition, else it ends
 * `undelivered` ("[1] TTL expired") and the flow moves on. One Redis sorted set holds every
 * waiting attempt's deadline (member: the attempt id; score: the deadline in ms since the epoch).
 *
 * The set holds only attempts still waiting: a status batch that settles an attempt removes its
 * timer, and firing a timer removes it, so its size follows the attempts in flight, ~70 bytes
 * each. (Each timer was a delayed BullMQ job before, ~870 bytes kept for the whole ttl, 24 hours
 * by default, settled or not: Redis grew with a day's traffic; docs/benchmarks.md.)
 *
 * Postgres stays the truth: a timer Redis lost is set again by the recovery sweep
 * (`sweepWaitingAttempts`) from the attempt's row, and firing one that is no longer needed (its
 * attempt settled meanwhile) changes nothing (`ttlExpiryApplies`).
 */
import type { Redis } from '../redis.js';
import type { Logger } from '../logger.js';
import { channelModule, type Channel } from '../channels/index.js';

/** The key of the set, under the deployment's Redis prefix. */
export const ttlTimersKey = (redisPrefix: string): string => `${redisPrefix}:ttl-timers`;

/**
 * Whether an attempt of `channel` over a carrier that does (not) settle on send gets a timer: not
 * an SMS whose carrier settles every attempt at hand-over (SMPP: the submit response arrived),
 * whose step has succeeded by then.
 */
export function needsTtlTimer(channel: Channel, carrierSettlesOnSend: boolean): boolean {
  return !(channelModule(channel).succeedsAt === 'sent' && carrierSettlesOnSend);
}

/**
 * Whether a settled attempt of `channel` may still hold a timer to remove. A status batch removes
 * the timers of attempts of channels that succeed at `delivered` (always timed); an SMS timer
 * (only over a carrier that does not settle on send, which no production SMS carrier is) is
 * removed when it fires, so the SMPP path's status batches make no Redis call for it.
 */
export function mayHoldTtlTimer(channel: Channel): boolean {
  return channelModule(channel).succeedsAt !== 'sent';
}

export class TtlTimers {
  private readonly key: string;

  constructor(private readonly redis: Redis, redisPrefix: string) {
    this.key = ttlTimersKey(redisPrefix);
  }

  /**
   * Sets the attempts' deadline. `keep`: an attempt that has one keeps it (the recovery sweep sets
   * timers Redis lost, and must not postpone one that exists).
   */
  async set(attemptIds: readonly number[], dueAtMs: number, mode: 'replace' | 'keep' = 'replace'): Promise<void> {
    if (attemptIds.length === 0) return;
    const args: Array<string | number> = [];
    for (const id of attemptIds) args.push(dueAtMs, id);
    if (mode === 'keep') {
      await this.redis.zadd(this.key, 'NX', ...args);
    } else {
      await this.redis.zadd(this.key, ...args);
    }
  }

  /** Removes the attempts' timers (settled, or fired). */
  async clear(attemptIds: readonly number[]): Promise<void> {
    if (attemptIds.length === 0) return;
    await this.redis.zrem(this.key, ...attemptIds);
  }

  /** Up to `limit` attempts whose deadline is at or before `nowMs`, earliest first. */
  async due(nowMs: number, limit: number): Promise<number[]> {
    const members = await this.redis.zrangebyscore(this.key, '-inf', nowMs, 'LIMIT', 0, limit);
    return members.map(Number);
  }

  /** An attempt's deadline (ms since the epoch), or null without a timer. */
  async deadlineOf(attemptId: number): Promise<number | null> {
    const score = await this.redis.zscore(this.key, String(attemptId));
    return score === null ? null : Number(score);
  }

  /** How many timers are set. */
  async size(): Promise<number> {
    return this.redis.zcard(this.key);
  }
}

/** Timers fired per round; rounds follow each other until fewer are due. */
const FIRE_BATCH = 500;

/**
 * Fires due timers about every `intervalMs`: each round expires its attempts in one status batch
 * (`expire`), then removes their timers, so a timer outlives a failed round and fires again (at
 * least once; a second firing finds its attempt settled and changes nothing). Several processes
 * may run one: they may fire a timer twice, never lose one.
 */
export class TtlExpiry {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly timers: TtlTimers,
    private readonly expire: (attemptIds: number[]) => Promise<unknown>,
    private readonly logger: Logger,
    private readonly intervalMs = 1000,
  ) {}

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  /** Fires what is due now (one call at a time), until fewer than a round's worth are due. */
  async fireDue(now = Date.now()): Promise<number> {
    let fired = 0;
    for (;;) {
      const ids = await this.timers.due(now, FIRE_BATCH);
      if (ids.length === 0) return fired;
      await this.expire(ids);
      await this.timers.clear(ids);
      fired += ids.length;
      if (ids.length < FIRE_BATCH || this.stopped) return fired;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.fireDue().then(
        (fired) => { if (fired > 0) this.logger.debug({ fired }, 'ttl timers fired'); },
        (err: unknown) => this.logger.warn({ err: (err as Error).message }, 'ttl timers not fired; trying again'),
      ).finally(() => {
        this.running = null;
        this.schedule();
      });
    }, this.intervalMs);
    this.timer.unref();
  }
}
