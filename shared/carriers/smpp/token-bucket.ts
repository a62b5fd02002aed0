/**
 * A throughput cap shared by every process that sends over one SMPP connection: at most `tps`
 * submit_sm in any window of one second (plus a small guard), across all processes, with tokens
 * taken from Redis in leases so that the submit path does not wait for Redis per PDU.
 *
 * A process asks Redis (one Lua script call) for a lease: a slice of the budget, sized by its
 * recent demand (at most a tenth of a second's budget, see tps-lease.ts), valid for
 * `leaseValidityMs`. It spends the tokens locally, never after the lease's validity, and asks for
 * the next lease ahead of time when the current one goes fast. With the next call it settles the
 * finished leases: the tokens it did not spend go back, and the lease's end moves back to the
 * last token it spent. An idle process settles at expiry, so it holds no budget others need.
 *
 * When the cap binds, a lease that can start within GRANT_AHEAD_MS is granted at once for that
 * later start, rather than refused with the time to ask again: the process spends it at the start,
 * instead of after a timer, a second call and its own event loop's delay. A sliding window never
 * gives back what a late spend loses (the budget a lease frees is free again one window after its
 * last token), so that delay is paid once per lease per window, for good; a refusal also costs a
 * call. What it changed is measured in docs/benchmarks.md (e2e-smpp-capped).
 *
 * Exactness: Redis keeps every lease that may have a token in the current window, scored by the
 * latest time a token of it may have been (or, once settled, was) spent; a new lease is granted
 * only when the tokens of every such lease plus the new ones fit the budget. Every lease that
 * overlaps any window of that length was still in the book when the last of them was granted, so
 * no window holds more than the budget, however the processes spend their leases. Times are the
 * Redis clock; a process maps its own monotonic clock onto it conservatively (a spend is placed
 * no earlier than it could have happened). Grants are also paced (GCRA, two leases of burst), so a
 * backlog leaves as a steady flow rather than a second's budget at once.
 *
 * When the cap binds, the cost is about one lease call per tenth of a second's budget; when it
 * does not, a few calls per second per process (one per LEASE_HORIZON_MS of demand). The window
 * being a second plus the guard, a binding cap sends at most tps × 1000 / (1000 + guard): 98 % of
 * it with the default guard of 20 ms.
 *
 * `pause(ms)` (ESME_RTHROTTLED / ESME_RMSGQFUL) drops this process's leases and stops every grant
 * for `ms`; another process stops once the leases it holds are spent or expired (at most
 * GRANT_AHEAD_MS + `leaseValidityMs`: a lease granted ahead may start up to GRANT_AHEAD_MS
 * later). When Redis cannot be reached, `take()` rejects once the leases held are spent: nothing
 * is sent past the cap.
 */
import { randomBytes } from 'node:crypto';
import { luaScript, runScript, type Redis } from '../../redis.js';
import { capShape, nextLeaseSize, shouldRenewEarly, type CapShape, type LeaseUse } from './tps-lease.js';

/**
 * Grants, settles and pauses leases of one connection's cap.
 *
 * KEYS[1]   the lease book: a sorted set scored in µs of the Redis clock (the script's only key, so
 *           any slot of a Redis Cluster; SMPP's is `{<prefix>:smpp:<connection>}:tps` there)
 *             "L:<lease id>:<tokens>"  a lease; score = the latest time a token of it may have been
 *                                      spent (start + validity), or, once settled, was spent
 *             "tat"                    pacing (GCRA): theoretical time of the next token
 *             "pause"                  no lease is granted before this time
 * ARGV[1]   budget: tokens allowed in any window (integer >= 1)
 * ARGV[2]   window length, µs
 * ARGV[3]   pacing interval per token, µs (1e6 / tps)
 * ARGV[4]   pacing burst, tokens (>= any lease asked for)
 * ARGV[5]   tokens asked for; 0 = ask for nothing (settle and/or pause only)
 * ARGV[6]   id of the new lease (no ':')
 * ARGV[7]   validity of the new lease, µs
 * ARGV[8]   pause, µs: no lease is granted to anyone for this long from now; 0 = none
 * ARGV[9]   grant ahead, µs: a lease that can start within this long from now is granted now,
 *           starting then (its tokens are spent from its start on); 0 = only a lease that can start now
 * ARGV[10..] settlements, three per finished lease of the caller: its member ("L:<id>:<tokens>"),
 *           the tokens really spent (<= tokens), and the latest time one was spent (µs, Redis
 *           clock, an upper bound; ignored when none was spent)
 * Returns   { granted, now, wait }: granted = ARGV[5] (capped at the budget) or 0; now = the
 *           Redis time of the call (µs); wait = µs from now until a lease of that size can start
 *           (pause, pacing or window): when granted, the lease's start (0 = at once), from which
 *           its validity runs; when 0 was granted, when to ask again.
 *
 * Exactness with a later start: a lease counts every lease still in the book whose score is
 * after its own start minus the window, and its tokens are spent no earlier than its start, so
 * the argument above holds with "granted" read as "started".
 */
export const TPS_LEASE_LUA = `
local key = KEYS[1]
local budget = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local interval = tonumber(ARGV[3])
local burst = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local validity = tonumber(ARGV[7])
local pause = tonumber(ARGV[8])
local ahead = tonumber(ARGV[9])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function us(x) return string.format('%.0f', x) end

for i = 10, #ARGV, 3 do
  local member = ARGV[i]
  local ends = redis.call('ZSCORE', key, member)
  if ends then
    redis.call('ZREM', key, member)
    local id, tokens = string.match(member, '^L:(.+):(%d+)$')
    local spent = math.min(tonumber(ARGV[i + 1]), tonumber(tokens or '0'))
    if id and spent > 0 then
      redis.call('ZADD', key, us(math.min(tonumber(ends), tonumber(ARGV[i + 2]))), 'L:' .. id .. ':' .. spent)
    end
  end
end
if pause > 0 then
  local resume = now + pause
  if resume > tonumber(redis.call('ZSCORE', key, 'pause') or '0') then
    redis.call('ZADD', key, us(resume), 'pause')
  end
end
-- A lease whose last token is a whole window old can share no window with a new one.
redis.call('ZREMRANGEBYSCORE', key, '-inf', us(now - window))

local granted = 0
local wait = 0
if want > 0 then
  if want > budget then want = budget end
  local resume = tonumber(redis.call('ZSCORE', key, 'pause') or '0')
  if resume > now then wait = resume - now end
  local tat = tonumber(redis.call('ZSCORE', key, 'tat') or '0')
  if tat < now then tat = now end
  local paced = tat + (want - burst) * interval - now
  if paced > wait then wait = paced end
  local book = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local used = 0
  for i = 1, #book, 2 do
    local tokens = string.match(book[i], '^L:.+:(%d+)$')
    if tokens then used = used + tonumber(tokens) end
  end
  if used + want > budget then
    -- The oldest leases leave the window first: wait until enough of them have.
    local left = used
    for i = 1, #book, 2 do
      local tokens = string.match(book[i], '^L:.+:(%d+)$')
      if tokens then
        left = left - tonumber(tokens)
        if left + want <= budget then
          local free = tonumber(book[i + 1]) + window - now
          if free > wait then wait = free end
          break
        end
      end
    end
  end
  if wait <= ahead then
    -- Granted, starting at now + wait: every lease that would share a window with it then fits.
    -- Whole µs, as returned: the caller's end (start + validity) is then exactly the score's.
    granted = want
    wait = math.ceil(wait)
    local start = now + wait
    if tat < start then tat = start end
    redis.call('ZADD', key, us(tat + want * interval), 'tat')
    redis.call('ZADD', key, us(start + validity), 'L:' .. ARGV[6] .. ':' .. want)
  end
end
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIRE', key, math.ceil((tonumber(last[2]) - now + window) / 1000) + 1000)
end
return { granted, now, math.ceil(wait) }
`;

const LEASE_SCRIPT = luaScript(TPS_LEASE_LUA);

export interface TokenBucketOptions {
  /** Submits per second (> 0; fractions above one are rounded down, see capShape). */
  tps: number;
  /** How much longer than one second the window is, in ms (room for jitter between our clock and the SMSC's count); default 20. */
  windowGuardMs?: number;
  /** How long a lease's tokens may be spent; default 500 ms. */
  leaseValidityMs?: number;
}

interface Lease {
  member: string;
  granted: number;
  spent: number;
  /** Redis time of the grant, µs. */
  grantUs: number;
  /** Redis time after which no token of it is spent (its score in the book until settled), µs. */
  endUs: number;
  /** performance.now() when the grant was asked for (no later than the grant itself). */
  askedAt: number;
  /** performance.now() before which no token of it is spent (its start, placed no earlier than Redis's). */
  startsAt: number;
  /** performance.now() after which no token of it is spent. */
  expiresAt: number;
  /** performance.now() of the first and the last token spent (the first is null until one is). */
  firstSpendAt: number | null;
  lastSpendAt: number;
  /** performance.now() when it ran out or expired (for the demand estimate). */
  endedAt: number | null;
}

/** How long a lease call may take before the limiter counts as unreachable. */
const LEASE_CALL_TIMEOUT_MS = 2_000;

/** A lease that can start within this long is granted for its start rather than refused (see above). */
const GRANT_AHEAD_MS = 250;

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export class RedisTokenBucket {
  readonly tps: number;
  readonly shape: CapShape;
  private readonly validityMs: number;
  private readonly tag = randomBytes(6).toString('base64url').replace(/[^A-Za-z0-9]/g, 'x');
  private seq = 0;
  private current: Lease | null = null;
  private next: Lease | null = null;
  /** Finished leases not yet settled in Redis. */
  private settlements: Lease[] = [];
  /** What the last finished lease saw (sizes the next one). */
  private lastUse: LeaseUse | null = null;
  private asking: Promise<void> | null = null;
  /** performance.now() before which Redis said no lease of our size would be granted. */
  private waitUntil = 0;
  private settleTimer: NodeJS.Timeout | null = null;
  private expiryTimer: NodeJS.Timeout | null = null;
  /** Script calls and their outcomes, for tests and diagnostics. */
  readonly stats = { calls: 0, grants: 0, tokens: 0, refused: 0, errors: 0 };

  constructor(
    private readonly redis: Redis,
    /** Full Redis key, already carrying `config.redisPrefix`. */
    readonly key: string,
    options: TokenBucketOptions,
  ) {
    if (!(options.tps > 0)) throw new RangeError(`tps must be > 0, got ${options.tps}`);
    this.tps = options.tps;
    this.shape = capShape(options.tps, options.windowGuardMs ?? 20);
    // Whole µs, as the script is told: the client's end of a lease is exactly the book's.
    this.validityMs = Math.round(Math.max(10, options.leaseValidityMs ?? 500) * 1000) / 1000;
  }

  /**
   * Takes a token from the leases this process holds, without waiting: true when one was taken
   * (send now), false when none is held (call take()). Asks for the next lease in the background
   * when the current one goes fast.
   */
  tryTake(): boolean {
    const now = performance.now();
    let lease = this.current;
    if (lease && (lease.spent >= lease.granted || now >= lease.expiresAt)) {
      this.finish(lease, now);
      lease = null;
    }
    if (!lease) {
      lease = this.next;
      this.next = null;
      if (lease && now >= lease.expiresAt) {
        this.finish(lease, now);
        lease = null;
      }
      this.current = lease;
      if (!lease) return false;
    }
    if (now < lease.startsAt) return false; // granted for a later start: take() waits for it
    lease.spent++;
    this.stats.tokens++;
    const first = (lease.firstSpendAt ??= now);
    lease.lastSpendAt = now;
    if (lease.spent >= lease.granted) {
      this.finish(lease, now);
      this.current = null;
    }
    if (!this.next && !this.asking && now >= this.waitUntil && shouldRenewEarly(lease.granted, lease.spent, now - first, this.validityMs)) {
      this.ask().catch(() => undefined); // take() reports what stays broken
    }
    return true;
  }

  /** Takes a token, waiting for a lease when none is held. Rejects when Redis cannot be reached. */
  async take(): Promise<void> {
    for (;;) {
      if (this.tryTake()) return;
      if (this.current) {
        // Held but not spendable: it was granted for a later start (tryTake checked a moment ago).
        const startsIn = this.current.startsAt - performance.now();
        if (startsIn > 0) await sleep(Math.ceil(startsIn));
        continue;
      }
      if (this.asking) {
        // A request already under way (perhaps one ahead of need): if it failed, ask again below.
        await this.asking.catch(() => undefined);
        continue;
      }
      const wait = this.waitUntil - performance.now();
      if (wait > 0) {
        await sleep(Math.ceil(wait));
        continue;
      }
      await this.ask();
    }
  }

  /** Takes a token (waiting as needed); resolves with 0, the milliseconds still to wait before using it. */
  async reserve(): Promise<number> {
    await this.take();
    return 0;
  }

  /** No lease is granted to any process for `ms` from now; this process gives up the leases it holds. */
  async pause(ms: number): Promise<void> {
    if (!(ms > 0)) return;
    const now = performance.now();
    for (const lease of [this.current, this.next]) if (lease) this.finish(lease, now);
    this.current = null;
    this.next = null;
    this.waitUntil = Math.max(this.waitUntil, now + ms);
    await this.call(0, Math.round(ms * 1000));
  }

  /** Settles what is held (the unspent tokens go back) and stops the timers; for shutdown and tests. */
  async close(): Promise<void> {
    // A lease asked for ahead of need may still be on its way: wait for it, so that it is settled
    // with the rest rather than left in the book holding budget until its validity ends.
    while (this.asking) await this.asking.catch(() => undefined);
    const now = performance.now();
    for (const lease of [this.current, this.next]) if (lease) this.finish(lease, now);
    this.current = null;
    this.next = null;
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    this.expiryTimer = null;
    if (this.settlements.length > 0) await this.call(0, 0).catch(() => undefined);
    if (this.settleTimer) clearTimeout(this.settleTimer);
    this.settleTimer = null;
  }

  /** One lease request at a time per process; settles the finished leases with it. */
  private ask(): Promise<void> {
    if (this.asking) return this.asking;
    const want = nextLeaseSize(this.lastUse, this.shape.maxLease);
    this.asking = this.call(want, 0).finally(() => {
      this.asking = null;
    });
    return this.asking;
  }

  private async call(want: number, pauseUs: number): Promise<void> {
    const settling = this.settlements;
    this.settlements = [];
    const args: Array<string | number> = [
      this.shape.budget,
      Math.round(this.shape.windowMs * 1000),
      this.shape.intervalUs,
      this.shape.burst,
      want,
      want > 0 ? `${this.tag}.${++this.seq}` : '-',
      Math.round(this.validityMs * 1000),
      pauseUs,
      GRANT_AHEAD_MS * 1000,
    ];
    for (const lease of settling) {
      // Redis ran the grant no earlier than askedAt, so a local time t is at most grantUs + (t - askedAt) on its clock.
      const lastUs = lease.grantUs + Math.ceil((lease.lastSpendAt - lease.askedAt) * 1000);
      args.push(lease.member, lease.spent, Math.min(lease.endUs, lastUs));
    }
    const askedAt = performance.now();
    this.stats.calls++;
    let reply: unknown;
    let timer: NodeJS.Timeout | undefined;
    try {
      // A client that queues commands while disconnected would wait for Redis forever: give up,
      // so the carrier sees the outage (a grant that arrives later only holds budget until it expires).
      reply = await Promise.race([
        runScript(this.redis, LEASE_SCRIPT, [this.key], args),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`tps limiter: Redis did not answer within ${LEASE_CALL_TIMEOUT_MS} ms`)), LEASE_CALL_TIMEOUT_MS);
        }),
      ]);
    } catch (err) {
      this.stats.errors++;
      this.settlements = settling.concat(this.settlements); // settled with the next call that gets through
      throw err;
    } finally {
      clearTimeout(timer);
    }
    const [granted, nowUs, waitUs] = (reply as Array<number | string>).map(Number) as [number, number, number];
    if (want === 0) return;
    if (!(granted > 0)) {
      this.stats.refused++;
      this.waitUntil = performance.now() + Math.max(1, waitUs / 1000);
      return;
    }
    this.stats.grants++;
    // Redis ran the call between askedAt and now: its start is reached by now + wait at the
    // latest, and its end (start + validity) is not passed before askedAt + wait + validity.
    const startMs = waitUs / 1000;
    const lease: Lease = {
      member: `L:${args[5]}:${granted}`,
      granted,
      spent: 0,
      grantUs: nowUs,
      endUs: nowUs + waitUs + this.validityMs * 1000,
      askedAt,
      startsAt: startMs > 0 ? performance.now() + startMs : 0,
      expiresAt: askedAt + startMs + this.validityMs,
      firstSpendAt: null,
      lastSpendAt: askedAt,
      endedAt: null,
    };
    if (!this.current) this.current = lease;
    else if (!this.next) this.next = lease;
    else this.finish(lease, performance.now()); // cannot happen with one request at a time; never leak a grant
    this.armExpiry();
  }

  /** A lease ran out, expired or was given up: remember its use and settle it later. */
  private finish(lease: Lease, now: number): void {
    if (lease.endedAt !== null) return;
    lease.endedAt = Math.min(now, lease.expiresAt);
    this.lastUse = { granted: lease.granted, spent: lease.spent, heldMs: lease.endedAt - (lease.firstSpendAt ?? lease.askedAt) };
    this.settlements.push(lease);
    if (lease.spent < lease.granted) this.armSettle();
  }

  /** Unspent tokens go back soon even when no further lease is asked for. */
  private armSettle(): void {
    if (this.settleTimer) return;
    this.settleTimer = setTimeout(() => {
      this.settleTimer = null;
      if (this.settlements.length === 0 || this.asking) return;
      this.call(0, 0).catch(() => this.armSettle());
    }, 50);
    this.settleTimer.unref();
  }

  /** A lease nobody spends finishes at its expiry (so its unspent tokens go back). */
  private armExpiry(): void {
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    const held = [this.current, this.next].filter((l): l is Lease => l !== null);
    if (held.length === 0) {
      this.expiryTimer = null;
      return;
    }
    const at = Math.min(...held.map((l) => l.expiresAt));
    this.expiryTimer = setTimeout(() => {
      this.expiryTimer = null;
      const now = performance.now();
      if (this.current && now >= this.current.expiresAt) {
        this.finish(this.current, now);
        this.current = this.next;
        this.next = null;
      }
      if (this.current && now >= this.current.expiresAt) {
        this.finish(this.current, now);
        this.current = null;
      }
      this.armExpiry();
    }, Math.max(1, Math.ceil(at - performance.now())));
    this.expiryTimer.unref();
  }
}
