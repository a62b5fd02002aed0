/**
 * Which SMPP connections a worker process runs, and the SMS routes that point at them.
 *
 * Sources: `SMPP_URL` (connection `default`, route prefix '' = every destination) and the
 * `carrier_connections` / `carrier_routes` tables (kind `smpp`), managed through the admin API.
 * A process that runs the `sms` pool builds one SmppCarrier per enabled connection, registers the
 * routes with the engine's CarrierRegistry (longest prefix wins; on an equal prefix a stored route
 * beats SMPP_URL) and re-reads the tables every `refreshMs` (default 5 s) and at once when the
 * admin API changed them in this process. A connection whose URL changed is replaced (the old one
 * unbinds gracefully); a removed one is closed. Processes without the `sms` pool never bind.
 */
import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { withTx, type Db, type Queryable } from '../../db/pool.js';
import type { CarrierSink } from '../types.js';
import type { CarrierRegistry, Route } from '../../engine/routing.js';
import { parseSmppUrl, type SmppUrlOptions } from './session.js';
import { SmppCarrier, type CarrierLogger, type SmppCarrierOptions } from './carrier.js';

/** Name of the connection that SMPP_URL defines (reserved: the admin API refuses it). */
export const ENV_CONNECTION = 'default';
export const CONNECTION_NAME_RE = /^[A-Za-z0-9_-]{1,40}$/;

export interface SmppConnectionRow {
  id: number;
  name: string;
  url: string;
  enabled: boolean;
  routes: string[];
  created_at: Date;
}

/** Every stored SMPP connection with its SMS route prefixes (sorted). */
export async function listSmppConnections(db: Queryable): Promise<SmppConnectionRow[]> {
  const { rows } = await db.query<SmppConnectionRow>(
    `SELECT c.id, c.name, c.url, c.enabled, c.created_at,
            COALESCE(array_agg(r.prefix ORDER BY r.prefix) FILTER (WHERE r.id IS NOT NULL), '{}') AS routes
       FROM carrier_connections c
       LEFT JOIN carrier_routes r ON r.connection_id = c.id AND r.channel = 'sms'
      WHERE c.kind = 'smpp'
      GROUP BY c.id
      ORDER BY c.name`,
  );
  return rows;
}

export class ConnectionConflictError extends Error {
  override name = 'ConnectionConflictError';
}

/**
 * Creates or replaces a connection and its routes in one transaction. Throws
 * ConnectionConflictError when a prefix is routed to another connection or the name belongs to a
 * connection of another kind.
 */
export async function saveSmppConnection(
  db: Db,
  input: { name: string; url: string; routes: string[]; enabled: boolean },
): Promise<{ created: boolean; connection: SmppConnectionRow }> {
  try {
    return await withTx(db, async (tx) => {
      const { rows } = await tx.query<{ id: number; created: boolean }>(
        `INSERT INTO carrier_connections (name, kind, url, enabled) VALUES ($1, 'smpp', $2, $3)
         ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url, enabled = EXCLUDED.enabled
           WHERE carrier_connections.kind = 'smpp'
         RETURNING id, (xmax = 0) AS created`,
        [input.name, input.url, input.enabled],
      );
      const row = rows[0];
      if (!row) throw new ConnectionConflictError(`name: "${input.name}" is a connection of another kind`);
      const { rows: taken } = await tx.query<{ prefix: string; name: string }>(
        `SELECT r.prefix, c.name FROM carrier_routes r JOIN carrier_connections c ON c.id = r.connection_id
          WHERE r.channel = 'sms' AND r.prefix = ANY($1::text[]) AND r.connection_id <> $2
          ORDER BY r.prefix LIMIT 1`,
        [input.routes, row.id],
      );
      if (taken[0]) {
        throw new ConnectionConflictError(`routes: prefix "${taken[0].prefix}" is already routed to connection "${taken[0].name}"`);
      }
      await tx.query(`DELETE FROM carrier_routes WHERE connection_id = $1 AND channel = 'sms'`, [row.id]);
      await tx.query(
        `INSERT INTO carrier_routes (connection_id, channel, prefix) SELECT $1, 'sms', p FROM unnest($2::text[]) AS p`,
        [row.id, input.routes],
      );
      const all = await listSmppConnections(tx);
      const connection = all.find((c) => c.id === row.id);
      if (!connection) throw new Error('connection vanished while being saved');
      return { created: row.created, connection };
    });
  } catch (err) {
    // Two concurrent saves claiming one prefix: the unique index decides.
    if ((err as { code?: string }).code === '23505') throw new ConnectionConflictError('routes: a prefix is already routed to another connection');
    throw err;
  }
}

export async function deleteSmppConnection(db: Queryable, name: string): Promise<boolean> {
  const { rowCount } = await db.query(`DELETE FROM carrier_connections WHERE name = $1 AND kind = 'smpp'`, [name]);
  return (rowCount ?? 0) > 0;
}

/** The URL with its password replaced by `***` (for answers and logs). */
export function maskSmppUrl(raw: string): string {
  try {
    const url = new URL(raw.trim());
    if (url.password) url.password = '***';
    return url.toString();
  } catch {
    return '(unparsable URL)';
  }
}

/**
 * In-process signal that the stored connections changed (emitted by the admin API), so a
 * single-process deployment applies a change at once; other processes notice within refreshMs.
 */
export const smppConfigChanges = new EventEmitter<{ changed: [] }>();

export interface SmppConnectionsDeps {
  db: Db;
  redis: Redis;
  redisPrefix: string;
  /** SMPP_URL, or null. */
  smppUrl: string | null;
  sink: CarrierSink;
  registry: CarrierRegistry;
  logger: CarrierLogger;
  /** Re-read the tables this often; default 5000 ms. */
  refreshMs?: number;
  /** Extra carrier options (tests). */
  carrierOptions?: Partial<Omit<SmppCarrierOptions, 'connection' | 'url' | 'sink' | 'redis' | 'redisPrefix'>>;
}

interface Running {
  url: string;
  namespace: string;
  carrier: SmppCarrier;
}

interface Wanted {
  name: string;
  url: string;
  parsed: SmppUrlOptions;
  routes: string[];
}

export class SmppConnections {
  private readonly running = new Map<string, Running>();
  private readonly closing = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private refreshing: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private readonly onChanged = (): void => {
    void this.refresh().catch((err: unknown) => this.deps.logger.error({ err }, 'SMPP connections refresh failed'));
  };

  constructor(private readonly deps: SmppConnectionsDeps) {}

  /** Loads the connections, starts binding them and registers their routes; then refreshes periodically. */
  async start(): Promise<void> {
    await this.refresh();
    smppConfigChanges.on('changed', this.onChanged);
    this.timer = setInterval(this.onChanged, this.deps.refreshMs ?? 5_000);
    this.timer.unref();
  }

  carriers(): SmppCarrier[] {
    return [...this.running.values()].map((r) => r.carrier);
  }

  carrier(name: string): SmppCarrier | null {
    return this.running.get(name)?.carrier ?? null;
  }

  /** Applies the current configuration (serialised: a call during a refresh runs once more after it). */
  refresh(): Promise<void> {
    if (this.refreshing) {
      this.again = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      try {
        do {
          this.again = false;
          await this.apply();
        } while (this.again && !this.closed);
      } finally {
        this.refreshing = null;
      }
    })();
    return this.refreshing;
  }

  private async wanted(): Promise<Wanted[]> {
    const out: Wanted[] = [];
    const rows = await listSmppConnections(this.deps.db);
    for (const row of rows) {
      if (!row.enabled || row.name === ENV_CONNECTION) continue;
      try {
        out.push({ name: row.name, url: row.url, parsed: parseSmppUrl(row.url), routes: row.routes });
      } catch (err) {
        this.deps.logger.error({ connection: row.name, err: (err as Error).message }, 'stored SMPP connection has an invalid URL; skipped');
      }
    }
    if (this.deps.smppUrl) {
      // Validated at start (runtime): an error here would be a bug, so let it surface.
      out.push({ name: ENV_CONNECTION, url: this.deps.smppUrl, parsed: parseSmppUrl(this.deps.smppUrl), routes: [''] });
    }
    return out;
  }

  private async apply(): Promise<void> {
    if (this.closed) return;
    const wanted = await this.wanted();
    if (this.closed) return;
    const namespaces = pairReceivers(wanted);
    const retired: SmppCarrier[] = [];
    for (const [name, run] of this.running) {
      const want = wanted.find((w) => w.name === name);
      if (!want || want.url !== run.url || (namespaces.get(name) ?? name) !== run.namespace) {
        this.running.delete(name);
        retired.push(run.carrier);
      }
    }
    for (const want of wanted) {
      if (this.running.has(want.name)) continue;
      const namespace = namespaces.get(want.name) ?? want.name;
      const carrier = new SmppCarrier({
        ...this.deps.carrierOptions,
        connection: want.name,
        url: want.parsed,
        sink: this.deps.sink,
        redis: this.deps.redis,
        redisPrefix: this.deps.redisPrefix,
        refNamespace: namespace,
        logger: this.deps.logger,
      });
      this.running.set(want.name, { url: want.url, namespace, carrier });
      carrier.start();
      this.deps.logger.info(
        { connection: want.name, host: want.parsed.host, port: want.parsed.port, bind: want.parsed.bindMode, window: want.parsed.window, tps: want.parsed.tps },
        'SMPP connection started',
      );
    }
    // Stored routes first: on an equal prefix they win over SMPP_URL (the registry's sort is stable).
    const routes: Route[] = [];
    for (const want of [...wanted.filter((w) => w.name !== ENV_CONNECTION), ...wanted.filter((w) => w.name === ENV_CONNECTION)]) {
      const run = this.running.get(want.name);
      if (!run || want.parsed.bindMode === 'receiver') continue;
      for (const prefix of want.routes) routes.push({ channel: 'sms', prefix, carrier: run.carrier });
    }
    this.deps.registry.setRoutes(routes);
    // Only after the new routes are in place: nothing new is handed to a retired carrier.
    for (const carrier of retired) {
      this.deps.logger.info({ connection: carrier.connection }, 'SMPP connection retired');
      this.track(carrier.close());
    }
  }

  private track(p: Promise<void>): void {
    const tracked = p.catch((err: unknown) => this.deps.logger.warn({ err }, 'SMPP connection close failed'));
    this.closing.add(tracked);
    void tracked.finally(() => this.closing.delete(tracked));
  }

  /** Stops refreshing, unbinds every connection (in-flight submits answered first) and drops the routes. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    smppConfigChanges.off('changed', this.onChanged);
    await this.refreshing?.catch(() => undefined);
    this.deps.registry.setRoutes([]);
    for (const run of this.running.values()) this.track(run.carrier.close());
    this.running.clear();
    await Promise.all([...this.closing]);
  }
}

/**
 * A receiver-only bind reports receipts under the name of a sending bind to the same SMSC
 * (host, port, system_id), so its receipts match the ids that connection registered.
 */
function pairReceivers(wanted: Wanted[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const w of wanted) {
    if (w.parsed.bindMode !== 'receiver') continue;
    const sender = wanted.find(
      (o) => o.parsed.bindMode !== 'receiver' && o.parsed.host === w.parsed.host && o.parsed.port === w.parsed.port && o.parsed.systemId === w.parsed.systemId,
    );
    if (sender) out.set(w.name, sender.name);
  }
  return out;
}
