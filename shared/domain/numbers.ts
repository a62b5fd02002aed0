/** Numbers and sender names that receive inbound traffic, assigned to accounts (D5, D11). */
import type { Db, Queryable } from '../db/pool.js';
import { badRequest, notFound, conflict } from '../errors.js';

/** Canonical form of an inbound address: digits only for numbers (a leading + or 00 dropped), else the name as given. */
export function canonicalAddress(value: string): string {
  const trimmed = value.trim();
  if (/^\+?[0-9 ()./-]+$/.test(trimmed)) {
    return trimmed.replace(/\D/g, '').replace(/^00/, '');
  }
  return trimmed;
}

export interface NumberAssignment {
  id: number;
  account_id: number;
  value: string;
  channels: string[];
}

export async function assignNumber(db: Db, input: { account_id: number; value: string; channels: string[] }): Promise<NumberAssignment> {
  const account = await db.query('SELECT 1 FROM accounts WHERE id = $1', [input.account_id]);
  if (!account.rowCount) {
    throw notFound(`account ${input.account_id} not found`);
  }
  const value = canonicalAddress(input.value);
  if (value === '') {
    // "   ", "()", "-", "00": nothing left to match an inbound message's recipient by.
    throw badRequest(`value: "${input.value}" holds no digits or name`, 'VALIDATION', { field: 'value' });
  }
  const { rows } = await db.query<NumberAssignment>(
    `INSERT INTO number_assignments (account_id, value, channels) VALUES ($1, $2, $3)
     ON CONFLICT (value) DO UPDATE SET channels = EXCLUDED.channels WHERE number_assignments.account_id = EXCLUDED.account_id
     RETURNING id, account_id, value, channels`,
    [input.account_id, value, input.channels],
  );
  if (!rows[0]) {
    throw conflict(`${value} is assigned to another account`);
  }
  return rows[0];
}

export async function ownerOfAddress(db: Queryable, address: string, family: string): Promise<number | null> {
  const { rows } = await db.query<{ account_id: number }>(
    'SELECT account_id FROM number_assignments WHERE value = $1 AND $2 = ANY(channels)',
    [canonicalAddress(address), family],
  );
  return rows[0]?.account_id ?? null;
}
