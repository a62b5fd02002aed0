/** Accounts, balances and their settings: the operations behind the admin API and the CLI. */
import { withTx, type Db, type Queryable } from '../db/pool.js';
import { notFound, badRequest } from '../errors.js';
import { generateApiKey, type KeyScope } from './keys.js';
import { unitsLiteral } from './money.js';
import type { SecretBox } from '../secrets/sealed.js';
import { VERIFICATION_SECRET, WEBHOOK_SECRET, rowSecretAssignment } from '../secrets/row-secrets.js';

export type Currency = 'CZK' | 'EUR';

export interface NewAccount {
  name?: string;
  country?: string;
  currency: Currency;
  credit_czk?: number;
  credit_eur?: number;
  default_sender?: string;
}

/** Settings an operator may change (D11). */
export interface AccountSettings {
  name?: string;
  country?: string;
  default_sender?: string | null;
  verification_secret?: string | null;
  verification_attempts?: number;
  verification_expiry_s?: number;
  verification_template?: string;
  verify_account_per_min?: number;
  verify_phone_per_hour?: number;
  verify_phone_cooldown_s?: number;
  reply_window_days?: number;
  /** Opt-out (issue 27): refuse promotional sends to suppressed numbers; keyword lists (null: the defaults). */
  opt_out_promotional?: boolean;
  opt_out_keywords?: string[] | null;
  opt_in_keywords?: string[] | null;
}

export interface AccountView {
  account_id: number;
  name: string;
  country: string;
  currency: Currency;
  credit_czk: number;
  credit_eur: number;
  default_sender: string | null;
  verification_secret_set: boolean;
  verification_attempts: number;
  verification_expiry_s: number;
  verification_template: string;
  verify_account_per_min: number;
  verify_phone_per_hour: number;
  verify_phone_cooldown_s: number;
  reply_window_days: number;
  opt_out_promotional: boolean;
  opt_out_keywords: string[] | null;
  opt_in_keywords: string[] | null;
  suppressions: number;
  created_at: string;
}

export async function createAccount(db: Db, input: NewAccount): Promise<{ account_id: number; api_key: string }> {
  const key = generateApiKey();
  return withTx(db, async (tx) => {
    const { rows } = await tx.query<{ id: number }>(
      `INSERT INTO accounts (name, country, currency, credit_czk, credit_eur, default_sender)
       VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
      [input.name ?? '', (input.country ?? 'CZ').toUpperCase(), input.currency, input.credit_czk ?? 0,
        input.credit_eur ?? 0, input.default_sender ?? null],
    );
    const accountId = rows[0]!.id;
    await tx.query(
      `INSERT INTO api_keys (account_id, is_primary, key_hash, key_prefix, shared, currency, note)
       VALUES ($1, true, $2, $3, true, $4, 'primary')`,
      [accountId, key.hash, key.prefix, input.currency],
    );
    return { account_id: accountId, api_key: key.key };
  });
}

interface AccountRow {
  id: number;
  name: string;
  country: string;
  currency: Currency;
  credit_czk: number;
  credit_eur: number;
  default_sender: string | null;
  verification_secret: string | null;
  verification_secret_sealed: Buffer | null;
  verification_attempts: number;
  verification_expiry_s: number;
  verification_template: string;
  verify_account_per_min: number;
  verify_phone_per_hour: number;
  verify_phone_cooldown_s: number;
  reply_window_days: number;
  opt_out_promotional: boolean;
  opt_out_keywords: string[] | null;
  opt_in_keywords: string[] | null;
  suppressions: number;
  created_at: Date;
}

export async function getAccount(db: Queryable, id: number): Promise<AccountView> {
  const { rows } = await db.query<AccountRow>('SELECT * FROM accounts WHERE id = $1', [id]);
  const row = rows[0];
  if (!row) {
    throw notFound(`account ${id} not found`);
  }
  return presentAccount(row);
}

function presentAccount(row: AccountRow): AccountView {
  return {
    account_id: row.id,
    name: row.name,
    country: row.country.trim(),
    currency: row.currency,
    credit_czk: row.credit_czk,
    credit_eur: row.credit_eur,
    default_sender: row.default_sender,
    verification_secret_set: row.verification_secret_sealed !== null || row.verification_secret !== null,
    verification_attempts: row.verification_attempts,
    verification_expiry_s: row.verification_expiry_s,
    verification_template: row.verification_template,
    verify_account_per_min: row.verify_account_per_min,
    verify_phone_per_hour: row.verify_phone_per_hour,
    verify_phone_cooldown_s: row.verify_phone_cooldown_s,
    reply_window_days: row.reply_window_days,
    opt_out_promotional: row.opt_out_promotional,
    opt_out_keywords: row.opt_out_keywords,
    opt_in_keywords: row.opt_in_keywords,
    suppressions: row.suppressions,
    created_at: row.created_at.toISOString(),
  };
}

const SETTING_COLUMNS: ReadonlyArray<keyof AccountSettings> = [
  'name', 'country', 'default_sender', 'verification_secret', 'verification_attempts', 'verification_expiry_s',
  'verification_template', 'verify_account_per_min', 'verify_phone_per_hour', 'verify_phone_cooldown_s',
  'reply_window_days', 'opt_out_promotional', 'opt_out_keywords', 'opt_in_keywords',
];

/** Change an account's settings (validated by the caller); its verification secret is stored sealed with `box`. */
export async function updateAccount(db: Db, box: SecretBox, id: number, settings: AccountSettings): Promise<AccountView> {
  const sets: string[] = [];
  const values: unknown[] = [];
  for (const column of SETTING_COLUMNS) {
    const value = settings[column];
    if (column === 'verification_secret') {
      if (value !== undefined) {
        const secret = rowSecretAssignment(box, VERIFICATION_SECRET, id, value as string | null, values.length + 1);
        values.push(...secret.values);
        sets.push(secret.sql);
      }
    } else if (value !== undefined) {
      values.push(column === 'country' && typeof value === 'string' ? value.toUpperCase() : value);
      sets.push(`${column} = $${values.length}`);
    }
  }
  if (sets.length === 0) {
    return getAccount(db, id);
  }
  values.push(id);
  const { rowCount } = await db.query(`UPDATE accounts SET ${sets.join(', ')} WHERE id = $${values.length}`, values);
  if (!rowCount) {
    throw notFound(`account ${id} not found`);
  }
  return getAccount(db, id);
}

/** Balances are numeric(18,4): every balance stays strictly within ±MAX_BALANCE. */
export const MAX_BALANCE = 1e14;
const balanceFits = (column: string, param: string) => `abs(round(${column} + ${param}, 4)) < ${MAX_BALANCE}`;
const outOfRange = (field: string) =>
  badRequest(`${field}: the resulting balance would be out of range (it must stay within ±${MAX_BALANCE.toExponential()})`, 'VALIDATION', { field });

/**
 * Add (or with negative amounts take) credit; an operator correction may leave a balance below
 * zero. A change that would take a balance beyond what its column holds changes nothing (400).
 */
export async function addAccountCredit(db: Db, id: number, czk: number, eur: number): Promise<{ credit_czk: number; credit_eur: number }> {
  const { rows } = await db.query<{ credit_czk: number; credit_eur: number }>(
    `UPDATE accounts SET credit_czk = credit_czk + $2, credit_eur = credit_eur + $3
      WHERE id = $1 AND ${balanceFits('credit_czk', '$2')} AND ${balanceFits('credit_eur', '$3')}
     RETURNING credit_czk, credit_eur`,
    [id, czk, eur],
  );
  const row = rows[0];
  if (!row) {
    const { rows: found } = await db.query<{ czk_fits: boolean }>(
      `SELECT ${balanceFits('credit_czk', '$2')} AS czk_fits FROM accounts WHERE id = $1`, [id, czk]);
    if (!found[0]) {
      throw notFound(`account ${id} not found`);
    }
    throw outOfRange(found[0].czk_fits ? 'eur' : 'czk');
  }
  return row;
}

/** Top up an own-credit sub-key (its balance is in its own currency). */
export async function addKeyCredit(db: Db, keyId: number, amount: number): Promise<{ id: number; currency: Currency; balance: number }> {
  const { rows } = await db.query<{ id: number; currency: Currency; balance: number; shared: boolean; is_primary: boolean }>(
    `UPDATE api_keys SET balance = balance + $2 WHERE id = $1 AND NOT shared AND NOT is_primary AND ${balanceFits('balance', '$2')}
     RETURNING id, currency, balance, shared, is_primary`,
    [keyId, amount],
  );
  const row = rows[0];
  if (!row) {
    const { rows: found } = await db.query<{ shared: boolean; is_primary: boolean }>('SELECT shared, is_primary FROM api_keys WHERE id = $1', [keyId]);
    if (!found[0]) {
      throw notFound(`key ${keyId} not found`);
    }
    throw found[0].shared || found[0].is_primary ? badRequest('key shares its account balance; top up the account instead') : outOfRange('amount');
  }
  return { id: row.id, currency: row.currency, balance: row.balance };
}

export interface KeyListing {
  id: number;
  account_id: number;
  is_primary: boolean;
  key_prefix: string;
  note: string;
  shared: boolean;
  currency: Currency;
  balance: number;
  default_callback_url: string | null;
  disabled: boolean;
  /** What the key may use (migration 020): `full`, `api` or `rest-api`. */
  scope: KeyScope;
  created_at: string;
}

export async function listKeys(db: Queryable, accountId?: number): Promise<KeyListing[]> {
  const { rows } = await db.query<Omit<KeyListing, 'created_at'> & { created_at: Date }>(
    `SELECT id, account_id, is_primary, key_prefix, note, shared, currency, balance, default_callback_url, disabled, scope, created_at
       FROM api_keys ${accountId === undefined ? '' : 'WHERE account_id = $1'} ORDER BY id`,
    accountId === undefined ? [] : [accountId],
  );
  return rows.map((r) => ({ ...r, created_at: r.created_at.toISOString() }));
}

export interface KeySettings {
  note?: string;
  default_callback_url?: string | null;
  webhook_secret?: string | null;
  disabled?: boolean;
}

/** Change a key's settings (validated by the caller); returns the key's listing. Its webhook secret is stored sealed with `box`. */
export async function updateKeySettings(db: Db, box: SecretBox, keyId: number, settings: KeySettings): Promise<KeyListing> {
  const sets: string[] = [];
  const values: unknown[] = [];
  for (const column of ['note', 'default_callback_url', 'disabled'] as const) {
    if (settings[column] !== undefined) {
      values.push(settings[column]);
      sets.push(`${column} = $${values.length}`);
    }
  }
  if (settings.webhook_secret !== undefined) {
    const secret = rowSecretAssignment(box, WEBHOOK_SECRET, keyId, settings.webhook_secret, values.length + 1);
    values.push(...secret.values);
    sets.push(secret.sql);
  }
  values.push(keyId);
  const { rowCount } = await db.query(`UPDATE api_keys SET ${sets.join(', ')} WHERE id = $${values.length}`, values);
  if (!rowCount) {
    throw notFound(`key ${keyId} not found`);
  }
  const { rows } = await db.query<{ account_id: number }>('SELECT account_id FROM api_keys WHERE id = $1', [keyId]);
  return (await listKeys(db, rows[0]!.account_id)).find((k) => k.id === keyId)!;
}

/** SQLSTATE of a debit that the payer's balance cannot cover (migration 013, `change_credit`). */
export const CREDIT_NOT_COVERED = 'SB001';

/**
 * The statement that changes a payer's balance by `deltaUnits` ten-thousandths (negative: a debit,
 * which fails with `CREDIT_NOT_COVERED` and changes nothing when the balance cannot cover it).
 * Written with literals, not parameters, so that it can travel with a COMMIT (`withTxEnding`):
 * every value is checked to be what it claims.
 */
export function changeCreditStatement(payerKind: 'account' | 'key', payerId: number, currency: Currency, deltaUnits: number): string {
  if (!Number.isSafeInteger(payerId) || payerId <= 0) {
    throw new Error(`changeCreditStatement: payer id ${payerId} is not a row id`);
  }
  if ((payerKind !== 'account' && payerKind !== 'key') || (currency !== 'CZK' && currency !== 'EUR')) {
    throw new Error(`changeCreditStatement: unknown payer ${payerKind} or currency ${currency}`);
  }
  return `SELECT change_credit('${payerKind}', ${payerId}, '${currency}', ${unitsLiteral(deltaUnits)})`;
}
