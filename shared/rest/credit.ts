/**
 * `GET /v1/credit` (spec "Credit record", D6): which balance a key sees.
 *  - the primary key and shared sub-keys: the account's balances in both currencies;
 *  - an own-credit sub-key: its own balance in its currency, 0 in the other.
 * These are exactly the balances that pay for the key's messages (domain/payer.ts).
 */
import type { Queryable } from '../db/pool.js';
import type { ApiKeyRecord } from '../domain/keys.js';
import { notFound } from '../errors.js';
import { paysFromOwnBalance } from '../domain/payer.js';

export interface CreditView {
  credit_czk: number;
  credit_eur: number;
}

export async function getCredit(db: Queryable, key: ApiKeyRecord): Promise<CreditView> {
  if (paysFromOwnBalance(key)) {
    const { rows } = await db.query<{ balance: number; currency: 'CZK' | 'EUR' }>(
      'SELECT balance, currency FROM api_keys WHERE id = $1',
      [key.id],
    );
    const row = rows[0];
    if (!row) {
      throw notFound('API key not found');
    }
    return row.currency === 'CZK' ? { credit_czk: row.balance, credit_eur: 0 } : { credit_czk: 0, credit_eur: row.balance };
  }
  const { rows } = await db.query<CreditView>('SELECT credit_czk, credit_eur FROM accounts WHERE id = $1', [key.accountId]);
  const row = rows[0];
  if (!row) {
    throw notFound('account not found');
  }
  return { credit_czk: row.credit_czk, credit_eur: row.credit_eur };
}
