/** Redis connections and Lua scripts. Redis carries queues and counters only; Postgres is the record. */
import { createHash } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';

export type { Redis };

/**
 * A connection for BullMQ and counters. `maxRetriesPerRequest: null` is what BullMQ workers need;
 * producers on the request path fail fast through `enableOfflineQueue: false` instead of hanging.
 */
export function createRedis(url: string, opts: RedisOptions = {}): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: null,
    lazyConnect: false,
    connectTimeout: 5000,
    ...opts,
  });
  // Errors surface through the commands that fail; an unhandled 'error' event would crash.
  redis.on('error', () => undefined);
  return redis;
}

/** A Lua script and its SHA-1, as EVALSHA names it. Each script documents its KEYS and ARGV where it is defined. */
export interface LuaScript {
  source: string;
  sha: string;
}

export function luaScript(source: string): LuaScript {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/** EVALSHA, falling back to EVAL once when the server does not have the script cached (a restart, another node). */
export async function runScript(redis: Redis, script: LuaScript, keys: string[], args: Array<string | number>): Promise<unknown> {
  try {
    return await redis.evalsha(script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!(err instanceof Error) || !err.message.includes('NOSCRIPT')) throw err;
    return redis.eval(script.source, keys.length, ...keys, ...args);
  }
}
