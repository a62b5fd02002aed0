/**
 * Who pays for what a key sends (D3, D6), in one place: an own-credit sub-key (neither primary nor
 * shared) from its own balance in its currency; every other key from its account's balance in the
 * key's currency. `GET /v1/credit`, the XML API's balance check, verification's credit check and
 * dispatch's charges all follow this rule.
 */
import type { Queryable } from '../db/pool.js';
import type { Currency } from './accounts.js';

export interface PayingKey {
  id: number;
  accountId: number;
  isPrimary: boolean;
  shared: boolean;
  currency: Currency;
}

export interface Payer {
  kind: 'account' | 'key';
  id: number;
  currency: Currency;
}

export function paysFromOwnBalance(key: Pick<PayingKey, 'isPrimary' | 'shared'>): boolean {
  return !key.isPrimary && !key.shared;
}

export function payerOf(key: PayingKey): Payer {
  return paysFromOwnBalance(key)
    ? { kind: 'key', id: key.id, currency: key.currency }
    : { kind: 'account', id: key.accountId, currency: key.currency };
}

/** A stable text key of a payer (to sum charges per payer, in a fixed order). */
export const payerKey = (p: Payer): string => `${p.kind}.${p.id}.${p.currency}`;

/**
 * The values of a map keyed by `payerKey`, in the payers' key order: the order in which one
 * transaction locks several balances, so two transactions that lock the same balances cannot
 * deadlock on each other.
 */
export function inPayerOrder<V>(byPayerKey: ReadonlyMap<string, V>): V[] {
  const out: V[] = [];
  for (const key of [...byPayerKey.keys()].sort()) {
    out.push(byPayerKey.get(key)!);
  }
  return out;
}

/** One payer's balance change, in units of the money scale (shared/domain/money.ts). */
export interface PayerSum {
  payer: Payer;
  units: number;
}

/**
 * Amounts summed per payer and handed out in the payers' key order. Every transaction that
 * changes several balances changes them in this order (a dispatch job's debits, a status batch's
 * refunds), so two transactions that change the same balances lock their rows alike and cannot
 * deadlock on each other.
 */
export class PayerSums {
  private readonly sums = new Map<string, PayerSum>();

  add(payer: Payer, units: number): void {
    const key = payerKey(payer);
    const sum = this.sums.get(key);
    if (sum) {
      sum.units += units;
    } else {
      this.sums.set(key, { payer, units });
    }
  }

  /** The sums in the payers' key order (`inPayerOrder`). */
  inOrder(): PayerSum[] {
    return inPayerOrder(this.sums);
  }
}

/** The rule in SQL: the paying balance of a key row `k` joined with its account row `a`. */
export const PAYING_BALANCE_SQL = `CASE WHEN NOT k.is_primary AND NOT k.shared THEN k.balance
                   WHEN k.currency = 'CZK' THEN a.credit_czk ELSE a.credit_eur END`;

/** The balance that pays for the key's sends. */
export async function payingBalance(db: Queryable, keyId: number): Promise<number> {
  const { rows } = await db.query<{ balance: string | number }>(
    `SELECT ${PAYING_BALANCE_SQL} AS balance FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.id = $1`, [keyId]);
  return Number(rows[0]?.balance ?? 0);
}
