/** Redis connections. Redis carries queues and counters only; Postgres is the record. */
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
