/**
 * Start limits of the verification API (D8), over rolling windows in Redis:
 *  - per account: at most `accountPerMin` starts in any 60 s;
 *  - per (account, phone number): at most `phonePerHour` starts in any 3600 s, and at least
 *    `phoneCooldownS` seconds between two starts.
 * Both levels are checked and, only when every check passes, recorded by ONE Lua script: Redis
 * runs it atomically, so a burst of concurrent starts can never get past a limit. Each window is a
 * sorted set of start timestamps (ms, from Redis' own clock so every process agrees); members are
 * unique per start, which lets a start that fails afterwards give its slot back (`release`).
 * Keys carry the account id as a hash tag, so both keys of one call live in one Cluster slot.
 */
import { randomBytes } from 'node:crypto';
import { luaScript, runScript, type Redis } from '../redis.js';
import { StorageUnavailableError } from '../storage-unavailable.js';

export const ACCOUNT_WINDOW_MS = 60_000;
export const PHONE_WINDOW_MS = 3_600_000;

/**
 * KEYS[1] account window, KEYS[2] phone window; both carry the hash tag `{<account id>}`
 * (`limitKeys`), so on a Redis Cluster they are in one slot (as is `release`'s MULTI).
 * ARGV: member, account limit, account window ms, phone limit, phone window ms, cooldown ms.
 * Returns {0, 0} when admitted, {1, retryMs} for the account limit, {2, retryMs} for the phone limits.
 */
export const START_LIMIT_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local member = ARGV[1]
local acctLimit = tonumber(ARGV[2])
local acctWindow = tonumber(ARGV[3])
local phoneLimit = tonumber(ARGV[4])
local phoneWindow = tonumber(ARGV[5])
local cooldown = tonumber(ARGV[6])
local phoneKeep = math.max(phoneWindow, cooldown)

redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - acctWindow)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - phoneKeep)

local acctCount = redis.call('ZCARD', KEYS[1])
if acctCount >= acctLimit then
  -- a slot frees when the (count - limit + 1)-th oldest start leaves the window
  local e = redis.call('ZRANGE', KEYS[1], acctCount - acctLimit, acctCount - acctLimit, 'WITHSCORES')
  return {1, tonumber(e[2]) + acctWindow - now}
end

local retry = 0
local inWindow = redis.call('ZCOUNT', KEYS[2], '(' .. (now - phoneWindow), '+inf')
if inWindow >= phoneLimit then
  local e = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. (now - phoneWindow), '+inf', 'WITHSCORES', 'LIMIT', inWindow - phoneLimit, 1)
  retry = tonumber(e[2]) + phoneWindow - now
end
if cooldown > 0 then
  local last = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if last[2] ~= nil and now - tonumber(last[2]) < cooldown then
    retry = math.max(retry, tonumber(last[2]) + cooldown - now)
  end
end
if retry > 0 then
  return {2, retry}
end

redis.call('ZADD', KEYS[1], now, member)
redis.call('PEXPIRE', KEYS[1], acctWindow)
redis.call('ZADD', KEYS[2], now, member)
redis.call('PEXPIRE', KEYS[2], phoneKeep)
return {0, 0}
`;

const SCRIPT = luaScript(START_LIMIT_SCRIPT);

export interface StartLimits {
  accountPerMin: number;
  phonePerHour: number;
  phoneCooldownS: number;
}

export type LimitOutcome =
  | { admitted: true; release(): Promise<void> }
  | { admitted: false; error: 'TENANT_RATE_LIMIT' | 'PHONE_RATE_LIMIT'; retryAfterS: number };

export function limitKeys(prefix: string, accountId: number, phone: string): [string, string] {
  return [`${prefix}:verify:rl:{${accountId}}:account`, `${prefix}:verify:rl:{${accountId}}:phone:${phone}`];
}

/** Check both levels and, when admitted, record this start (atomically). */
export async function admitStart(redis: Redis, prefix: string, accountId: number, phone: string, limits: StartLimits): Promise<LimitOutcome> {
  // The shared client queues commands while it reconnects (workers need that); a start would then
  // hang for the whole outage. It fails at once instead: 503, nothing accepted, retry later.
  if (redis.status !== 'ready') {
    throw new StorageUnavailableError('redis', `connection is ${redis.status}`);
  }
  const keys = limitKeys(prefix, accountId, phone);
  const member = `${Date.now()}.${randomBytes(8).toString('hex')}`;
  const reply = await runScript(redis, SCRIPT, keys, [
    member, limits.accountPerMin, ACCOUNT_WINDOW_MS, limits.phonePerHour, PHONE_WINDOW_MS, limits.phoneCooldownS * 1000,
  ]) as [number, number];
  const [verdict, retryMs] = [Number(reply[0]), Number(reply[1])];
  if (verdict === 0) {
    return {
      admitted: true,
      release: async () => {
        await redis.multi().zrem(keys[0], member).zrem(keys[1], member).exec();
      },
    };
  }
  return {
    admitted: false,
    error: verdict === 1 ? 'TENANT_RATE_LIMIT' : 'PHONE_RATE_LIMIT',
    retryAfterS: Math.max(1, Math.ceil(retryMs / 1000)),
  };
}
