/**
 * The hard edge of a connection's throughput cap: at most `limit` requests in any window of
 * `windowMs`, counted in Redis at the moment each request is let go, across every process.
 *
 * The token bucket (smpp/token-bucket.ts) spaces requests evenly, but it hands out a slot before
 * the caller sleeps until it: a process whose event loop stalls (a long transaction, a collection,
 * a busy machine) wakes with several slots due at once and sends them together, so a carrier can
 * see more than the cap within one second (measured: 57 at 50/s on a loaded machine). This log of
 * recent sends is checked right before each request instead: a late request waits for the window
 * to have room. The bucket keeps the rate smooth and carries pauses (429); this keeps the cap.
 *
 * One sorted set per connection (score = Redis time in µs of each send), pruned on every call.
 */
import type { Redis } from 'ioredis';
import { luaScript, runScript } from '../smpp/token-bucket.js';

/**
 * KEYS[1]: the sorted set. ARGV[1]: window in µs. ARGV[2]: limit.
 * Returns 0 when the send may go now (it is recorded), else the µs until the oldest send leaves the window.
 */
const SEND_WINDOW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local n = redis.call('ZCARD', KEYS[1])
if n < limit then
  redis.call('ZADD', KEYS[1], now, string.format('%.0f', now) .. ':' .. n)
  redis.call('PEXPIRE', KEYS[1], math.floor(window / 1000) + 1000)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.floor(tonumber(oldest[2]) + window - now) + 1
`;

const SCRIPT = luaScript(SEND_WINDOW_LUA);

export class RedisSendWindow {
  private readonly windowUs: number;

  constructor(
    private readonly redis: Redis,
    /** Full Redis key, already carrying the deployment's prefix. */
    readonly key: string,
    private readonly limit: number,
    windowMs: number,
  ) {
    if (!(limit >= 1)) throw new RangeError(`limit must be >= 1, got ${limit}`);
    this.windowUs = Math.round(windowMs * 1000);
  }

  /** Resolves when a request may go now (and counts it). */
  async acquire(): Promise<void> {
    for (;;) {
      const waitUs = Number(await runScript(this.redis, SCRIPT, [this.key], [this.windowUs, this.limit]));
      if (!(waitUs > 0)) return;
      await new Promise((resolve) => setTimeout(resolve, Math.ceil(waitUs / 1000)));
    }
  }
}
