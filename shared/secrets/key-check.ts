/**
 * The start's check that CREDENTIALS_KEY is the key every stored secret was sealed with
 * (sealed.ts, row-secrets.ts, service-secrets.ts).
 */
import { timingSafeEqual } from 'node:crypto';
import type { Queryable } from '../db/pool.js';
import { SEALED_ROW_SECRETS_COUNT } from './row-secrets.js';
import type { SecretBox } from './sealed.js';
import { KEY_CHECK_NAME as CHECK_NAME } from './service-secrets.js';

/**
 * Checks at start that CREDENTIALS_KEY is the key the stored secrets were sealed with. Returns
 * an error text naming the variable when it is not and sealed rows exist; with nothing sealed yet
 * the stored check is simply replaced.
 */
export async function checkCredentialsKey(db: Queryable, box: SecretBox): Promise<string | null> {
  const mine = box.fingerprint();
  const { rows } = await db.query<{ secret: Buffer }>('SELECT secret FROM service_secrets WHERE name = $1', [CHECK_NAME]);
  const stored = rows[0]?.secret;
  if (stored && stored.length === mine.length && timingSafeEqual(stored, mine)) {
    return null;
  }
  if (stored) {
    const { rows: sealed } = await db.query<{ n: number }>(
      `SELECT (SELECT count(*) FROM carrier_connections WHERE secrets IS NOT NULL)
            + (SELECT count(*) FROM carrier_senders WHERE credentials IS NOT NULL)
            + (SELECT count(*) FROM service_secrets WHERE sealed)
            + ${SEALED_ROW_SECRETS_COUNT} AS n`);
    if (Number(sealed[0]?.n ?? 0) > 0) {
      return 'CREDENTIALS_KEY is not the key the stored secrets were sealed with (carrier credentials, accounts\' '
        + 'verification secrets, keys\' webhook secrets, the server\'s master secrets); start with that key';
    }
  }
  await db.query(
    `INSERT INTO service_secrets (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET secret = EXCLUDED.secret`,
    [CHECK_NAME, mine],
  );
  return null;
}
