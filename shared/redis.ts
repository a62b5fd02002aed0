/** Redis connections and Lua scripts. Redis carries queues and counters only; Postgres is the record. */
import { createHash } from 'node:crypto';
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from './logger.js';

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
  // Errors surface through the commands that fail (and RedisOutages, where a process watches the
  // client); without a listener ioredis prints every connection error's stack.
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

const CONNECTION_ERRORS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

/** An error that says Redis cannot be reached (as opposed to a command that failed). */
export function isConnectionError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (e && typeof e.code === 'string' && CONNECTION_ERRORS.has(e.code)) return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  return /Connection is closed|connect ECONNREFUSED|Stream isn't writeable|Reached the max retries/.test(message);
}

/**
 * Redis outages in the log: while Redis cannot be reached every connection of a process (the
 * queues', the workers' blocking ones, the counters') errors over and over. The first error of an
 * outage is one structured warn line; the rest are only counted; when the main connection is ready
 * again one info line says how long it lasted and how many errors it swallowed.
 */
export class RedisOutages {
  private down: { since: number; errors: number; sources: Set<string> } | null = null;

  constructor(private readonly logger: Logger) {}

  /** Watches a client: its errors count as outage errors, its `ready` ends the outage. */
  watch(redis: Redis, source: string): void {
    redis.on('error', (err: unknown) => this.error(source, err));
    redis.on('ready', () => this.ready());
  }

  /** Reports an error of `source`; returns false when it is not a connection error (the caller logs it). */
  error(source: string, err: unknown): boolean {
    if (!isConnectionError(err)) return false;
    if (this.down) {
      this.down.errors++;
      this.down.sources.add(source);
      return true;
    }
    this.down = { since: Date.now(), errors: 1, sources: new Set([source]) };
    const e = err as { code?: string; message?: string };
    this.logger.warn({ source, code: e.code, err: e.message }, 'Redis unreachable; retrying (further errors of this outage are counted, not logged)');
    return true;
  }

  ready(): void {
    if (!this.down) return;
    const { since, errors, sources } = this.down;
    this.down = null;
    this.logger.info({ downForMs: Date.now() - since, errors, sources: [...sources] }, 'Redis reachable again');
  }
}
