/**
 * Idempotent sends (issue 27), modelled on Stripe's: an `Idempotency-Key` header on a sending call,
 * and an `idempotency_key` field on a message object, each per API key and kept 24 hours.
 *
 * A key is claimed by inserting its row in the transaction that accepts the call, so an accepted
 * call and its key commit together (Redis alone would lose keys with Redis). A second request with
 * the same key blocks on the row's primary key until the first commits, then finds the row: the
 * same request (same fingerprint) gets the first answer again and sends nothing; another request
 * gets 409 (a message object: a rejected entry). A row older than 24 hours is replaced in place
 * when its key is used again; the sweep deletes such rows (`IdempotencyExpiry`).
 *
 * Calls without any key never touch the table: their accept statement is unchanged.
 */
import { createHash } from 'node:crypto';
import type { Db, Queryable } from '../db/pool.js';
import { textArray } from '../db/arrays.js';
import type { Logger } from '../logger.js';
import { PeriodicCleanup } from '../db/periodic-cleanup.js';

export const IDEMPOTENCY_HOURS = 24;
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;
/** 1-255 printable ASCII characters (space included), as Stripe accepts. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

/** What a key was used for: the call (header) or one message object (field). */
export const CALL_KEY = 0;
export const OBJECT_KEY = 1;
export type KeyKind = typeof CALL_KEY | typeof OBJECT_KEY;

/** The header of a call: the key and the fingerprint of what it was used for (endpoint and body bytes). */
export interface CallIdempotency {
  key: string;
  fingerprint: Buffer;
}

/** Why a header value is refused, or null when it is a valid key. */
export function idempotencyKeyProblem(value: string): string | null {
  return IDEMPOTENCY_KEY_PATTERN.test(value) ? null : `Idempotency-Key must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters`;
}

/** A call's fingerprint: its endpoint and its body, byte for byte (the service keeps payloads byte for byte too). */
export function callFingerprint(endpoint: string, body: Buffer): Buffer {
  return createHash('sha256').update(endpoint).update('\n').update(body).digest();
}

/** A message object's fingerprint: the accept mode, the object as parsed, and its payload's exact text. */
export function objectFingerprint(mode: string, object: unknown, rawPayload: string | undefined): Buffer {
  return createHash('sha256').update(mode).update('\n').update(JSON.stringify(object)).update('\n').update(rawPayload ?? '').digest();
}

export interface Claim {
  kind: KeyKind;
  key: string;
  fingerprint: Buffer;
  /** What a request with the same key and fingerprint is answered. */
  response: unknown;
}

const claimId = (kind: KeyKind, key: string): string => `${kind}\u0000${key}`;

/** A claim's conflict rule: a key used within 24 hours stays (nothing returned); an older row is taken over. */
const ON_CLAIM_CONFLICT = `ON CONFLICT (key_id, kind, idem_key) DO UPDATE
        SET fingerprint = EXCLUDED.fingerprint, response = EXCLUDED.response, created_at = now()
      WHERE k.created_at < now() - make_interval(hours => ${IDEMPOTENCY_HOURS})`;

/**
 * A call key's claim as a CTE named `claimed` (one row when claimed, none when the key is taken),
 * for a statement that writes the call's messages only if it returns a row: a call with a header
 * key and no object keys is then still one statement. Parameters: the API key's id, the key, its
 * fingerprint (bytea), the answer (jsonb).
 */
export function callClaimCte(keyId: string, key: string, fingerprint: string, response: string): string {
  return `claimed AS (
       INSERT INTO idempotency_keys AS k (key_id, kind, idem_key, fingerprint, response)
       VALUES (${keyId}, ${CALL_KEY}, ${key}, ${fingerprint}, ${response})
       ${ON_CLAIM_CONFLICT}
       RETURNING 1)`;
}

/**
 * Claim keys in the caller's transaction; returns the ids (`claimId`) of those claimed. A key held
 * by a transaction still open waits for it; one committed less than 24 hours ago is not claimed.
 * Rows are written in (kind, key) order, so requests sharing several keys cannot deadlock.
 */
export async function claimKeys(tx: Queryable, keyId: number, claims: readonly Claim[]): Promise<Set<string>> {
  const sorted = [...claims].sort((a, b) => a.kind - b.kind || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const { rows } = await tx.query<{ kind: KeyKind; idem_key: string }>(
    `INSERT INTO idempotency_keys AS k (key_id, kind, idem_key, fingerprint, response)
     SELECT $1, u.kind, u.idem_key, decode(u.fingerprint, 'hex'), u.response
       FROM unnest($2::smallint[], $3::text[], $4::text[], $5::jsonb[]) WITH ORDINALITY AS u(kind, idem_key, fingerprint, response, n)
      ORDER BY u.n
     ${ON_CLAIM_CONFLICT}
     RETURNING kind, idem_key`,
    [keyId, `{${sorted.map((c) => c.kind).join(',')}}`, textArray(sorted.map((c) => c.key)),
      textArray(sorted.map((c) => c.fingerprint.toString('hex'))), textArray(sorted.map((c) => JSON.stringify(c.response)))],
  );
  return new Set(rows.map((r) => claimId(r.kind, r.idem_key)));
}

export function isClaimed(claimed: Set<string>, kind: KeyKind, key: string): boolean {
  return claimed.has(claimId(kind, key));
}

export interface StoredKey {
  fingerprint: Buffer;
  response: unknown;
}

/** The rows of keys used within the last 24 hours (those a claim did not get). */
export async function storedKeys(db: Queryable, keyId: number, kind: KeyKind, keys: readonly string[]): Promise<Map<string, StoredKey>> {
  const { rows } = await db.query<{ idem_key: string; fingerprint: Buffer; response: unknown }>(
    `SELECT idem_key, fingerprint, response FROM idempotency_keys
      WHERE key_id = $1 AND kind = $2 AND idem_key = ANY($3::text[])
        AND created_at >= now() - make_interval(hours => ${IDEMPOTENCY_HOURS})`,
    [keyId, kind, textArray([...keys])],
  );
  return new Map(rows.map((r) => [r.idem_key, { fingerprint: r.fingerprint, response: r.response }]));
}

/** The final answer of a call whose claim was written with a provisional one. */
export async function setResponse(tx: Queryable, keyId: number, kind: KeyKind, key: string, response: unknown): Promise<void> {
  await tx.query('UPDATE idempotency_keys SET response = $4 WHERE key_id = $1 AND kind = $2 AND idem_key = $3', [keyId, kind, key, JSON.stringify(response)]);
}

/** Gives a key claimed in this transaction back (its call accepted nothing, so it is not kept). */
export async function releaseKey(tx: Queryable, keyId: number, kind: KeyKind, key: string): Promise<void> {
  await tx.query('DELETE FROM idempotency_keys WHERE key_id = $1 AND kind = $2 AND idem_key = $3', [keyId, kind, key]);
}

/** Deletes keys older than 24 hours, a bounded number per statement, every `intervalMs` (in the sweep's process). */
export class IdempotencyExpiry extends PeriodicCleanup {
  constructor(db: Db, logger: Logger, intervalMs = 60_000, batch = 5_000) {
    // $1: rows per statement; the oldest first.
    super(db, logger, 'expiring idempotency keys', `DELETE FROM idempotency_keys WHERE ctid = ANY(ARRAY(
      SELECT ctid FROM idempotency_keys WHERE created_at < now() - make_interval(hours => ${IDEMPOTENCY_HOURS}) ORDER BY created_at LIMIT $1))`,
    intervalMs, batch);
  }
}
