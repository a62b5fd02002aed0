/**
 * Price list: per channel, per destination calling-code prefix (longest wins, '' matches all),
 * optionally per operator (MNC). Dispatch reads it from a small in-process copy refreshed every
 * few seconds and whenever the stored version says it changed (`currentPrices`), so pricing a
 * batch costs no database round trip of its own.
 */
import type { Queryable, Db } from '../db/pool.js';
import type { Channel } from '../carriers/types.js';

export interface PriceRow {
  channel: Channel;
  prefix: string;
  operator: number;
  price_czk: number;
  price_eur: number;
}

export async function listPrices(db: Queryable): Promise<PriceRow[]> {
  const { rows } = await db.query<PriceRow>(
    'SELECT channel, prefix, operator, price_czk, price_eur FROM prices ORDER BY channel, prefix, operator',
  );
  return rows;
}

export async function upsertPrices(db: Db, rows: PriceRow[]): Promise<number> {
  if (rows.length === 0) {
    return 0;
  }
  const { rowCount } = await db.query(
    `INSERT INTO prices (channel, prefix, operator, price_czk, price_eur)
     SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::numeric[], $5::numeric[])
     ON CONFLICT (channel, prefix, operator) DO UPDATE SET price_czk = EXCLUDED.price_czk, price_eur = EXCLUDED.price_eur`,
    [rows.map((r) => r.channel), rows.map((r) => r.prefix), rows.map((r) => r.operator), rows.map((r) => r.price_czk),
      rows.map((r) => r.price_eur)],
  );
  invalidatePriceCache();
  return rowCount ?? 0;
}

/** Pure lookup: the longest prefix of `phone` priced for `channel`; an operator-specific row beats a general one of the same prefix. */
export function findPrice(rows: readonly PriceRow[], channel: Channel, phone: string, operator = 0): PriceRow | null {
  let best: PriceRow | null = null;
  for (const row of rows) {
    if (row.channel !== channel || !phone.startsWith(row.prefix)) {
      continue;
    }
    if (row.operator !== 0 && row.operator !== operator) {
      continue;
    }
    if (!best || row.prefix.length > best.prefix.length || (row.prefix.length === best.prefix.length && row.operator !== 0)) {
      best = row;
    }
  }
  return best;
}

const REFRESH_MS = 5000;
/** The copy, when it was read, and the stored routing configuration version read before it (0: none). */
let cached: { at: number; version: number; rows: PriceRow[] } | null = null;

export function invalidatePriceCache(): void {
  cached = null;
}

/**
 * The price list from the process's copy, read again after `REFRESH_MS` or when `version` (the
 * stored routing configuration's, migration 027, read by the caller before this call) is newer
 * than the copy's: dispatch passes it, so a price changed before a message was accepted is the
 * price it is charged in every process.
 */
export async function currentPrices(db: Queryable, version = 0): Promise<PriceRow[]> {
  const now = Date.now();
  if (!cached || now - cached.at > REFRESH_MS || cached.version < version) {
    cached = { at: now, version, rows: await listPrices(db) };
  }
  return cached.rows;
}
