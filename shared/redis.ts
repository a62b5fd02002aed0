/**
 * Redis connections and Lua scripts. Redis carries queues and counters only; Postgres is the record.
 *
 * The service runs on one Redis (REDIS_URL) or on a Redis Cluster (REDIS_CLUSTER_NODES). On a
 * cluster every command that names several keys (a Lua script, MULTI, a pipeline, MGET) must find
 * them in one hash slot: such keys share a hash tag, made by `keyGroup` (and `queuePrefix` in
 * queues.ts for BullMQ's keys). On one Redis the same functions leave the names as they always
 * were, since what is stored under them (jobs, SMPP refs, counters) outlives a version upgrade.
 */
import { createHash } from 'node:crypto';
import { Cluster, Redis as SingleRedis, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Logger } from './logger.js';

/** A connection to one Redis or to a Redis Cluster; every module takes either. */
export type Redis = SingleRedis | Cluster;

/** Seed nodes of a Redis Cluster (REDIS_CLUSTER_NODES) and what every node is reached with. */
export interface RedisClusterTarget {
  nodes: Array<{ host: string; port: number }>;
  username?: string;
  password?: string;
  tls: boolean;
}

/** Where Redis is: one server (`url`), or a cluster when `cluster` is set (then `url` is unused). */
export interface RedisTarget {
  url: string;
  cluster: RedisClusterTarget | null;
}

/** `host:port, …` of a cluster, the redacted URL of one Redis: for messages. */
export function describeRedisTarget(target: RedisTarget, redact: (url: string) => string): string {
  if (!target.cluster) return redact(target.url);
  return `the Redis Cluster of ${target.cluster.nodes.map((n) => `${n.host.includes(':') ? `[${n.host}]` : n.host}:${n.port}`).join(', ')}`;
}

/**
 * A connection for BullMQ and counters. `maxRetriesPerRequest: null` is what BullMQ workers need;
 * producers on the request path fail fast through `enableOfflineQueue: false` instead of hanging.
 * With a cluster target it is an ioredis `Cluster`: `opts` apply to each node's connection, except
 * `lazyConnect`, `retryStrategy` and `enableOfflineQueue`, which are the cluster's own.
 */
export function createRedis(target: string | RedisTarget, opts: RedisOptions = {}): Redis {
  const t: RedisTarget = typeof target === 'string' ? { url: target, cluster: null } : target;
  let redis: Redis;
  if (t.cluster) {
    const { lazyConnect, retryStrategy, enableOfflineQueue, ...nodeOptions } = opts;
    const c = t.cluster;
    const options: ClusterOptions = {
      lazyConnect: lazyConnect ?? false,
      ...(retryStrategy && { clusterRetryStrategy: (times: number) => retryStrategy(times) }),
      ...(enableOfflineQueue !== undefined && { enableOfflineQueue }),
      redisOptions: {
        maxRetriesPerRequest: null,
        connectTimeout: 5000,
        ...(c.username !== undefined && { username: c.username }),
        ...(c.password !== undefined && { password: c.password }),
        ...(c.tls && { tls: {} }),
        ...nodeOptions,
      },
    };
    redis = new Cluster(c.nodes, options);
  } else {
    redis = new SingleRedis(t.url, {
      maxRetriesPerRequest: null,
      lazyConnect: false,
      connectTimeout: 5000,
      ...opts,
    });
  }
  // Errors surface through the commands that fail (and RedisOutages, where a process watches the
  // client); without a listener ioredis prints every connection error's stack.
  redis.on('error', () => undefined);
  return redis;
}

/** From now on the client reconnects after losing Redis (every 0.2 s more, at most 2 s apart). */
export function keepReconnecting(redis: Redis): void {
  const strategy = (times: number) => Math.min(times * 200, 2000);
  if (redis instanceof Cluster) redis.options.clusterRetryStrategy = strategy;
  else redis.options.retryStrategy = strategy;
}

/** Whether a client, or a BullMQ connection (options or a client), is a Redis Cluster's. */
export function isCluster(redis: unknown): boolean {
  return typeof redis === 'object' && redis !== null && (redis as { isCluster?: unknown }).isCluster === true;
}

/**
 * Names a group of keys that one Lua script, MULTI or pipeline touches together: on a Redis
 * Cluster the hash tag `{name}` (the group's keys share one slot), on one Redis `name` itself (the
 * names stay as they were). Keys of one group begin with it: `${keyGroup(redis, base)}:part`.
 */
export function keyGroup(redis: Redis | boolean, name: string): string {
  return (typeof redis === 'boolean' ? redis : isCluster(redis)) ? `{${name}}` : name;
}

/**
 * MGET of keys that need not share a slot: one MGET on one Redis; on a cluster one GET per key,
 * sent together (ioredis routes each to its node).
 */
export async function getEach(redis: Redis, keys: string[]): Promise<Array<string | null>> {
  if (keys.length === 0) return [];
  if (!isCluster(redis)) return redis.mget(...keys);
  return Promise.all(keys.map((key) => redis.get(key)));
}

/** A Lua script and its SHA-1, as EVALSHA names it. Each script documents its KEYS and ARGV where it is defined. */
export interface LuaScript {
  source: string;
  sha: string;
}

export function luaScript(source: string): LuaScript {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * EVALSHA, falling back to EVAL once when the server does not have the script cached (a restart,
 * another node). On a cluster every key of `keys` must carry the same hash tag (`keyGroup`): each
 * script says which in its KEYS header.
 */
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
  return /Connection is closed|connect ECONNREFUSED|Stream isn't writeable|Reached the max retries|Cluster isn't ready|None of startup nodes is available|Failed to refresh slots cache|CLUSTERDOWN/.test(message);
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
