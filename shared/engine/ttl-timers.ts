/**
 * Ttl timers (D3): the moment by which a step's attempt must have met its condition, else it ends
 * `undelivered` ("[1] TTL expired") and the flow moves on. One Redis sorted set holds every
 * waiting attempt's deadline (member: the attempt id; score: the deadline in ms since the epoch).
 *
 * The set holds attempts still waiting: the hand-over sets timers only for attempts not settled
 * by the time it records the hand-over (dispatch.ts `handOver`), a status batch that settles an
 * attempt removes its timer, and firing a timer removes it, so its size follows the attempts in
 * flight, ~100 bytes each. (A report committed between the hand-over's record and its timer
 * leaves a timer behind, which fires at its deadline as a no-op and goes.) Each timer was a
 * delayed BullMQ job before, ~870 bytes kept for the whole ttl, 24 hours by default, settled or
 * not: Redis grew with a day's traffic (docs/benchmarks.md).
 *
 * Postgres stays the truth: a timer Redis lost is set again by the recovery sweep
 * (`sweepWaitingAttempts`) from the attempt's row, and firing one that is no longer needed (its
 * attempt settled meanwhile) changes nothing (`ttlExpiryApplies`).
 */
import { luaScript, runScript, type Redis } from '../redis.js';
import type { Logger } from '../logger.js';
import { channelModule, type Channel } from '../channels/index.js';
import { isStorageUnavailable } from '../storage-unavailable.js';

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

/**
 * Claims due timers for one firing round.
 *
 * KEYS[1]   the timers' sorted set (member: attempt id; score: deadline, ms since the epoch)
 * ARGV[1]   now, ms since the epoch: timers scored at or below it are due
 * ARGV[2]   at most this many, earliest first
 * ARGV[3]   lease, ms: each claimed timer is moved to now + lease, so another process's round
 *           does not take it meanwhile, and it fires again then if its round never finishes
 * Returns   the claimed members
 */
const CLAIM_DUE = luaScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local until_ms = tonumber(ARGV[1]) + tonumber(ARGV[3])
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], 'XX', until_ms, id)
end
return ids
`);

export class TtlTimers {
  private readonly key: string;

  constructor(private readonly redis: Redis, redisPrefix: string) {
    this.key = ttlTimersKey(redisPrefix);
  }

  /**
   * Sets the attempts' deadline. `keep`: an attempt that has one keeps it (a re-handed attempt
   * keeps its first deadline; the recovery sweep must not postpone one that exists).
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

  /** Up to `limit` due timers, earliest first, claimed for `leaseMs` (see CLAIM_DUE). */
  async claimDue(nowMs: number, limit: number, leaseMs: number): Promise<number[]> {
    const members = await runScript(this.redis, CLAIM_DUE, [this.key], [nowMs, limit, leaseMs]) as string[];
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
/** A claimed timer whose round did not finish fires again after this long. */
const CLAIM_LEASE_MS = 60_000;

/**
 * Fires due timers about every `intervalMs`. A round claims up to FIRE_BATCH due timers (others'
 * rounds skip them for CLAIM_LEASE_MS), expires their attempts in one status batch (`expire`),
 * then removes them: at least once, as a second firing finds its attempt settled and changes
 * nothing, and several processes share the work. A batch whose expiry fails (other than for a
 * store that is down) is halved and tried again down to single attempts; one that still fails is
 * left to fire after the lease, so one bad attempt never holds up the others.
 */
export class TtlExpiry {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = true;

  constructor(
    private readonly timers: TtlTimers,
    private readonly expire: (attemptIds: number[]) => Promise<unknown>,
    private readonly logger: Logger,
    private readonly intervalMs = 1000,
  ) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule();
  }

  /** Fires what is due at `now` (one call at a time), until fewer than a round's worth are due. */
  async fireDue(now = Date.now()): Promise<number> {
    let fired = 0;
    for (;;) {
      const ids = await this.timers.claimDue(now, FIRE_BATCH, CLAIM_LEASE_MS);
      if (ids.length === 0) return fired;
      fired += await this.fire(ids);
      if (ids.length < FIRE_BATCH || this.stopped) return fired;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  /**
   * Expires `ids` and removes their timers; when that fails for a reason other than a store that
   * cannot be reached, each half on its own. Returns how many fired. (During an outage every call
   * fails alike: the round's timers wait for their lease instead of being tried one by one.)
   */
  private async fire(ids: number[]): Promise<number> {
    try {
      await this.expire(ids);
    } catch (err) {
      if (isStorageUnavailable(err)) throw err;
      if (ids.length === 1) {
        this.logger.error({ err: (err as Error).message, attemptId: ids[0] }, 'ttl timer not fired; it fires again later');
        return 0;
      }
      const half = Math.ceil(ids.length / 2);
      return (await this.fire(ids.slice(0, half))) + (await this.fire(ids.slice(half)));
    }
    await this.timers.clear(ids);
    return ids.length;
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
