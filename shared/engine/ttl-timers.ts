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
 * Postgres stays the truth: a timer Redis lost is set again by the recovery sweep from the
 * attempt's row, and firing one that is no longer needed (its attempt settled meanwhile) changes
 * nothing (`ttlExpiryApplies`). The sweep learns that Redis lost the set from a mark kept in the
 * set's slot (`<set>:kept`, below): written once and never expiring, it is gone only when Redis
 * lost its data (a restart without persistence, a failover to an empty replica, a flush), and then
 * the sweep walks the attempts of the last days again (`rearmLostTimers`, workers/recovery.ts).
 * A Redis that kept its data may still have lost its last writes (AOF `everysec`: about a second;
 * an RDB snapshot: since its last save; a replica promoted before it caught up): the sweep also
 * notes which server holds the set (`<set>:server`, its run_id) and, when another one does (a
 * restart or a failover), walks the attempts handed over since a sweep last saw the one before.
 */
import { keyGroup, luaScript, runScript, type Redis } from '../redis.js';
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
 * ARGV[1]   due by, ms since the epoch: timers scored at or below it are due
 * ARGV[2]   at most this many, earliest first
 * ARGV[3]   claimed until, ms since the epoch: each claimed timer's new score, so another
 *           process's round does not take it meanwhile, and it fires again then if its round
 *           never finishes
 * Returns   the claimed members
 */
const CLAIM_DUE = luaScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], id)
end
return ids
`);

/**
 * Errors that say "not now" rather than "not this attempt": a store that cannot be reached, a
 * statement or lock timeout, a serialization failure or deadlock. A round stops on them (its
 * timers fire after their claim) instead of trying its attempts one by one.
 */
function isTransient(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return isStorageUnavailable(err) || code === '57014' || code === '55P03' || code === '40001' || code === '40P01';
}

/**
 * Marks the timers' set as kept and records the walk that sets lost timers again, unless the mark
 * is there (another process started the walk first, or nothing was lost).
 *
 * KEYS[1]   the mark, `<set>:kept` (in the set's slot: on a cluster, `{<set>}:kept`)
 * KEYS[2]   the walk's range, a hash `<set>:rearm` (same slot) with fields `walk` (the walk's id),
 *           `after` (the last attempt id walked) and `upTo` (the last attempt id to walk)
 * ARGV[1]   the mark's value: when it was written, ms since the epoch (for an operator's eyes)
 * ARGV[2]   `after` at the start: the walk's first attempt id less one
 * ARGV[3]   `upTo`: the largest attempt id when the loss was seen (later ones set their own timers)
 * ARGV[4]   the walk's id (random): only this walk's walkers may move it on (ADVANCE_REARM)
 * Returns   1 when this call started the walk, 0 when the mark was there
 */
const START_REARM = luaScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'walk', ARGV[4], 'after', ARGV[2], 'upTo', ARGV[3])
  return 1
end
return 0
`);

/**
 * Records a walk's progress, or its end, if the walk under way is still the caller's (a walker of
 * an earlier walk, which Redis lost meanwhile, must not move a new one on past attempts it never
 * walked) and only forwards.
 *
 * KEYS[1]   the walk's hash, `<set>:rearm` (START_REARM)
 * ARGV[1]   the caller's walk id
 * ARGV[2]   the last attempt id walked, or '' for the walk's end (the hash goes)
 * Returns   1 when recorded, 0 when the walk under way is another's (or none)
 */
const ADVANCE_REARM = luaScript(`
if redis.call('HGET', KEYS[1], 'walk') ~= ARGV[1] then
  return 0
end
if ARGV[2] == '' then
  redis.call('DEL', KEYS[1])
elseif (tonumber(redis.call('HGET', KEYS[1], 'after')) or -1) < tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'after', ARGV[2])
end
return 1
`);

/**
 * Notes which Redis server holds the set, or says that another one does now (a restart or a
 * failover, which may have lost the writes just before it).
 *
 * KEYS[1]   the server record, a hash `<set>:server` (in the set's slot) with fields `run` (the
 *           run_id of the server that held the set) and `at` (ms since the epoch when a sweep last
 *           saw that server hold it)
 * ARGV[1]   now, ms since the epoch
 * Returns   {0} when the server holding the set is the one recorded, or none was (recorded now);
 *           {1, run, at} when another holds it now: its run_id, and when the one recorded was
 *           last seen (persisted with the data that came back: writes after it may be lost).
 *           Nothing is written then: START_SERVER_REARM records the new server with its walk.
 */
const CHECK_SERVER = luaScript(`
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local seen = redis.call('HMGET', KEYS[1], 'run', 'at')
if not seen[1] or seen[1] == run then
  redis.call('HSET', KEYS[1], 'run', run, 'at', ARGV[1])
  return {0}
end
return {1, run, seen[2] or '0'}
`);

/**
 * Records the server that holds the set now and the walk that sets again the timers it may have
 * lost, unless another process did, or another walk is under way (it goes on; this check comes
 * again after it).
 *
 * KEYS[1]   the server record `<set>:server` (CHECK_SERVER)
 * KEYS[2]   the walk's range `<set>:rearm` (START_REARM)
 * ARGV[1]   the run_id CHECK_SERVER returned
 * ARGV[2]   now, ms since the epoch
 * ARGV[3]   `after`: the walk's first attempt id less one
 * ARGV[4]   `upTo`: the largest attempt id now
 * ARGV[5]   the walk's id (random)
 * Returns   1 when this call started the walk, else 0
 */
const START_SERVER_REARM = luaScript(`
if redis.call('HGET', KEYS[1], 'run') == ARGV[1] or redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'run', ARGV[1], 'at', ARGV[2])
redis.call('HSET', KEYS[2], 'walk', ARGV[5], 'after', ARGV[3], 'upTo', ARGV[4])
return 1
`);

/** A walk over attempt ids `after` (exclusive) to `upTo` (inclusive) that sets lost timers again. */
export interface RearmRange {
  /** The walk's id (START_REARM). */
  walk: string;
  after: number;
  upTo: number;
}

export class TtlTimers {
  private readonly key: string;
  /** `<set>:kept`, `<set>:rearm` and `<set>:server`, in the set's slot (START_REARM, CHECK_SERVER). */
  private readonly keptKey: string;
  private readonly rearmKey: string;
  private readonly serverKey: string;

  constructor(private readonly redis: Redis, redisPrefix: string) {
    this.key = ttlTimersKey(redisPrefix);
    const group = keyGroup(redis, this.key);
    this.keptKey = `${group}:kept`;
    this.rearmKey = `${group}:rearm`;
    this.serverKey = `${group}:server`;
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

  /** Sets each attempt's own deadline (`[attempt id, due at ms]`), keeping any that exists (the recovery sweep's walks). */
  async setEachKeep(timers: ReadonlyArray<readonly [number, number]>): Promise<void> {
    if (timers.length === 0) return;
    const args: number[] = [];
    for (const [id, due] of timers) args.push(due, id);
    await this.redis.zadd(this.key, 'NX', ...args);
  }

  /**
   * Whether the set may have been lost (`lost`: its mark is gone) and the walk that sets lost timers
   * again, if one is under way. One round trip (a MULTI in the set's slot).
   */
  async lossState(): Promise<{ lost: boolean; rearm: RearmRange | null }> {
    const replies = await this.redis.multi().exists(this.keptKey).hmget(this.rearmKey, 'walk', 'after', 'upTo').exec();
    const [exists, fields] = (replies ?? []).map(([err, value]) => {
      if (err) throw err;
      return value;
    }) as [number, Array<string | null>];
    const [walk, after, upTo] = fields;
    return {
      lost: exists === 0,
      rearm: walk != null && after != null && upTo != null ? { walk, after: Number(after), upTo: Number(upTo) } : null,
    };
  }

  /** Starts the walk over `range` and marks the set kept; false when another process did (START_REARM). */
  async startRearm(range: RearmRange, now = Date.now()): Promise<boolean> {
    return await runScript(this.redis, START_REARM, [this.keptKey, this.rearmKey], [now, range.after, range.upTo, range.walk]) === 1;
  }

  /**
   * Null when the Redis server holding the set is the one a sweep saw before (noting that it saw
   * it now); else the run_id of the one holding it now, and when the one before was last seen
   * (CHECK_SERVER).
   */
  async serverChange(now = Date.now()): Promise<{ run: string; lastSeenMs: number } | null> {
    const reply = await runScript(this.redis, CHECK_SERVER, [this.serverKey], [now]) as [number, string?, string?];
    return reply[0] === 1 ? { run: String(reply[1]), lastSeenMs: Number(reply[2]) } : null;
  }

  /** Records `run` as the server holding the set and starts the walk over `range`; false when another process did, or a walk is under way (START_SERVER_REARM). */
  async startServerRearm(run: string, range: RearmRange, now = Date.now()): Promise<boolean> {
    return await runScript(this.redis, START_SERVER_REARM, [this.serverKey, this.rearmKey], [run, now, range.after, range.upTo, range.walk]) === 1;
  }

  /**
   * Records the walk's progress (`after`: the last attempt id walked) or its end (`null`); false
   * when the walk under way is no longer `walk` (ADVANCE_REARM).
   */
  async advanceRearm(walk: string, after: number | null): Promise<boolean> {
    return await runScript(this.redis, ADVANCE_REARM, [this.rearmKey], [walk, after ?? '']) === 1;
  }

  /** Removes the attempts' timers (settled, or fired). */
  async clear(attemptIds: readonly number[]): Promise<void> {
    if (attemptIds.length === 0) return;
    await this.redis.zrem(this.key, ...attemptIds);
  }

  /** Up to `limit` timers due by `dueByMs`, earliest first, claimed until `claimedUntilMs` (see CLAIM_DUE). */
  async claimDue(dueByMs: number, limit: number, claimedUntilMs: number): Promise<number[]> {
    const members = await runScript(this.redis, CLAIM_DUE, [this.key], [dueByMs, limit, claimedUntilMs]) as string[];
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
 * nothing, and several processes share the work. A batch whose expiry fails for this batch's sake
 * (not `isTransient`) is halved and tried again down to single attempts; one that still fails is
 * left to fire after its claim, so one bad attempt never holds up the others.
 */
export class TtlExpiry {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private started = false;
  private stopping = false;

  constructor(
    private readonly timers: TtlTimers,
    private readonly expire: (attemptIds: number[]) => Promise<unknown>,
    private readonly logger: Logger,
    private readonly intervalMs = 1000,
  ) {}

  start(): void {
    if (this.started) return;
    this.started = true;
    this.stopping = false;
    this.schedule();
  }

  /**
   * Fires what is due by `now` (one call at a time), until fewer than a round's worth are due or
   * a round fires none. Each round's claim runs CLAIM_LEASE_MS from the clock at its start.
   */
  async fireDue(now = Date.now()): Promise<number> {
    let fired = 0;
    for (;;) {
      const ids = await this.timers.claimDue(now, FIRE_BATCH, Date.now() + CLAIM_LEASE_MS);
      if (ids.length === 0) return fired;
      const round = await this.fire(ids);
      fired += round;
      if (ids.length < FIRE_BATCH || round === 0 || this.stopping) return fired;
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.started = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
  }

  /**
   * Expires `ids` and removes their timers; when that fails for this batch's sake, each half on its
   * own. Returns how many fired. (During an outage or a lock held too long every call fails alike:
   * the round's timers wait for their claim to end instead of being tried one by one.)
   */
  private async fire(ids: number[]): Promise<number> {
    try {
      await this.expire(ids);
    } catch (err) {
      if (isTransient(err) || this.stopping) throw err;
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
    if (this.stopping) return;
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
