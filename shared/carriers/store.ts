/**
 * Carrier connections and senders in Postgres (D12), for every connector kind. Secrets are sealed
 * (secrets/sealed.ts) before they are written and opened only when a connection is run or a
 * sender's credentials are needed; answers show them masked.
 *
 * Tables (migrations 001, 015): `carrier_connections` (name, kind, config jsonb, secrets sealed),
 * `carrier_routes` (a connection's destination prefixes, per channel it carries), `carrier_senders`
 * (an account's senders on a family and their connection; credentials sealed).
 */
import { EventEmitter } from 'node:events';
import { withTx, type Db, type Queryable } from '../db/pool.js';
import type { Family } from '../channels/index.js';
import type { SecretBox } from '../secrets/sealed.js';
import type { CarrierProvider, ConnectionConfig, ConnectionSpec, SenderSpec } from './provider.js';

export const CONNECTION_NAME_RE = /^[A-Za-z0-9_-]{1,40}$/;

export class ConnectionConflictError extends Error {
  override name = 'ConnectionConflictError';
}

/**
 * In-process signal that stored connections or senders changed (emitted by the admin API), so the
 * process that made the change applies it at once. Every other process learns of it from the
 * stored version (domain/routing-config.ts), which its dispatch batches read.
 */
export const carrierConfigChanges = new EventEmitter<{ changed: [] }>();

/** What a connection's sealed secrets are bound to (also read by onboarding, shared/whatsapp/onboarding/connection.ts). */
export const connectionAad = (name: string): string => `carrier-connection:${name}`;
const senderAad = (accountId: number, family: string, sender: string): string => `carrier-sender:${accountId}:${family}:${sender}`;

interface ConnectionRow {
  id: number;
  name: string;
  kind: string;
  config: ConnectionConfig;
  secrets: Buffer | null;
  enabled: boolean;
  routes: string[];
  created_at: Date;
}

const SELECT_CONNECTIONS = `
  SELECT c.id, c.name, c.kind, c.config, c.secrets, c.enabled, c.created_at,
         COALESCE(array_agg(DISTINCT r.prefix ORDER BY r.prefix) FILTER (WHERE r.id IS NOT NULL), '{}') AS routes
    FROM carrier_connections c
    LEFT JOIN carrier_routes r ON r.connection_id = c.id
   WHERE ($1::text[] IS NULL OR c.kind = ANY($1)) AND ($2::text IS NULL OR c.name = $2)
   GROUP BY c.id
   ORDER BY c.name`;

function toSpec(row: ConnectionRow, provider: CarrierProvider, box: SecretBox): ConnectionSpec {
  const secrets = row.secrets ? box.open(row.secrets, connectionAad(row.name)) : {};
  return { name: row.name, kind: row.kind, config: provider.joinSecrets(row.config, secrets), routes: row.routes, enabled: row.enabled, source: 'admin' };
}

/** Stored connections of the given kinds (all kinds when null), secrets opened. */
export async function loadConnections(
  db: Queryable, box: SecretBox, providers: ReadonlyMap<string, CarrierProvider>, kinds: string[] | null, name: string | null = null,
): Promise<ConnectionSpec[]> {
  const { rows } = await db.query<ConnectionRow>(SELECT_CONNECTIONS, [kinds, name]);
  const out: ConnectionSpec[] = [];
  for (const row of rows) {
    const provider = providers.get(row.kind);
    if (provider) out.push(toSpec(row, provider, box));
  }
  return out;
}

/**
 * Creates or replaces a connection and its routes in one transaction. Throws
 * ConnectionConflictError when the name belongs to a connection of another kind, or (prefix-routed
 * kinds) when a prefix is routed to another connection.
 */
export async function saveConnection(
  db: Db, box: SecretBox, provider: CarrierProvider, spec: ConnectionSpec,
): Promise<{ created: boolean; connection: ConnectionSpec }> {
  const { config, secrets } = provider.splitSecrets(spec.config);
  const sealed = Object.keys(secrets).length > 0 ? box.seal(secrets, connectionAad(spec.name)) : null;
  // D12: no routes means every destination. For prefix-routed kinds that is stored as the prefix
  // '', so that two connections claiming every destination conflict like any other prefix.
  const routes = provider.routing === 'prefix' && spec.routes.length === 0 && (provider.sends?.(spec) ?? true) ? [''] : spec.routes;
  try {
    return await withTx(db, async (tx) => {
      const { rows } = await tx.query<{ id: number; created: boolean }>(
        `INSERT INTO carrier_connections (name, kind, config, secrets, enabled) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (name) DO UPDATE SET config = EXCLUDED.config, secrets = EXCLUDED.secrets, enabled = EXCLUDED.enabled,
                                          url = NULL, updated_at = now()
           WHERE carrier_connections.kind = EXCLUDED.kind
         RETURNING id, (xmax = 0) AS created`,
        [spec.name, provider.kind, JSON.stringify(config), sealed, spec.enabled],
      );
      const row = rows[0];
      if (!row) throw new ConnectionConflictError(`name: "${spec.name}" is a connection of another kind`);
      if (provider.routing === 'prefix') {
        const { rows: taken } = await tx.query<{ prefix: string; name: string }>(
          `SELECT r.prefix, c.name FROM carrier_routes r JOIN carrier_connections c ON c.id = r.connection_id
            WHERE r.channel = ANY($3::text[]) AND r.prefix = ANY($1::text[]) AND r.connection_id <> $2
            ORDER BY r.prefix LIMIT 1`,
          [routes, row.id, provider.channels],
        );
        if (taken[0]) {
          throw new ConnectionConflictError(`routes: prefix "${taken[0].prefix}" is already routed to connection "${taken[0].name}"`);
        }
      }
      await tx.query('DELETE FROM carrier_routes WHERE connection_id = $1', [row.id]);
      await tx.query(
        `INSERT INTO carrier_routes (connection_id, channel, prefix)
         SELECT $1, c, p FROM unnest($2::text[]) AS c, unnest($3::text[]) AS p`,
        [row.id, provider.channels, routes],
      );
      const saved = await loadConnections(tx, box, new Map([[provider.kind, provider]]), [provider.kind], spec.name);
      if (!saved[0]) throw new Error('connection vanished while being saved');
      return { created: row.created, connection: saved[0] };
    });
  } catch (err) {
    // Two concurrent saves claiming one prefix: the unique index decides.
    if ((err as { code?: string }).code === '23505') throw new ConnectionConflictError('routes: a prefix is already routed to another connection');
    throw err;
  }
}

/**
 * Deletes a connection that no sender uses: `deleted`; `missing` when there is none of that name;
 * else the senders that still use it (their rows, and the sealed credentials some hold, would go
 * with it: `carrier_senders.connection_id` cascades), and nothing is deleted.
 * $1: the connection's name.
 */
export async function deleteConnection(db: Queryable, name: string): Promise<{ result: 'deleted' | 'missing' } | { result: 'in use'; senders: number[] }> {
  const { rows } = await db.query<{ found: boolean; senders: number[]; deleted: boolean }>(
    `WITH c AS (SELECT id FROM carrier_connections WHERE name = $1),
          s AS (SELECT coalesce(array_agg(cs.id ORDER BY cs.id), '{}') AS ids FROM carrier_senders cs JOIN c ON cs.connection_id = c.id),
          d AS (DELETE FROM carrier_connections WHERE name = $1 AND cardinality((SELECT ids FROM s)) = 0 RETURNING id)
     SELECT EXISTS (SELECT 1 FROM c) AS found, (SELECT ids FROM s) AS senders, EXISTS (SELECT 1 FROM d) AS deleted`,
    [name]);
  const row = rows[0]!;
  if (!row.found) return { result: 'missing' };
  return row.deleted ? { result: 'deleted' } : { result: 'in use', senders: row.senders.map(Number) };
}

/**
 * Seals what older versions stored in clear: an SMPP connection's password inside `url`. Runs at
 * start in a process holding the key (migrations cannot seal); a row is moved once.
 */
export async function sealLegacyConnections(db: Db, box: SecretBox, providers: ReadonlyMap<string, CarrierProvider>): Promise<number> {
  const { rows } = await db.query<{ name: string; kind: string; url: string }>(
    'SELECT name, kind, url FROM carrier_connections WHERE url IS NOT NULL AND secrets IS NULL');
  let moved = 0;
  for (const row of rows) {
    const provider = providers.get(row.kind);
    if (!provider) continue;
    const { config, secrets } = provider.splitSecrets({ url: row.url });
    const sealed = Object.keys(secrets).length > 0 ? box.seal(secrets, connectionAad(row.name)) : null;
    const { rowCount } = await db.query(
      'UPDATE carrier_connections SET config = $2, secrets = $3, url = NULL, updated_at = now() WHERE name = $1 AND url = $4 AND secrets IS NULL',
      [row.name, JSON.stringify(config), sealed, row.url]);
    moved += rowCount ?? 0;
  }
  return moved;
}

interface SenderRow {
  id: number;
  account_id: number;
  family: Family;
  sender: string;
  connection: string;
  credentials: Buffer | null;
  details: Record<string, unknown>;
}

/** Senders of one account (or of every account), with the connection names; credentials opened only when asked. */
export async function loadSenders(
  db: Queryable, box: SecretBox | null, filter: { accountId?: number; families?: readonly string[] } = {},
): Promise<SenderSpec[]> {
  const { rows } = await db.query<SenderRow>(
    `SELECT s.id, s.account_id, s.family, s.sender, c.name AS connection, s.credentials, s.details
       FROM carrier_senders s JOIN carrier_connections c ON c.id = s.connection_id
      WHERE ($1::bigint IS NULL OR s.account_id = $1) AND ($2::text[] IS NULL OR s.family = ANY($2))
      ORDER BY s.account_id, s.family, s.sender`,
    [filter.accountId ?? null, filter.families ?? null],
  );
  return rows.map((r) => ({
    id: r.id, accountId: r.account_id, family: r.family, sender: r.sender, connection: r.connection, details: r.details,
    credentials: box && r.credentials ? box.open(r.credentials, senderAad(r.account_id, r.family, r.sender)) : {},
  }));
}

/**
 * Creates or replaces (by account, family and sender) a sender row. Throws ConnectionConflictError
 * when the connection does not exist or carries another family.
 */
export async function saveSender(
  db: Db, box: SecretBox, input: Omit<SenderSpec, 'id'>, connectionKinds: readonly string[],
): Promise<{ created: boolean; sender: SenderSpec }> {
  const sealed = Object.keys(input.credentials).length > 0 ? box.seal(input.credentials, senderAad(input.accountId, input.family, input.sender)) : null;
  return withTx(db, async (tx) => {
    const { rows: conns } = await tx.query<{ id: number; kind: string }>('SELECT id, kind FROM carrier_connections WHERE name = $1', [input.connection]);
    const conn = conns[0];
    if (!conn) throw new ConnectionConflictError(`connection: no carrier connection "${input.connection}"`);
    if (!connectionKinds.includes(conn.kind)) {
      throw new ConnectionConflictError(`connection: "${input.connection}" is a ${conn.kind} connection, which does not carry ${input.family}`);
    }
    const { rows } = await tx.query<{ id: number; created: boolean }>(
      `INSERT INTO carrier_senders (account_id, family, sender, connection_id, credentials, details) VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (account_id, family, sender) DO UPDATE SET connection_id = EXCLUDED.connection_id, credentials = EXCLUDED.credentials,
                                                             details = EXCLUDED.details, updated_at = now()
       RETURNING id, (xmax = 0) AS created`,
      [input.accountId, input.family, input.sender, conn.id, sealed, JSON.stringify(input.details)],
    );
    const row = rows[0]!;
    return { created: row.created, sender: { ...input, id: row.id } };
  });
}

export async function deleteSender(db: Queryable, id: number): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM carrier_senders WHERE id = $1', [id]);
  return (rowCount ?? 0) > 0;
}
