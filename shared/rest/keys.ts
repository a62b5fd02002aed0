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
import { generateApiKey, hashApiKey, invalidateKeyCache, invalidateKeyHash, KEY_SCOPES, type ApiKeyRecord, type KeyScope } from '../domain/keys.js';
import { badRequest, forbidden, notFound } from '../errors.js';
import { checkNote, checkWebhookSecret, hasField, optionalUrl, requireObject } from './input.js';
import type { SecretBox } from '../secrets/sealed.js';
import { WEBHOOK_SECRET, rowSecretAssignment } from '../secrets/row-secrets.js';

export type Currency = 'CZK' | 'EUR';

export interface RestKeyOptions {
  /** D4: private and loopback callback hosts are refused unless the operator allows them. */
  allowPrivateCallbacks: boolean;
}

type KeyRef = Pick<ApiKeyRecord, 'id' | 'accountId' | 'isPrimary' | 'accountCurrency'>;

export const UPDATE_FIELDS = ['default_callback_url', 'note', 'webhook_secret'] as const;
export const ADD_FIELDS = ['note', 'shared', 'currency', 'default_callback_url'] as const;
export const CHANGE_FIELDS = ['id', 'apikey', 'disable', 'scope'] as const;

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

/** The calling key's own settings; its webhook secret is stored sealed with `box`. */
export async function updateKeySettings(db: Queryable, box: SecretBox, key: Pick<ApiKeyRecord, 'id'>, settings: KeySettings): Promise<void> {
  const sets: string[] = [];
  const values: unknown[] = [key.id];
  for (const column of UPDATE_FIELDS) {
    const value = settings[column];
    if (column === 'webhook_secret') {
      if (value !== undefined) {
        const secret = rowSecretAssignment(box, WEBHOOK_SECRET, key.id, value, values.length + 1);
        values.push(...secret.values);
        sets.push(secret.sql);
      }
    } else if (value !== undefined) {
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
  scope: KeyScope;
  created_at: string;
}

export async function listSubKeys(db: Queryable, key: KeyRef): Promise<SubKeyListing[]> {
  requirePrimary(key);
  const { rows } = await db.query<Omit<SubKeyListing, 'created_at'> & { created_at: Date }>(
    `SELECT id, key_prefix, note, shared, currency, default_callback_url, disabled, scope, created_at
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
    scope: r.scope,
    created_at: r.created_at.toISOString(),
  }));
}

/** Which sub-key `POST /v1/apikey/change` names: by its id, or by the key itself (the origin's body). */
export type SubKeyRef = { id: number } | { hash: Buffer };

export interface SubKeyChange {
  key: SubKeyRef;
  disable?: boolean;
  scope?: KeyScope;
}

/**
 * Check the body of `POST /v1/apikey/change`: `{id, disable: 1|0}` (D6), or the origin's
 * `{apikey, scope?, disable?}` (the sub-key itself instead of its id). Either names one sub-key and
 * changes at least one of `disable` (1 or true revokes, 0 or false restores) and `scope`.
 */
export function parseSubKeyChange(body: unknown): SubKeyChange {
  const input = requireObject(body, CHANGE_FIELDS);
  let key: SubKeyRef;
  if (hasField(input, 'apikey')) {
    if (hasField(input, 'id')) {
      throw badRequest('id: give either id or apikey, not both');
    }
    if (typeof input.apikey !== 'string' || input.apikey.length === 0 || input.apikey.length > 200) {
      throw badRequest('apikey: must be the sub-key (a string as returned by apikey/add)');
    }
    key = { hash: hashApiKey(input.apikey) };
  } else {
    if (!hasField(input, 'id')) {
      throw badRequest('id: is required (the sub-key id from apikey/add or apikey/list), or give apikey: the sub-key itself');
    }
    const rawId = input.id;
    if (typeof rawId === 'number' && Number.isSafeInteger(rawId) && rawId > 0) {
      key = { id: rawId };
    } else if (typeof rawId === 'string' && /^[1-9]\d{0,14}$/.test(rawId)) {
      key = { id: Number(rawId) };
    } else {
      throw badRequest('id: must be a positive integer');
    }
  }
  const out: SubKeyChange = { key };
  if (hasField(input, 'scope')) {
    if (!(KEY_SCOPES as readonly unknown[]).includes(input.scope)) {
      throw badRequest(`scope: must be one of ${KEY_SCOPES.join(', ')}`);
    }
    out.scope = input.scope as KeyScope;
  }
  if (hasField(input, 'disable')) {
    const disable = input.disable;
    if (disable !== 1 && disable !== 0 && disable !== true && disable !== false) {
      throw badRequest('disable: must be 1 or 0');
    }
    out.disable = disable === 1 || disable === true;
  } else if (out.scope === undefined) {
    throw badRequest('disable: is required (1 revokes, 0 restores) unless scope is given');
  }
  return out;
}

/**
 * Revoke, restore or change the scope of one of the account's sub-keys; any other key (the
 * primary, another account's, an unknown one) is 404.
 */
export async function changeSubKey(db: Queryable, key: KeyRef, change: SubKeyChange): Promise<{ id: number; disabled: boolean; scope: KeyScope }> {
  requirePrimary(key);
  const byId = 'id' in change.key;
  const { rows } = await db.query<{ id: number; disabled: boolean; scope: KeyScope; key_hash: Buffer }>(
    `UPDATE api_keys SET disabled = COALESCE($3, disabled), scope = COALESCE($4, scope)
      WHERE ${byId ? 'id = $1' : 'key_hash = $1'} AND account_id = $2 AND NOT is_primary
      RETURNING id, disabled, scope, key_hash`,
    ['id' in change.key ? change.key.id : change.key.hash, key.accountId, change.disable ?? null, change.scope ?? null],
  );
  const row = rows[0];
  if (!row) {
    throw notFound('id' in change.key ? `sub-key ${change.key.id} not found` : 'apikey: not a sub-key of this account');
  }
  // Both directions at once: a revoked key's record and a restored key's cached refusal.
  invalidateKeyCache(row.id);
  invalidateKeyHash(row.key_hash);
  return { id: row.id, disabled: row.disabled, scope: row.scope };
}
