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

/** The last sender `attemptSender` was given, and its stored form. */
let lastSender = { given: '', stored: '' };

/**
 * A step's sender as the attempt's row stores it (`attempts.sender`): canonical, as ingestInbound
 * makes an inbound message's recipient, so that the reply rule (D5, engine/inbound.ts) finds the
 * attempt by equality through the `attempts_reply` index. A WhatsApp or Viber step names its
 * sender as free text: one written `+420 777 123 456` is stored `420777123456`, which is what a
 * reply to it names. Names (`Shop`) and SMS senders (digits without + or a name, channels/sms.ts)
 * are stored as written, trimmed. The carrier and the route are given the sender as written.
 * Called per attempt on the send path: the last sender given is remembered, and a run's recipients
 * of one message share theirs, so the pattern runs about once per message.
 */
export function attemptSender(sender: string): string {
  if (sender !== lastSender.given) {
    lastSender = { given: sender, stored: canonicalAddress(sender) };
  }
  return lastSender.stored;
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
