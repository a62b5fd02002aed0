/** MessageFactsCache against a real database, and smsGatewayOf as the SQL it replaces reads a flow. */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createPool, migrate, type Db } from '../../shared/db/pool.js';
import { MessageFactsCache } from '../../shared/engine/message-facts.js';
import { smsGatewayOf, type FlowStep } from '../../shared/channels/index.js';
import { createTestDatabase } from '../support/harness.js';

let database: Awaited<ReturnType<typeof createTestDatabase>>;
let db: Db;

before(async () => {
  database = await createTestDatabase();
  db = createPool(database.url, 2, { indexOnly: true });
  await migrate(db);
});

after(async () => {
  await db.end();
  await database.drop();
});

async function insertMessage(id: string, opts: { payload?: string | null; callback?: string | null; flow?: FlowStep[]; lane?: number } = {}): Promise<void> {
  await db.query(
    `INSERT INTO messages (id, request_id, account_id, key_id, flow, callback, tag, lane, payload, source)
     VALUES ($1, gen_random_uuid(), 1, 1, $2, $3, '', $4, $5, 'v2')`,
    [id, JSON.stringify(opts.flow ?? [{ sms: {} }]), opts.callback ?? null, opts.lane ?? 2, opts.payload ?? null]);
}

test('load reads what is missing once, keeps the stored payload text, and serves it from memory afterwards', async () => {
  await insertMessage('m-one', { payload: '{ "order" :  17 }', callback: 'https://example.test/cb', flow: [{ sms: { gateway: 'direct' } }, { viber: { sender: 'Shop' } }], lane: 1 });
  await insertMessage('m-two');
  const cache = new MessageFactsCache();
  const first = await cache.load(db, ['m-one', 'm-two', 'm-one', 'm-absent']);
  assert.deepEqual([...first.keys()].sort(), ['m-one', 'm-two'], 'an unknown message is simply not found');
  const one = first.get('m-one')!;
  assert.equal(one.payload, '{ "order" :  17 }', 'the json column comes back byte for byte');
  assert.equal(one.callback, 'https://example.test/cb');
  assert.deepEqual(one.flow, [{ sms: { gateway: 'direct' } }, { viber: { sender: 'Shop' } }]);
  assert.equal(one.lane, 1);
  assert.equal(one.source, 'v2');
  assert.match(one.request_id, /^[0-9a-f-]{36}$/);
  assert.equal(cache.size, 2);
  // Facts never change after acceptance: once remembered, the row is not read again.
  await db.query(`DELETE FROM messages WHERE id = 'm-one'`);
  const second = await cache.load(db, ['m-one']);
  assert.deepEqual(second.get('m-one'), one);
});

test('the cache holds at most its byte bound, dropping the oldest entries first', () => {
  const cache = new MessageFactsCache(4_000);
  const facts = (id: string, payloadChars = 0) => ({ id, request_id: 'r', payload: payloadChars ? 'x'.repeat(payloadChars) : null, callback: null, flow: [], lane: 2, source: 'v2' });
  for (let i = 0; i < 20; i++) cache.remember(facts(`m${i}`));
  assert.ok(cache.size < 20 && cache.size > 0, `bounded: ${cache.size}`);
  assert.equal(cache.get('m0'), undefined, 'the oldest went first');
  assert.ok(cache.get('m19'), 'the newest stays');
  cache.remember(facts('big', 1_500));
  assert.ok(cache.get('big'));
  assert.equal(cache.get('m19'), undefined, 'a large payload pushes out more of the old ones');
});

test('smsGatewayOf reads a step as COALESCE(flow -> step -> sms ->> gateway, high) does', async () => {
  const flows: Array<{ flow: FlowStep[]; step: number }> = [
    { flow: [{ sms: {} }], step: 0 },
    { flow: [{ sms: { gateway: 'direct' } }], step: 0 },
    { flow: [{ viber: { sender: 'Shop' } }, { sms: { gateway: 'high' } }], step: 1 },
    { flow: [{ viber: { sender: 'Shop' } }, { sms: { gateway: 'direct' } }], step: 0 },
    { flow: [{ sms: {} }], step: 3 },
  ];
  for (const { flow, step } of flows) {
    const { rows } = await db.query<{ gateway: string }>(`SELECT COALESCE($1::jsonb -> $2::int -> 'sms' ->> 'gateway', 'high') AS gateway`, [JSON.stringify(flow), step]);
    assert.equal(smsGatewayOf(flow[step]), rows[0]!.gateway, JSON.stringify({ flow, step }));
  }
});
