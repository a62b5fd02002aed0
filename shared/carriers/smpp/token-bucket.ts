/**
 * A throughput cap shared by every process that sends over one SMPP connection: one Redis key per
 * connection and one Lua script (GCRA, the "virtual scheduling" form of a token bucket).
 *
 * The key holds the theoretical arrival time (TAT) of the next free token in microseconds of the
 * Redis clock. Taking a token reserves the next free slot and tells the caller how long to wait
 * before using it, so callers in any number of processes are spaced `1/tps` apart without
 * polling; the Redis clock is the only clock involved. With `burst` 1 (the default) at most
 * `tps + 1` tokens are handed out in any window of one second. A token is spent per submit_sm PDU,
 * not per job: a job may carry many recipients and a long SMS several parts.
 *
 * `pause(ms)` pushes the next free slot into the future for every process (used when the SMSC
 * answers ESME_RTHROTTLED / ESME_RMSGQFUL).
 */
import type { Redis } from 'ioredis';
import { luaScript, runScript } from '../../redis.js';

/**
 * KEYS[1]: the bucket (TAT of the next token, µs since the epoch, Redis clock).
 * ARGV[1]: emission interval in µs (1e6 / tps). ARGV[2]: burst (>= 1).
 * ARGV[3]: 0 = take one token; > 0 = pause: push the next token at least this many µs ahead.
 * Returns the µs the caller must wait before using its token (0 = now; always 0 for a pause).
 */
export const TOKEN_BUCKET_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local pause = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local wait = 0
if pause > 0 then
  local resume = now + pause + (burst - 1) * interval
  if resume > tat then tat = resume end
else
  local allow_at = tat - (burst - 1) * interval
  if allow_at > now then wait = allow_at - now end
  tat = tat + interval
end
local ttl_ms = math.floor((tat - now) / 1000) + 1000
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', ttl_ms)
return math.floor(wait)
`;

const BUCKET_SCRIPT = luaScript(TOKEN_BUCKET_LUA);

export interface TokenBucketOptions {
  /** Tokens per second (> 0; fractions allowed). */
  tps: number;
  /** Tokens that may go at once after an idle period; default 1. */
  burst?: number;
}

export class RedisTokenBucket {
  readonly tps: number;
  private readonly intervalUs: number;
  private readonly burst: number;

  constructor(
    private readonly redis: Redis,
    /** Full Redis key, already carrying `config.redisPrefix`. */
    readonly key: string,
    options: TokenBucketOptions,
  ) {
    if (!(options.tps > 0)) throw new RangeError(`tps must be > 0, got ${options.tps}`);
    this.tps = options.tps;
    this.intervalUs = Math.max(1, Math.round(1_000_000 / options.tps));
    this.burst = Math.max(1, Math.floor(options.burst ?? 1));
  }

  /** Reserves the next token; resolves with the milliseconds to wait before using it. */
  async reserve(): Promise<number> {
    const waitUs = Number(await runScript(this.redis, BUCKET_SCRIPT, [this.key], [this.intervalUs, this.burst, 0]));
    return Number.isFinite(waitUs) && waitUs > 0 ? waitUs / 1000 : 0;
  }

  /** Reserves a token and waits until it may be used. */
  async take(): Promise<void> {
    const waitMs = await this.reserve();
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, Math.ceil(waitMs)));
  }

  /** No token is handed out, to any process, for at least `ms` from now. */
  async pause(ms: number): Promise<void> {
    if (!(ms > 0)) return;
    await runScript(this.redis, BUCKET_SCRIPT, [this.key], [this.intervalUs, this.burst, Math.round(ms * 1000)]);
  }
}
