/**
 * Server-side master secrets (32 random bytes each, table `service_secrets`, migration 003): the
 * first process that needs one generates it (INSERT … ON CONFLICT DO NOTHING, so concurrent
 * processes agree on one value) and every process of the deployment reads the same row. Each is
 * stored sealed under CREDENTIALS_KEY (migration 032: `sealed`), so a copy of the database does not
 * hold them; one stored before that is sealed by the next start (`sealLegacyServiceSecrets`).
 * Purpose keys are derived from a master with HKDF by its user; they live only in memory, never
 * logged.
 */
import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/pool.js';
import type { SecretBox } from './sealed.js';

/** The row that only tells which CREDENTIALS_KEY sealed the rest (sealed.ts): not a master. */
export const KEY_CHECK_NAME = 'credentials-key-check';

const boundTo = (name: string) => `service_secrets:${name}`;

function sealMaster(box: SecretBox, name: string, master: Buffer): Buffer {
  return box.seal({ secret: master.toString('base64') }, boundTo(name));
}

async function loadServiceSecret(db: Queryable, box: SecretBox, name: string): Promise<Buffer> {
  await db.query('INSERT INTO service_secrets (name, secret, sealed) VALUES ($1, $2, true) ON CONFLICT (name) DO NOTHING',
    [name, sealMaster(box, name, randomBytes(32))]);
  const { rows } = await db.query<{ secret: Buffer; sealed: boolean }>('SELECT secret, sealed FROM service_secrets WHERE name = $1', [name]);
  const row = rows[0];
  const secret = !row ? undefined : row.sealed ? Buffer.from(box.open(row.secret, boundTo(name)).secret ?? '', 'base64') : row.secret;
  if (!secret || secret.length < 32) {
    throw new Error(`${name} master secret missing from service_secrets`);
  }
  return secret;
}

/**
 * The keys derived from the master secret `name`, loaded once per pool (a failed load is retried
 * on the next call).
 */
export function serviceKeys<K>(name: string, derive: (master: Buffer) => K): (db: Queryable, box: SecretBox) => Promise<K> {
  const loaded = new WeakMap<object, Promise<K>>();
  return (db, box) => {
    let entry = loaded.get(db);
    if (!entry) {
      entry = loadServiceSecret(db, box, name).then(derive);
      entry.catch(() => loaded.delete(db));
      loaded.set(db, entry);
    }
    return entry;
  };
}

/** Seals the masters stored in clear before migration 032; returns how many it sealed. */
export async function sealLegacyServiceSecrets(db: Queryable, box: SecretBox): Promise<number> {
  const { rows } = await db.query<{ name: string; secret: Buffer }>(
    'SELECT name, secret FROM service_secrets WHERE NOT sealed AND name <> $1', [KEY_CHECK_NAME]);
  let sealed = 0;
  for (const row of rows) {
    // $1 the name, $2 the sealed master, $3 the clear bytes read (changed meanwhile: left alone).
    const { rowCount } = await db.query(
      'UPDATE service_secrets SET secret = $2, sealed = true WHERE name = $1 AND NOT sealed AND secret = $3',
      [row.name, sealMaster(box, row.name, row.secret), row.secret]);
    sealed += rowCount ?? 0;
  }
  return sealed;
}
