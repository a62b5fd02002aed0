/**
 * API keys: 192 random bits, shown once, stored as SHA-256 and found by that hash (D1). The hash
 * lookup is an index probe; the final comparison is constant-time anyway so that no code path
 * compares key material byte by byte.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { prepared, type Queryable } from '../db/pool.js';

export const KEY_PREFIX_LENGTH = 10;

/**
 * What a key may use (the origin's `scope`): `full` everything, `api` only the sending side
 * (sending API, legacy v1, XML, verification, sandbox), `rest-api` only the REST API.
 */
export const KEY_SCOPES = ['full', 'api', 'rest-api'] as const;
export type KeyScope = (typeof KEY_SCOPES)[number];
/** The two sides a scope separates. */
export type KeyUse = 'send' | 'rest';

export function keyAllows(scope: KeyScope, use: KeyUse): boolean {
  return scope === 'full' || (scope === 'api' ? use === 'send' : use === 'rest');
}

export interface ApiKeyRecord {
  id: number;
  accountId: number;
  isPrimary: boolean;
  shared: boolean;
  currency: 'CZK' | 'EUR';
  disabled: boolean;
  note: string;
  defaultCallbackUrl: string | null;
  keyPrefix: string;
  accountCountry: string;
  accountCurrency: 'CZK' | 'EUR';
  scope: KeyScope;
}

export function generateApiKey(): { key: string; hash: Buffer; prefix: string } {
  const key = `sb_${randomBytes(24).toString('base64url')}`;
  return { key, hash: hashApiKey(key), prefix: key.slice(0, KEY_PREFIX_LENGTH) };
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

interface KeyRow {
  id: number;
  account_id: number;
  is_primary: boolean;
  shared: boolean;
  currency: 'CZK' | 'EUR';
  disabled: boolean;
  note: string;
  default_callback_url: string | null;
  key_prefix: string;
  key_hash: Buffer;
  account_country: string;
  account_currency: 'CZK' | 'EUR';
  scope: KeyScope;
}

/**
 * Keys seen in the last second. A disabled key is refused everywhere within this window (D6 asks
 * for "the next request"; issue 6 allows at most a second), and a hot sender does not pay one
 * database round trip per call.
 */
const CACHE_MS = 1000;
const cache = new Map<string, { at: number; record: ApiKeyRecord | null }>();

export function clearKeyCache(): void {
  cache.clear();
}

/** Forget a key at once in this process (disable, settings change); other processes follow within CACHE_MS. */
export function invalidateKeyCache(keyId: number): void {
  for (const [hash, entry] of cache) {
    if (entry.record?.id === keyId) {
      cache.delete(hash);
    }
  }
}

/**
 * Forget whatever this process cached for one key hash, the refusal of a disabled key included
 * (`invalidateKeyCache` finds entries by key id, which a cached refusal does not carry): restoring
 * a revoked key then works from the next request too.
 */
export function invalidateKeyHash(hash: Buffer): void {
  cache.delete(hash.toString('base64'));
}

/** The key's record, or null when it is unknown or disabled (the caller answers in its API's form). */
export async function authenticateKey(db: Queryable, presented: string): Promise<ApiKeyRecord | null> {
  if (!presented || presented.length > 200) {
    return null;
  }
  const hash = hashApiKey(presented);
  const cacheKey = hash.toString('base64');
  const now = Date.now();
  const hit = cache.get(cacheKey);
  if (hit && now - hit.at < CACHE_MS) {
    return hit.record;
  }
  const { rows } = await db.query<KeyRow>(prepared(
    `SELECT k.id, k.account_id, k.is_primary, k.shared, k.currency, k.disabled, k.note,
            k.default_callback_url, k.key_prefix, k.key_hash, k.scope,
            a.country AS account_country, a.currency AS account_currency
       FROM api_keys k JOIN accounts a ON a.id = k.account_id
      WHERE k.key_hash = $1`,
    [hash]),
  );
  const row = rows[0];
  const record = row && timingSafeEqual(row.key_hash, hash) && !row.disabled ? toRecord(row) : null;
  if (cache.size > 50_000) {
    cache.clear();
  }
  cache.set(cacheKey, { at: now, record });
  return record;
}

function toRecord(row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    accountId: row.account_id,
    isPrimary: row.is_primary,
    shared: row.shared,
    currency: row.currency,
    disabled: row.disabled,
    note: row.note,
    defaultCallbackUrl: row.default_callback_url,
    keyPrefix: row.key_prefix,
    accountCountry: row.account_country.trim(),
    accountCurrency: row.account_currency,
    scope: row.scope,
  };
}
