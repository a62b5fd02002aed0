/**
 * Price list: per channel, per destination calling-code prefix (longest wins, '' matches all),
 * optionally per operator (MNC). Dispatch reads it from a small in-process copy refreshed every
 * few seconds, so pricing a batch costs no database round trip.
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
let cached: { at: number; rows: PriceRow[] } | null = null;

export function invalidatePriceCache(): void {
  cached = null;
}

export async function currentPrices(db: Queryable): Promise<PriceRow[]> {
  const now = Date.now();
  if (!cached || now - cached.at > REFRESH_MS) {
    cached = { at: now, rows: await listPrices(db) };
  }
  return cached.rows;
}
