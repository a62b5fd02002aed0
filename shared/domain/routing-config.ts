/**
 * The stored routing configuration's version (migration 027): carrier connections, their routes,
 * senders and prices. Every statement that changes rows of those tables bumps it in its own
 * transaction, so a process that read version V and then the rows has rows at least as new as V.
 * Dispatch reads it with every batch; the process's routes (`CarrierRegistry.catchUp`) and price
 * copy (`currentPrices`) are read again when they are older than the batch's.
 */
import { prepared, type Queryable } from '../db/pool.js';

/**
 * The version as a scalar subquery, for a statement that reads it along with its own rows.
 * `WHERE only_row`: the primary key serves it, so the engine's pools (sequential scans off) plan
 * an index scan, not a scan costed at 10^10 (db/pool.ts, `indexOnly`).
 */
export const ROUTING_CONFIG_VERSION_SQL = '(SELECT version FROM routing_config WHERE only_row)::float8';

export async function readRoutingConfigVersion(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ version: number }>(prepared(`SELECT ${ROUTING_CONFIG_VERSION_SQL} AS version`, []));
  return rows[0]?.version ?? 0;
}
