/**
 * Server-side master secrets (32 random bytes each, table `service_secrets`, migration 003): the
 * first process that needs one generates it (INSERT … ON CONFLICT DO NOTHING, so concurrent
 * processes agree on one value) and every process of the deployment reads the same row. Purpose
 * keys are derived from a master with HKDF by its user; they live only in memory, never logged.
 */
import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/pool.js';

async function loadServiceSecret(db: Queryable, name: string): Promise<Buffer> {
  await db.query('INSERT INTO service_secrets (name, secret) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [name, randomBytes(32)]);
  const { rows } = await db.query<{ secret: Buffer }>('SELECT secret FROM service_secrets WHERE name = $1', [name]);
  const secret = rows[0]?.secret;
  if (!secret || secret.length < 32) {
    throw new Error(`${name} master secret missing from service_secrets`);
  }
  return secret;
}

/**
 * The keys derived from the master secret `name`, loaded once per pool (a failed load is retried
 * on the next call).
 */
export function serviceKeys<K>(name: string, derive: (master: Buffer) => K): (db: Queryable) => Promise<K> {
  const loaded = new WeakMap<object, Promise<K>>();
  return (db) => {
    let entry = loaded.get(db);
    if (!entry) {
      entry = loadServiceSecret(db, name).then(derive);
      entry.catch(() => loaded.delete(db));
      loaded.set(db, entry);
    }
    return entry;
  };
}
