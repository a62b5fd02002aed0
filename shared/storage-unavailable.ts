/**
 * "Storage unavailable": an error that means Postgres or Redis could not be reached (or dropped the
 * connection) rather than that the request was wrong or the code is broken. Every API family
 * answers these with 503, `Retry-After` and "nothing was accepted" (issue 22), so a client can
 * tell "retry" from "maybe accepted". A pure function over the error object, its `cause` chain
 * and the errors of an AggregateError (Node's connect tries every address of `localhost`).
 */

/** Seconds a client is asked to wait before retrying a call that met a storage outage. */
export const STORAGE_RETRY_AFTER_S = 5;

/** Thrown where the code itself sees that a store is down (a Redis client that is not connected). */
export class StorageUnavailableError extends Error {
  constructor(readonly store: 'postgres' | 'redis', detail: string) {
    super(`${store} unavailable: ${detail}`);
    this.name = 'StorageUnavailableError';
  }
}

/** Socket-level failures to reach (or stay connected to) a server. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN', 'EPIPE',
  'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED', 'ENOENT', // ENOENT: a Unix socket path that is gone
]);

/**
 * SQLSTATEs of an unreachable or restarting server: class 08 (connection exception), 57P01
 * admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now (starting up, recovering),
 * 53300 too_many_connections.
 */
function isUnavailableSqlState(code: string): boolean {
  return code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300';
}

/** Messages of pg, pg-pool and ioredis that carry no code. */
const UNAVAILABLE_MESSAGES = [
  /^timeout exceeded when trying to connect$/, // pg-pool: connectionTimeoutMillis passed
  /^Connection terminated/, // pg: "… unexpectedly", "… due to connection timeout"
  /^Client has encountered a connection error and is not queryable$/,
  /^Connection is closed\.$/, // ioredis
  /^Stream isn't writeable and enableOfflineQueue options is false$/, // ioredis
  /^Reached the max retries per request limit/, // ioredis MaxRetriesPerRequestError
  /^connect ETIMEDOUT$/, // ioredis connectTimeout
  /^Cluster isn't ready and enableOfflineQueue options is false$/, // ioredis Cluster
  /^None of startup nodes is available$/, // ioredis Cluster
  /^Failed to refresh slots cache/, // ioredis Cluster
  /^CLUSTERDOWN/, // a Redis Cluster without a majority or with slots uncovered
];

export function isStorageUnavailable(err: unknown, depth = 0): boolean {
  if (err === null || typeof err !== 'object' || depth > 5) {
    return false;
  }
  if (err instanceof StorageUnavailableError) {
    return true;
  }
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown; name?: unknown };
  if (e.name === 'MaxRetriesPerRequestError') {
    return true;
  }
  if (typeof e.code === 'string') {
    if (NETWORK_CODES.has(e.code)) {
      return true;
    }
    // A five-character SQLSTATE from Postgres: only the listed ones; others (23505, 22P02…) are not outages.
    if (/^[0-9A-Z]{5}$/.test(e.code)) {
      return isUnavailableSqlState(e.code);
    }
  }
  if (typeof e.message === 'string' && UNAVAILABLE_MESSAGES.some((re) => re.test(e.message as string))) {
    return true;
  }
  if (Array.isArray(e.errors) && e.errors.length > 0 && e.errors.every((inner) => isStorageUnavailable(inner, depth + 1))) {
    return true;
  }
  return e.cause !== undefined && isStorageUnavailable(e.cause, depth + 1);
}
