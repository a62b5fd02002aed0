/**
 * For tests that run the outbox relay in-process against a migrated database of their own: the
 * relay there makes every batch's first attempt itself (a direct delivery that takes all), so
 * nothing is queued.
 */
import { createPool, migrate, type Db } from '../../shared/db/pool.js';
import type { DirectDelivery, ReadyBatch } from '../../shared/webhooks/direct.js';
import type { Queues } from '../../shared/queues.js';
import { createTestDatabase } from './harness.js';

export const noQueues = new Proxy({}, { get(): never { throw new Error('nothing may be queued in this test'); } }) as unknown as Queues;
export const takeAll = { offer: (_b: ReadyBatch) => true } as unknown as DirectDelivery;

/** A fresh database with the schema, and how to close its pool and drop it. */
export async function migratedDatabase(): Promise<{ db: Db; drop(): Promise<void> }> {
  const database = await createTestDatabase();
  const db = createPool(database.url, 3);
  await migrate(db);
  return { db, drop: async () => { await db.end(); await database.drop(); } };
}
