/**
 * Liveness and readiness, for the web process (`/health/live`, `/health/ready`) and the metrics
 * listener of every other process (METRICS_PORT). Live: the process answers. Ready: Postgres and
 * Redis answer within 2 s; each configured carrier connection's live state is reported beside
 * them. A carrier that is down makes the answer `degraded`, not unready: accepting messages while
 * a carrier is away is right (they wait in Postgres and go once it is back), and taking the API out
 * of a load balancer would refuse them instead.
 */
import type { Redis } from './redis.js';
import type { Config } from './config.js';
import type { Db } from './db/pool.js';
import type { SecretBox } from './secrets/sealed.js';
import { listConnectionViews } from './carriers/admin.js';

export interface CarrierHealth {
  kind: string;
  state: string;
  detail?: string;
}

export interface Readiness {
  /** `ok`, `degraded` (a carrier connection is not bound/ready) or `unavailable` (Postgres or Redis down: HTTP 503). */
  status: 'ok' | 'degraded' | 'unavailable';
  postgres: 'ok' | 'down';
  redis: 'ok' | 'down';
  carriers: Record<string, CarrierHealth>;
}

export interface HealthDeps {
  db: Db;
  redis: Redis;
  config: Config;
  secrets: SecretBox;
}

const CHECK_TIMEOUT_MS = 2000;

function within<T>(p: Promise<T>, ms = CHECK_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), ms);
    timer.unref();
  })]).finally(() => clearTimeout(timer));
}

/** Postgres and Redis only (what `/health` has always answered). */
export async function checkStores(deps: Pick<HealthDeps, 'db' | 'redis'>): Promise<{ postgres: 'ok' | 'down'; redis: 'ok' | 'down' }> {
  const [pg, redis] = await Promise.allSettled([within(deps.db.query('SELECT 1')), within(deps.redis.ping())]);
  return { postgres: pg.status === 'fulfilled' ? 'ok' : 'down', redis: redis.status === 'fulfilled' ? 'ok' : 'down' };
}

const HEALTHY_STATES = new Set(['bound', 'ready', 'disabled']);

/**
 * The stores and the carriers' states, read at the same time: the answer comes within one check's
 * 2 s even while a store is down (one after the other it took 4 s with Redis down).
 */
export async function checkReadiness(deps: HealthDeps): Promise<Readiness> {
  const [stores, views] = await Promise.all([
    checkStores(deps),
    // A store that does not answer: the carriers are reported as unknown rather than failing readiness.
    within(listConnectionViews({ db: deps.db, redis: deps.redis, config: deps.config, box: deps.secrets })).catch(() => null),
  ]);
  const carriers: Record<string, CarrierHealth> = {};
  if (stores.postgres === 'ok' && views) {
    for (const view of views) {
      carriers[view.name] = { kind: view.kind, state: view.state, ...(view.state_detail !== undefined && { detail: view.state_detail }) };
    }
  }
  const up = stores.postgres === 'ok' && stores.redis === 'ok';
  const carriersUp = Object.values(carriers).every((c) => HEALTHY_STATES.has(c.state));
  return { status: !up ? 'unavailable' : carriersUp ? 'ok' : 'degraded', ...stores, carriers };
}
