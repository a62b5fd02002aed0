/**
 * Key settings and sub-keys through the REST API (D4, D6).
 *
 *  - `updateKeySettings`: the calling key's own `default_callback_url`, `note`, `webhook_secret`.
 *    `null` or `""` clears the URL and the secret (and empties the note).
 *  - `addSubKey`, `listSubKeys`, `changeSubKey`: the primary key only (403 for a sub-key); a sub-key
 *    is shown once when created, listed without its secret material, and revoked or restored.
 *
 * Every change drops the key from this process's authentication cache at once, so a revoked key
 * is refused from the next request on (other processes follow within the cache's second).
 */
import type { Queryable } from '../db/pool.js';
import { generateApiKey, invalidateKeyCache, invalidateKeyHash, type ApiKeyRecord } from '../domain/keys.js';
import { badRequest, forbidden, notFound } from '../errors.js';
import { checkNote, checkWebhookSecret, hasField, optionalUrl, requireObject } from './input.js';

export type Currency = 'CZK' | 'EUR';

export interface RestKeyOptions {
  /** D4: private and loopback callback hosts are refused unless the operator allows them. */
  allowPrivateCallbacks: boolean;
}

type KeyRef = Pick<ApiKeyRecord, 'id' | 'accountId' | 'isPrimary' | 'accountCurrency'>;

export const UPDATE_FIELDS = ['default_callback_url', 'note', 'webhook_secret'] as const;
export const ADD_FIELDS = ['note', 'shared', 'currency', 'default_callback_url'] as const;
export const CHANGE_FIELDS = ['id', 'disable'] as const;

export interface KeySettings {
  default_callback_url?: string | null;
  note?: string;
  webhook_secret?: string | null;
}

/** Check the body of `POST /v1/apikey/update`. At least one field must be given. */
export function parseKeySettings(body: unknown, opts: RestKeyOptions): KeySettings {
  const input = requireObject(body, UPDATE_FIELDS);
  const out: KeySettings = {};
  if (hasField(input, 'default_callback_url')) {
    out.default_callback_url = optionalUrl('default_callback_url', input.default_callback_url, opts.allowPrivateCallbacks);
  }
  if (hasField(input, 'note')) {
    out.note = checkNote(input.note);
  }
  if (hasField(input, 'webhook_secret')) {
    out.webhook_secret = checkWebhookSecret(input.webhook_secret);
  }
  if (Object.keys(out).length === 0) {
    throw badRequest(`body: give at least one of ${UPDATE_FIELDS.join(', ')}`);
  }
  return out;
}

export async function updateKeySettings(db: Queryable, key: Pick<ApiKeyRecord, 'id'>, settings: KeySettings): Promise<void> {
  const sets: string[] = [];
  const values: unknown[] = [key.id];
  for (const column of UPDATE_FIELDS) {
    const value = settings[column];
    if (value !== undefined) {
      values.push(value);
      sets.push(`${column} = $${values.length}`);
    }
  }
  if (sets.length === 0) {
    return;
  }
  const { rowCount } = await db.query(`UPDATE api_keys SET ${sets.join(', ')} WHERE id = $1 AND NOT disabled`, values);
  invalidateKeyCache(key.id);
  if (!rowCount) {
    throw notFound('API key not found');
  }
}

export interface NewSubKey {
  note: string;
  shared: boolean;
  currency: Currency;
  default_callback_url: string | null;
}

/** D6: only the primary key manages sub-keys; a sub-key gets 403. */
export function requirePrimary(key: KeyRef): void {
  if (!key.isPrimary) {
    throw forbidden('Only the primary API key of the account can manage sub-keys');
  }
}

/** Check the body of `POST /v1/apikey/add`; a shared sub-key must use the account's currency (D6). */
export function parseNewSubKey(body: unknown, key: KeyRef, opts: RestKeyOptions): NewSubKey {
  const input = requireObject(body, ADD_FIELDS);
  if (!hasField(input, 'shared')) {
    throw badRequest('shared: is required (true: the sub-key spends the account credit; false: its own balance)');
  }
  if (typeof input.shared !== 'boolean') {
    throw badRequest('shared: must be a boolean');
  }
  if (!hasField(input, 'currency')) {
    throw badRequest('currency: is required (CZK or EUR)');
  }
  if (input.currency !== 'CZK' && input.currency !== 'EUR') {
    throw badRequest('currency: must be one of CZK, EUR');
  }
  if (input.shared && input.currency !== key.accountCurrency) {
    throw badRequest(`currency: a shared sub-key must use the account's currency (${key.accountCurrency})`);
  }
  return {
    note: hasField(input, 'note') ? checkNote(input.note) : '',
    shared: input.shared,
    currency: input.currency,
    default_callback_url: hasField(input, 'default_callback_url')
      ? optionalUrl('default_callback_url', input.default_callback_url, opts.allowPrivateCallbacks)
      : null,
  };
}

export async function addSubKey(db: Queryable, key: KeyRef, input: NewSubKey): Promise<{ apikey: string; id: number }> {
  requirePrimary(key);
  const generated = generateApiKey();
  const { rows } = await db.query<{ id: number }>(
    `INSERT INTO api_keys (account_id, is_primary, key_hash, key_prefix, note, default_callback_url, shared, currency)
     VALUES ($1, false, $2, $3, $4, $5, $6, $7) RETURNING id`,
    [key.accountId, generated.hash, generated.prefix, input.note, input.default_callback_url, input.shared, input.currency],
  );
  return { apikey: generated.key, id: rows[0]!.id };
}

export interface SubKeyListing {
  id: number;
  key_prefix: string;
  note: string;
  shared: boolean;
  currency: Currency;
  default_callback_url: string | null;
  disabled: boolean;
  created_at: string;
}

export async function listSubKeys(db: Queryable, key: KeyRef): Promise<SubKeyListing[]> {
  requirePrimary(key);
  const { rows } = await db.query<Omit<SubKeyListing, 'created_at'> & { created_at: Date }>(
    `SELECT id, key_prefix, note, shared, currency, default_callback_url, disabled, created_at
       FROM api_keys WHERE account_id = $1 AND NOT is_primary ORDER BY id`,
    [key.accountId],
  );
  return rows.map((r) => ({
    id: r.id,
    key_prefix: r.key_prefix,
    note: r.note,
    shared: r.shared,
    currency: r.currency,
    default_callback_url: r.default_callback_url,
    disabled: r.disabled,
    created_at: r.created_at.toISOString(),
  }));
}

/** Check the body of `POST /v1/apikey/change`: `{id, disable: 1|0}` (true/false also accepted). */
export function parseSubKeyChange(body: unknown): { id: number; disable: boolean } {
  const input = requireObject(body, CHANGE_FIELDS);
  const rawId = input.id;
  let id: number | null = null;
  if (typeof rawId === 'number' && Number.isSafeInteger(rawId) && rawId > 0) {
    id = rawId;
  } else if (typeof rawId === 'string' && /^[1-9]\d{0,14}$/.test(rawId)) {
    id = Number(rawId);
  }
  if (!hasField(input, 'id')) {
    throw badRequest('id: is required (the sub-key id from apikey/add or apikey/list)');
  }
  if (id === null) {
    throw badRequest('id: must be a positive integer');
  }
  const disable = input.disable;
  if (!hasField(input, 'disable')) {
    throw badRequest('disable: is required (1 revokes, 0 restores)');
  }
  if (disable !== 1 && disable !== 0 && disable !== true && disable !== false) {
    throw badRequest('disable: must be 1 or 0');
  }
  return { id, disable: disable === 1 || disable === true };
}

/** Revoke or restore one of the account's sub-keys; any other id (the primary, another account's) is 404. */
export async function changeSubKey(db: Queryable, key: KeyRef, change: { id: number; disable: boolean }): Promise<{ id: number; disabled: boolean }> {
  requirePrimary(key);
  const { rows } = await db.query<{ id: number; disabled: boolean; key_hash: Buffer }>(
    `UPDATE api_keys SET disabled = $3 WHERE id = $1 AND account_id = $2 AND NOT is_primary RETURNING id, disabled, key_hash`,
    [change.id, key.accountId, change.disable],
  );
  const row = rows[0];
  if (!row) {
    throw notFound(`sub-key ${change.id} not found`);
  }
  // Both directions at once: a revoked key's record and a restored key's cached refusal.
  invalidateKeyCache(row.id);
  invalidateKeyHash(row.key_hash);
  return { id: row.id, disabled: row.disabled };
}
