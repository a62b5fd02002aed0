/**
 * Test harness: every test file gets its own Postgres database and Redis key prefix, and the
 * real service (HTTP, every worker pool, the sandbox carrier) started in-process on a free port.
 * Nothing of our own storage or queues is mocked.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { Redis } from 'ioredis';
import { loadConfig, type Config } from '../../shared/config.js';
import { createLogger, type Logger } from '../../shared/logger.js';
import { startRuntime, type Runtime, type PoolName, type Role } from '../../services/runtime.js';
import { clearKeyCache } from '../../shared/domain/keys.js';
import type { Lane } from '../../shared/queues.js';

export const PG_BASE = process.env.TEST_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres';
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface TestService {
  runtime: Runtime;
  config: Config;
  url: string;
  databaseUrl: string;
  prefix: string;
  /** JSON request helper; returns status, headers and parsed body (text when not JSON). */
  request(method: string, path: string, opts?: { body?: unknown; headers?: Record<string, string>; raw?: string | Buffer }): Promise<TestResponse>;
  admin(method: string, path: string, body?: unknown): Promise<TestResponse>;
  createAccount(input?: Record<string, unknown>): Promise<{ accountId: number; apiKey: string }>;
  sql<T extends pg.QueryResultRow = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  /** Wait (up to 10 s) until no recipient is still on its way, so that stopping interrupts no delivery. */
  settle(): Promise<void>;
  stop(): Promise<void>;
}

export interface TestResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: any; // eslint-disable-line @typescript-eslint/no-explicit-any -- tests read arbitrary JSON
  text: string;
}

export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

export async function createTestDatabase(base = PG_BASE): Promise<{ url: string; drop(): Promise<void> }> {
  const name = uniqueName('sb_test');
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: base });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

export async function deleteRedisPrefix(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) {
      await redis.del(...keys);
    }
  } while (cursor !== '0');
  redis.disconnect();
}

export async function startTestService(opts: {
  env?: Record<string, string>; role?: Role; pools?: PoolName[]; lanes?: Lane[];
  /** A logger of the test's own (to read what the service logs); default: LOG_LEVEL's, to stdout. */
  logger?: Logger;
  /** A database the test made (another cluster); default: a fresh one on the shared cluster, dropped at stop. */
  database?: { url: string; drop(): Promise<void> };
} = {}): Promise<TestService> {
  const db = opts.database ?? await createTestDatabase();
  const prefix = uniqueName('sbt');
  const config = loadConfig({
    NODE_ENV: 'test',
    PORT: '0',
    DATABASE_URL: db.url,
    // A test on a Redis Cluster names its nodes instead (REDIS_CLUSTER_NODES; the two exclude each other).
    ...(opts.env?.REDIS_CLUSTER_NODES === undefined && { REDIS_URL }),
    REDIS_PREFIX: prefix,
    ADMIN_TOKEN,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    WEBHOOK_LINGER_MS: '100',
    ...opts.env,
  });
  const runtime = await startRuntime({
    role: opts.role ?? 'all',
    ...(opts.pools && { pools: opts.pools }),
    ...(opts.lanes && { lanes: opts.lanes }),
    config,
    logger: opts.logger ?? createLogger(config.logLevel),
  });
  const url = `http://127.0.0.1:${runtime.port}`;
  const pool = new pg.Pool({ connectionString: db.url, max: 2 });
  // DROP DATABASE … WITH (FORCE) ends connections the pool is still closing: not an error here.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));

  const request: TestService['request'] = async (method, path, o = {}) => {
    const headers: Record<string, string> = { ...o.headers };
    let payload: string | Buffer | undefined = o.raw;
    if (o.body !== undefined) {
      payload = JSON.stringify(o.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(url + path, { method, headers, ...(payload !== undefined && { body: payload }) });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON (XML answers)
    }
    return { status: res.status, headers: Object.fromEntries(res.headers.entries()), body, text };
  };
  const admin: TestService['admin'] = (method, path, body) =>
    request(method, `/admin/api${path}`, { ...(body !== undefined && { body }), headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

  return {
    runtime, config, url, databaseUrl: db.url, prefix, request, admin,
    createAccount: async (input = {}) => {
      const res = await admin('POST', '/accounts', { currency: 'CZK', credit_czk: 1000, credit_eur: 100, ...input });
      if (res.status !== 201) {
        throw new Error(`createAccount failed: ${res.status} ${res.text}`);
      }
      return { accountId: res.body.account_id as number, apiKey: res.body.api_key as string };
    },
    sql: async (text, params = []) => (await pool.query(text, params)).rows,
    settle: async () => {
      await waitFor(async () => {
        const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM recipients WHERE state IN ('queued', 'sending', 'sent')`);
        return rows[0]!.n === 0;
      }, 10_000, 'in-flight deliveries').catch(() => undefined);
    },
    stop: async () => {
      await runtime.stop();
      await pool.end();
      clearKeyCache();
      await db.drop();
      await deleteRedisPrefix(prefix);
    },
  };
}

/** Poll until `check` returns a truthy value (or throw after `timeoutMs`). */
export async function waitFor<T>(check: () => Promise<T | undefined | null | false> | T | undefined | null | false, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A local webhook receiver: records every POST; answers with a status chosen per request. */
export interface Receiver {
  url: string;
  requests: Array<{ path: string; headers: http.IncomingHttpHeaders; body: string; events: any[] }>; // eslint-disable-line @typescript-eslint/no-explicit-any
  respond: (req: http.IncomingMessage) => { status: number; headers?: Record<string, string>; delayMs?: number };
  events(): any[]; // eslint-disable-line @typescript-eslint/no-explicit-any
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const receiver: Receiver = {
    url: '',
    requests: [],
    respond: () => ({ status: 200 }),
    events: () => receiver.requests.flatMap((r) => r.events),
    close: () => new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const answer = receiver.respond(req);
      const finish = () => {
        if (answer.status >= 200 && answer.status < 300) {
          let events: unknown[] = [];
          try {
            events = JSON.parse(body) as unknown[];
          } catch {
            events = [];
          }
          receiver.requests.push({ path: req.url ?? '/', headers: req.headers, body, events });
        }
        res.writeHead(answer.status, answer.headers ?? {});
        res.end('ok');
      };
      if (answer.delayMs) {
        setTimeout(finish, answer.delayMs);
      } else {
        finish();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return receiver;
}
