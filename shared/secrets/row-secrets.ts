/**
 * Secrets that belong to a row of ours, at rest (D12; migration 032): an account's verification
 * secret (the HMAC key of its proofs) and an API key's webhook secret (its Standard Webhooks
 * signing key). Both are sealed under CREDENTIALS_KEY like carrier credentials, each bound to its
 * table, column and row id, so a copy of the database neither forges a proof nor signs a webhook,
 * and sealed bytes copied to another row do not open there.
 *
 * A row written before migration 032 (or by an older process left running) still has its clear
 * column: that value is read, and sealed by the next start (`sealLegacyRowSecrets`, run by
 * services/core.ts).
 */
import type { Queryable } from '../db/pool.js';
import type { SecretBox } from './sealed.js';

/** Where one kind of row secret lives. */
export interface RowSecret {
  readonly table: 'accounts' | 'api_keys';
  /** The clear column of rows written before migration 032. */
  readonly clear: 'verification_secret' | 'webhook_secret';
  readonly sealed: 'verification_secret_sealed' | 'webhook_secret_sealed';
}

export const VERIFICATION_SECRET: RowSecret = { table: 'accounts', clear: 'verification_secret', sealed: 'verification_secret_sealed' };
export const WEBHOOK_SECRET: RowSecret = { table: 'api_keys', clear: 'webhook_secret', sealed: 'webhook_secret_sealed' };
const ROW_SECRETS = [VERIFICATION_SECRET, WEBHOOK_SECRET];

const boundTo = (which: RowSecret, rowId: number) => `${which.table}.${which.clear}:${rowId}`;

/** The sealed form of a row's secret (null clears it). */
export function sealRowSecret(box: SecretBox, which: RowSecret, rowId: number, value: string | null): Buffer | null {
  return value === null ? null : box.seal({ secret: value }, boundTo(which, rowId));
}

/**
 * The secret of a row as read: a clear value first (every write of this version empties the
 * clear column, so one there was written later, by an older version), else its sealed form
 * opened, else null. Throws SealedError when the sealed bytes do not open.
 */
export function openRowSecret(box: SecretBox, which: RowSecret, rowId: number, sealed: Buffer | null, clear: string | null): string | null {
  if (clear !== null || sealed === null) return clear;
  return box.open(sealed, boundTo(which, rowId)).secret ?? null;
}

/**
 * The SET clause and its values that store `value` as the row's secret: the sealed form, and the
 * clear column emptied. `nextParam` is the number of the first parameter it may use.
 */
export function rowSecretAssignment(box: SecretBox, which: RowSecret, rowId: number, value: string | null, nextParam: number): { sql: string; values: unknown[] } {
  return { sql: `${which.sealed} = $${nextParam}, ${which.clear} = NULL`, values: [sealRowSecret(box, which, rowId, value)] };
}

/** Seals every row secret still in its clear column; returns how many rows it sealed. */
export async function sealLegacyRowSecrets(db: Queryable, box: SecretBox): Promise<number> {
  let sealed = 0;
  for (const which of ROW_SECRETS) {
    const { rows } = await db.query<{ id: number; clear: string }>(
      `SELECT id, ${which.clear} AS clear FROM ${which.table} WHERE ${which.clear} IS NOT NULL`);
    for (const row of rows) {
      // $1 the row, $2 its sealed secret, $3 the clear value read (a row changed meanwhile is left
      // for the next start).
      const { rowCount } = await db.query(
        `UPDATE ${which.table} SET ${which.sealed} = $2, ${which.clear} = NULL WHERE id = $1 AND ${which.clear} = $3`,
        [row.id, sealRowSecret(box, which, Number(row.id), row.clear), row.clear]);
      sealed += rowCount ?? 0;
    }
  }
  return sealed;
}

/** SQL counting the rows whose secrets are sealed (for the start's check of CREDENTIALS_KEY). */
export const SEALED_ROW_SECRETS_COUNT = ROW_SECRETS
  .map((w) => `(SELECT count(*) FROM ${w.table} WHERE ${w.sealed} IS NOT NULL)`).join(' + ');
