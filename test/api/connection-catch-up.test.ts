/**
 * How a process's ConnectionManager catches its routes up to a stored routing configuration
 * version that a dispatch batch read (CarrierRegistry.catchUp, migration 027), on a real database:
 * only when the routes are older, with one re-read for any number of batches asking at once, and a
 * failed re-read logged and survived (the batch dispatches with the routes there are). Runs the
 * manager with no connector kinds, so it reads the stored tables and opens nothing.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';
import { createPool, migrate, type Db } from '../../shared/db/pool.js';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { createRedis, type Redis } from '../../shared/redis.js';
import { SecretBox } from '../../shared/secrets/sealed.js';
import { ConnectionManager } from '../../shared/carriers/connections.js';
import { CarrierRegistry } from '../../shared/engine/routing.js';
import { readRoutingConfigVersion } from '../../shared/domain/routing-config.js';
import type { CarrierSink } from '../../shared/carriers/types.js';
import { createTestDatabase, REDIS_URL, uniqueName } from '../support/harness.js';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let db: Db;
let redis: Redis;
let manager: ConnectionManager;
const registry = new CarrierRegistry();
const logLines: Array<Record<string, unknown>> = [];
/** Statements of the manager that read the stored version: one per re-read (ConnectionManager.apply). */
let versionReads = 0;

/** No connector kinds run here, so nothing reports to the sink; a call would be a defect of the test. */
const unusedSink = new Proxy({}, { get: (_t, name) => () => { throw new Error(`sink.${String(name)} called`); } }) as CarrierSink;

before(async () => {
  database = await createTestDatabase();
  db = createPool(database.url, 4, { indexOnly: true });
  await migrate(db);
  redis = createRedis(REDIS_URL);
  const config = loadConfig({ NODE_ENV: 'test', DATABASE_URL: database.url, REDIS_URL, REDIS_PREFIX: uniqueName('sbt'), PORT: '0' });
  const logs = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) logLines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const counted = db.query.bind(db) as (...args: unknown[]) => unknown;
  db.query = ((...args: unknown[]) => {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string }).text ?? '';
    if (text.includes('routing_config')) versionReads++;
    return counted(...args);
  }) as typeof db.query;
  manager = new ConnectionManager({
    providers: [],
    context: { db, redis, config, sink: unusedSink, logger: createLogger('info', 'switchboard', logs) },
    box: new SecretBox(Buffer.alloc(32, 7)),
    registry,
    refreshMs: 3_600_000, // only the catch-ups below re-read
  });
  await manager.start();
});

after(async () => {
  await manager?.close();
  await db?.end();
  redis?.disconnect();
  await database?.drop();
});

/** A change as the admin API makes one: any write to a routing table bumps the version (migration 027). */
async function bump(): Promise<number> {
  await db.query(`UPDATE prices SET price_czk = price_czk WHERE channel = 'sms' AND prefix = ''`);
  return readRoutingConfigVersion(db);
}

test('re-reads only for a newer version, once for batches asking at once', async () => {
  const current = await readRoutingConfigVersion(db);
  versionReads = 0;
  await registry.catchUp(current);
  await registry.catchUp(current - 1);
  assert.equal(versionReads, 0, 'routes as new as the version read: nothing re-read');

  const newer = await bump();
  assert.equal(newer, current + 1, 'a statement on prices bumped the version');
  versionReads = 0;
  await Promise.all(Array.from({ length: 5 }, () => registry.catchUp(newer)));
  assert.equal(versionReads, 1, 'five batches, one re-read');
  await registry.catchUp(newer);
  assert.equal(versionReads, 1, 'caught up');
});

test('a failed re-read is logged, the batch goes on, and the next batch re-reads again', async () => {
  const newer = await bump();
  await db.query('ALTER TABLE carrier_connections RENAME TO carrier_connections_away');
  try {
    logLines.length = 0;
    await registry.catchUp(newer); // resolves: the batch dispatches with the routes there are
    const logged = logLines.find((l) => l.msg === 'carrier connections not re-read for a newer stored configuration; dispatching with the routes there are');
    assert.ok(logged, JSON.stringify(logLines));
    assert.equal(logged.version, newer);
    assert.match(String(logged.err), /carrier_connections/);
  } finally {
    await db.query('ALTER TABLE carrier_connections_away RENAME TO carrier_connections');
  }
  versionReads = 0;
  await registry.catchUp(newer);
  assert.equal(versionReads, 1, 'still behind after the failure: re-read by the next batch');
  await registry.catchUp(newer);
  assert.equal(versionReads, 1, 'caught up');
});

test('every statement that changes rows of a routing table bumps the version; one that changes none does not', async () => {
  let version = await readRoutingConfigVersion(db);
  const expectBump = async (sql: string, what: string): Promise<void> => {
    await db.query(sql);
    assert.equal(await readRoutingConfigVersion(db), ++version, what);
  };
  await expectBump(`UPDATE prices SET price_czk = price_czk WHERE channel = 'sms' AND prefix = ''`, 'UPDATE prices');
  await expectBump(`INSERT INTO carrier_connections (name, kind, config, enabled) VALUES ('bumps', 'smpp', '{}', false)`, 'INSERT carrier_connections');
  await expectBump(`INSERT INTO carrier_routes (connection_id, channel, prefix)
                      SELECT id, 'sms', '999' FROM carrier_connections WHERE name = 'bumps'`, 'INSERT carrier_routes');
  await expectBump(`WITH a AS (INSERT INTO accounts (currency) VALUES ('CZK') RETURNING id)
                    INSERT INTO carrier_senders (account_id, family, sender, connection_id)
                    SELECT a.id, 'viber', 'Shop', c.id FROM a, carrier_connections c WHERE c.name = 'bumps'`, 'INSERT carrier_senders');
  await expectBump(`DELETE FROM carrier_senders WHERE sender = 'Shop'`, 'DELETE carrier_senders');
  await expectBump('TRUNCATE carrier_routes', 'TRUNCATE');
  await expectBump(`DELETE FROM carrier_connections WHERE name = 'bumps'`, 'DELETE carrier_connections');
  // A column of each table, for an UPDATE that matches nothing.
  const columns = { prices: 'channel', carrier_connections: 'kind', carrier_routes: 'prefix', carrier_senders: 'family' };
  for (const [table, column] of Object.entries(columns)) {
    await db.query(`DELETE FROM ${table} WHERE false`); // as a refused admin call's delete of nothing
    await db.query(`UPDATE ${table} SET ${column} = ${column} WHERE false`);
  }
  await db.query('SELECT count(*) FROM prices');
  assert.equal(await readRoutingConfigVersion(db), version, 'statements that changed no row, and a read, leave it');
});
