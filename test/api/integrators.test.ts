/**
 * What integrators reach for (issue 27), against the real service (Postgres, Redis, workers, the
 * sandbox carrier, a webhook receiver on loopback): message lookup with its timeline, idempotent
 * sends, opt-out, `payload` left out of events, the origin's `apikey/change` body and key scopes.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, startReceiver, waitFor, type Receiver, type TestService, type TestResponse } from '../support/harness.js';
import { createPool } from '../../shared/db/pool.js';
import { createLogger } from '../../shared/logger.js';
import { IdempotencyExpiry } from '../../shared/sending/idempotency.js';

const NOT_AUTHORIZED = 'User is not authorized to access this resource with an explicit deny';

let svc: TestService;
let hooks: Receiver;
let key: string;

before(async () => {
  svc = await startTestService({ env: { SANDBOX_SLOW_DELIVERY_MS: '300', ALLOW_PRIVATE_CALLBACKS: 'true' } });
  hooks = await startReceiver();
  ({ apiKey: key } = await svc.createAccount({ credit_czk: 10000, credit_eur: 1000 }));
});
after(async () => {
  await svc.settle();
  await hooks.close();
  await svc.stop();
});

const auth = (k: string, extra: Record<string, string> = {}) => ({ 'x-api-key': k, ...extra });
const post = (k: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<TestResponse> =>
  svc.request('POST', path, { body, headers: auth(k, headers) });
const get = (k: string | null, path: string): Promise<TestResponse> => svc.request('GET', path, k === null ? {} : { headers: auth(k) });

async function sendBatch(k: string, messages: unknown[], headers: Record<string, string> = {}): Promise<TestResponse> {
  const res = await post(k, '/v2/messages', messages, headers);
  assert.equal(res.status, 200, res.text);
  return res;
}

async function lookup(k: string, id: string): Promise<TestResponse> {
  return get(k, `/v2/messages/${id}`);
}

async function credit(k: string): Promise<number> {
  const res = await get(k, '/v1/credit');
  assert.equal(res.status, 200, res.text);
  return res.body.credit.credit_czk as number;
}

const count = async (sql: string, params: unknown[] = []): Promise<number> => (await svc.sql<{ n: number }>(sql, params))[0]!.n;

// ---------------------------------------------------------------------------------------------
// Message lookup with its timeline
// ---------------------------------------------------------------------------------------------

test('lookup of a fallback chain: the Viber attempt ends "not a user", the SMS attempt is delivered, every event says where its webhook went', async () => {
  const res = await sendBatch(key, [{
    body: 'Your parcel', to: [{ phone_number: '420777300404' }, { phone_number: '420777300400' }], callback: `${hooks.url}/lookup`,
    flow: [{ viber: { sender: 'Shop' } }, { sms: { sender: 'Shop' } }],
  }]);
  const messageId = res.body.accepted[0].message_id as string;
  // The webhooks of both recipients' events were delivered (five events for …04, four for …00).
  await waitFor(async () => {
    const body = (await lookup(key, messageId)).body;
    const events = body.recipients?.flatMap((r: { events: Array<{ webhook: { status: string } }> }) => r.events) ?? [];
    return events.length === 9 && events.every((e: { webhook: { status: string } }) => e.webhook.status === 'delivered');
  }, 15_000, 'every event delivered to its webhook');

  const whole = await lookup(key, messageId);
  assert.equal(whole.status, 200, whole.text);
  assert.equal(whole.body.message_id, messageId);
  assert.equal(whole.body.request_id, res.body.request_id);
  assert.deepEqual(whole.body.recipients.map((r: { message_id: string }) => r.message_id), [`${messageId}-0`, `${messageId}-1`]);

  const one = await lookup(key, `${messageId}-0`);
  assert.equal(one.status, 200, one.text);
  assert.equal(one.body.recipients.length, 1, 'a per-recipient id names that recipient only');
  const r = one.body.recipients[0];
  assert.equal(r.message_id, `${messageId}-0`);
  assert.equal(r.phone_number, '420777300404');
  assert.equal(r.result, 'delivered');
  assert.equal(r.result_info, '[0] Delivered');
  assert.equal(r.gateway, 'sms');
  assert.equal(r.parts, 1);
  assert.deepEqual(r.attempts.map((a: { gateway: string; result: string }) => `${a.gateway}:${a.result}`), ['viber:undelivered', 'sms:delivered']);
  const [viber, sms] = r.attempts;
  assert.equal(viber.carrier, 'sandbox');
  assert.equal(viber.sender, 'Shop');
  assert.match(viber.result_info, /Not a Viber user/);
  assert.equal(viber.end_reason, 'not_a_user', 'why the fallback fired');
  assert.equal(viber.fell_back_to, 'sms');
  assert.equal(viber.refunded, true, 'the carrier never took it (D3)');
  assert.ok(viber.handed_at, 'the Viber attempt was handed to its carrier');
  assert.equal(sms.end_reason, null);
  assert.equal(sms.fell_back_to, null);
  assert.ok(sms.handed_at && sms.answered_at && sms.receipt_at, 'the SMS attempt was handed, answered and got its receipt');
  assert.ok(Date.parse(sms.handed_at) <= Date.parse(sms.receipt_at));
  assert.equal(r.price_czk, sms.price_czk, 'what the recipient cost: the SMS; the Viber attempt was refunded');
  assert.ok(sms.price_czk > 0);

  assert.deepEqual(r.events.map((e: { gateway: string; result: string }) => `${e.gateway}:${e.result}`),
    ['viber:sending', 'viber:undelivered', 'sms:sending', 'sms:sent', 'sms:delivered']);
  for (const e of r.events) {
    assert.equal(e.type, 'sentMessage');
    assert.equal(typeof e.timestamp, 'number');
    assert.equal(e.webhook.status, 'delivered');
    assert.equal(e.webhook.url, `${hooks.url}/lookup`);
    assert.equal(typeof e.webhook.batch_id, 'number');
    assert.equal(e.webhook.last_status, 200);
  }
  // The events the receiver got are the ones the lookup lists.
  const received = hooks.requests.filter((q) => q.path === '/lookup').flatMap((q) => q.events).filter((e) => e.message_id === `${messageId}-0`);
  assert.deepEqual(received.map((e) => `${e.gateway}:${e.result}`).sort(), r.events.map((e: { gateway: string; result: string }) => `${e.gateway}:${e.result}`).sort());

  // The same recipients in the REST list, by message id (no date needed) and by recipient id.
  const listed = await get(key, `/v1/messages?message_id=${messageId}`);
  assert.equal(listed.status, 200, listed.text);
  assert.deepEqual(listed.body.messages.map((m: { message_id: string; flow: string }) => `${m.message_id} ${m.flow}`),
    [`${messageId}-0 viber,sms`, `${messageId}-1 viber`]);
  const single = await get(key, `/v1/messages?message_id=${messageId}-1&date=${new Date().toISOString().slice(0, 10)}`);
  assert.deepEqual(single.body.messages.map((m: { message_id: string }) => m.message_id), [`${messageId}-1`]);
  assert.deepEqual((await get(key, `/v1/messages?message_id=${messageId}&date=2001-01-01`)).body.messages, [], 'another day: none');
  const bad = await get(key, '/v1/messages?message_id=nope');
  assert.equal(bad.status, 400);
  assert.match(bad.body.message, /^message_id: /);
});

test('lookup while a fallback step waits for its time: the ended step already names the channel it fell back to', async () => {
  const res = await sendBatch(key, [{
    body: 'Your parcel', to: [{ phone_number: '420777300404' }], flow: [{ viber: { sender: 'Shop' } }, { sms: { sender: 'Shop' } }],
  }]);
  const messageId = res.body.accepted[0].message_id as string;
  const recipientId = async (): Promise<number> => (await svc.sql<{ id: number }>(
    'SELECT id FROM recipients WHERE message_id = $1', [messageId]))[0]!.id;
  await waitFor(async () => (await count('SELECT count(*)::int AS n FROM attempts WHERE recipient_id = $1 AND step = 1', [await recipientId()])) === 1,
    10_000, 'the SMS step started');
  // As the recipient stands when the SMS step is outside its delivery window: moved on to step 1,
  // due later, its attempt not yet written.
  const id = await recipientId();
  await svc.sql('DELETE FROM attempts WHERE recipient_id = $1 AND step = 1', [id]);
  await svc.sql("UPDATE recipients SET due_at = now() + interval '1 hour' WHERE id = $1", [id]);
  const r = (await lookup(key, messageId)).body.recipients[0];
  assert.equal(r.result, 'queued');
  assert.match(r.result_info, /^Waiting until /);
  assert.equal(r.attempts.length, 1);
  assert.equal(r.attempts[0].end_reason, 'not_a_user');
  assert.equal(r.attempts[0].fell_back_to, 'sms', 'the flow moved on to SMS, whose attempt is not written yet');
});

test('lookup: a key sees its own messages, the primary key also its sub-keys\'; anything else is 404; ids of /v2/message recipients work', async () => {
  const other = await svc.createAccount();
  const sub = await post(key, '/v1/apikey/add', { shared: true, currency: 'CZK' });
  assert.equal(sub.status, 200, sub.text);
  const subKey = sub.body.apikey as string;

  const mine = (await sendBatch(key, [{ body: 'primary', to: [{ phone_number: '420777300500' }] }])).body.accepted[0].message_id as string;
  const subs = (await sendBatch(subKey, [{ body: 'sub', to: [{ phone_number: '420777300501' }] }])).body.accepted[0].message_id as string;
  const singles = await post(key, '/v2/message', { body: 'single', to: [{ phone_number: '420777300502' }, { phone_number: '420777300503' }] });
  assert.equal(singles.status, 200, singles.text);
  const [first, second] = singles.body.accepted.map((a: { message_id: string }) => a.message_id);

  assert.equal((await lookup(key, mine)).status, 200);
  assert.equal((await lookup(key, subs)).status, 200, 'the primary key sees its sub-key\'s messages');
  assert.equal((await lookup(subKey, subs)).status, 200);
  for (const [k, id, what] of [[subKey, mine, 'a sub-key does not see the primary\'s'], [other.apiKey, mine, 'another account'],
    [other.apiKey, `${subs}-0`, 'another account, by recipient id'], [other.apiKey, first, 'another account, single id'],
    [key, '0123456789abcdef0123', 'unknown'], [key, `${mine}-5`, 'no such recipient']] as const) {
    const res = await lookup(k, id);
    assert.equal(res.status, 404, `${what}: ${res.text}`);
    assert.deepEqual(Object.keys(res.body), ['Message']);
  }
  for (const [id, recipient] of [[first, '420777300502'], [second, '420777300503']] as const) {
    const res = await lookup(key, id);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.recipients.map((r: { message_id: string; phone_number: string }) => [r.message_id, r.phone_number]), [[id, recipient]]);
  }
  const malformed = await lookup(key, 'not-an-id');
  assert.equal(malformed.status, 400);
  assert.match(malformed.body.Message, /^id: /);
  const noKey = await get(null, `/v2/messages/${mine}`);
  assert.equal(noKey.status, 400);
  assert.deepEqual(noKey.body, { Message: NOT_AUTHORIZED });
});

// ---------------------------------------------------------------------------------------------
// Idempotent sends
// ---------------------------------------------------------------------------------------------

test('Idempotency-Key: the same call again gets the first answer and sends nothing; another body is 409', async () => {
  const body = [{ body: 'Once only', to: [{ phone_number: '420777310000' }, { phone_number: '420777310001' }] }];
  const idem = { 'Idempotency-Key': 'order-4711-confirmation' };
  const first = await sendBatch(key, body, idem);
  assert.equal(first.headers['idempotent-replayed'], undefined);
  const again = await sendBatch(key, body, idem);
  assert.deepEqual(again.body, first.body, 'same request_id, same ids');
  assert.equal(again.headers['idempotent-replayed'], 'true');
  assert.equal(await count('SELECT count(*)::int AS n FROM messages WHERE request_id = $1', [first.body.request_id]), 1);
  assert.equal(await count(`SELECT count(*)::int AS n FROM recipients WHERE phone = '420777310000'`), 1, 'sent once');

  const changed = await post(key, '/v2/messages', [{ ...body[0], body: 'Once only!' }], idem);
  assert.equal(changed.status, 409);
  assert.match(changed.body.Message, /Idempotency-Key "order-4711-confirmation" was used for a different request/);
  const elsewhere = await post(key, '/v1/messages', body, idem);
  assert.equal(elsewhere.status, 409, 'the same key on another endpoint is another request');
  // Also when every object of the other request is refused (it would store nothing): still 409.
  const refusedBody = [{ body: 'never', to: [{ phone_number: '420777310005' }], datetime: '2099-01-01T00:00:00Z' }];
  assert.equal((await post(key, '/v2/messages', refusedBody, idem)).status, 409);
  assert.equal((await post(key, '/v1/messages', refusedBody, idem)).status, 409);
  // With a key never used, such a call answers its rejections and keeps nothing.
  const fresh = await post(key, '/v2/messages', refusedBody, { 'Idempotency-Key': 'all-refused-1' });
  assert.equal(fresh.status, 200, fresh.text);
  assert.deepEqual(fresh.body.accepted, []);
  assert.equal(await count(`SELECT count(*)::int AS n FROM idempotency_keys WHERE idem_key = 'all-refused-1'`), 0);

  // Keys are per API key: another account's key with the same Idempotency-Key sends.
  const other = await svc.createAccount();
  const theirs = await sendBatch(other.apiKey, body, idem);
  assert.notEqual(theirs.body.request_id, first.body.request_id);

  // /v2/message and legacy v1 replay in their own shapes.
  const single = await post(key, '/v2/message', { body: 'single', to: [{ phone_number: '420777310002' }] }, { 'Idempotency-Key': 'single-1' });
  const singleAgain = await post(key, '/v2/message', { body: 'single', to: [{ phone_number: '420777310002' }] }, { 'Idempotency-Key': 'single-1' });
  assert.equal(single.status, 200, single.text);
  assert.deepEqual(singleAgain.body, single.body);
  const v1 = await post(key, '/v1/messages', [{ body: 'legacy', to: [{ phone_number: '420777310003' }] }], { 'Idempotency-Key': 'legacy-1' });
  const v1Again = await post(key, '/v1/messages', [{ body: 'legacy', to: [{ phone_number: '420777310003' }] }], { 'Idempotency-Key': 'legacy-1' });
  assert.equal(v1.status, 200, v1.text);
  assert.deepEqual(v1Again.body, v1.body);
  assert.ok(v1.body.requestId);

  // A key of 256 characters, or with a character that is not printable ASCII, is refused as a whole.
  for (const bad of ['x'.repeat(256), 'tab\there']) {
    const res = await post(key, '/v2/messages', body, { 'Idempotency-Key': bad });
    assert.equal(res.status, 400, bad);
    assert.match(res.body.Message, /^Idempotency-Key must be 1 to 255 printable ASCII characters$/);
  }
  assert.equal((await post(key, '/v2/messages', [{ body: 'long key', to: [{ phone_number: '420777310004' }] }], { 'Idempotency-Key': 'k'.repeat(255) })).status, 200);

  // A key older than 24 hours is free again.
  await svc.sql(`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE idem_key = 'order-4711-confirmation'`);
  const later = await sendBatch(key, body, idem);
  assert.notEqual(later.body.request_id, first.body.request_id);
  assert.equal(later.headers['idempotent-replayed'], undefined);
  // The sweep deletes keys older than 24 hours, and only those.
  await svc.sql(`UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE idem_key IN ('single-1', 'legacy-1')`);
  const db = createPool(svc.databaseUrl, 1);
  try {
    // single-1, legacy-1, and the other account's order-4711-confirmation (aged above, never used again).
    assert.equal(await new IdempotencyExpiry(db, createLogger('silent')).once(), 3);
  } finally {
    await db.end();
  }
  assert.deepEqual((await svc.sql<{ idem_key: string }>(`SELECT idem_key FROM idempotency_keys WHERE idem_key IN ('single-1', 'legacy-1', 'order-4711-confirmation')`))
    .map((r) => r.idem_key), ['order-4711-confirmation']);
});

test('20 concurrent calls with one Idempotency-Key: exactly one is sent, every answer is that one', async () => {
  const body = [{ body: 'Concurrent', to: [{ phone_number: '420777320000' }] }];
  const answers = await Promise.all(Array.from({ length: 20 }, () =>
    svc.request('POST', '/v2/messages', { body, headers: auth(key, { 'Idempotency-Key': 'burst-1' }) })));
  for (const a of answers) {
    assert.equal(a.status, 200, a.text);
  }
  assert.equal(new Set(answers.map((a) => a.body.request_id)).size, 1, 'one request_id');
  assert.equal(new Set(answers.map((a) => a.body.accepted[0].message_id)).size, 1, 'one message id');
  assert.equal(answers.filter((a) => a.headers['idempotent-replayed'] === 'true').length, 19);
  assert.equal(await count(`SELECT count(*)::int AS n FROM recipients WHERE phone = '420777320000'`), 1, 'one send');
  await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM sandbox_messages WHERE phone_number = '420777320000'`)) > 0, 10_000, 'the send');
  assert.equal(await count(`SELECT count(*)::int AS n FROM sandbox_messages WHERE phone_number = '420777320000'`), 1, 'carried once');
});

test('idempotency_key per message object: a retried batch resends only the objects that were not accepted', async () => {
  const a = { body: 'A', to: [{ phone_number: '420777330000' }], idempotency_key: 'obj-a' };
  const b = { body: 'B', to: [{ phone_number: '420777330001' }], idempotency_key: 'obj-b' };
  const c = { body: 'C', to: [{ phone_number: '420777330002' }], idempotency_key: 'obj-c' };
  const first = await sendBatch(key, [a, b]);
  assert.deepEqual(first.body.rejected, []);
  const retry = await sendBatch(key, [a, b, c]);
  assert.deepEqual(retry.body.rejected, []);
  assert.deepEqual(retry.body.accepted.slice(0, 2), first.body.accepted, 'a and b: their original ids');
  assert.equal(retry.body.accepted[2].key, '2');
  assert.equal(await count(`SELECT count(*)::int AS n FROM recipients WHERE phone IN ('420777330000', '420777330001')`), 2, 'a and b sent once');
  assert.equal(await count(`SELECT count(*)::int AS n FROM recipients WHERE phone = '420777330002'`), 1, 'c sent');

  // The key of another object, or twice in one call: a rejected entry; the rest goes.
  const mixed = await sendBatch(key, [{ ...a, body: 'A changed' }, { body: 'D', to: [{ phone_number: '420777330003' }], idempotency_key: 'obj-d' },
    { body: 'E', to: [{ phone_number: '420777330004' }], idempotency_key: 'obj-d' }]);
  assert.deepEqual(mixed.body.rejected, [
    { key: '0', message: 'idempotency_key: was used for a different message object in the last 24 hours' },
    { key: '2', message: 'idempotency_key: is also the key of message object 1 of this call' },
  ]);
  assert.deepEqual(mixed.body.accepted.map((x: { key: string }) => x.key), ['1']);

  // With the call's key too: the replay of the whole call is the second answer, not a third send.
  const idem = { 'Idempotency-Key': 'call-with-objects' };
  const withBoth = await sendBatch(key, [a, { body: 'F', to: [{ phone_number: '420777330005' }], idempotency_key: 'obj-f' }], idem);
  assert.deepEqual(withBoth.body.accepted[0], first.body.accepted[0]);
  const withBothAgain = await sendBatch(key, [a, { body: 'F', to: [{ phone_number: '420777330005' }], idempotency_key: 'obj-f' }], idem);
  assert.deepEqual(withBothAgain.body, withBoth.body);
  assert.equal(await count(`SELECT count(*)::int AS n FROM recipients WHERE phone = '420777330005'`), 1);

  // /v2/message with an object key: its recipients' own ids again; another object with it: 409.
  const one = { body: 'G', to: [{ phone_number: '420777330006' }, { phone_number: '420777330007' }], idempotency_key: 'obj-g' };
  const g1 = await post(key, '/v2/message', one);
  const g2 = await post(key, '/v2/message', one);
  assert.equal(g1.status, 200, g1.text);
  assert.deepEqual(g2.body, g1.body);
  const g3 = await post(key, '/v2/message', { ...one, body: 'G!' });
  assert.equal(g3.status, 409);
  assert.match(g3.body.Message, /^idempotency_key: "obj-g" was used for a different message object/);
  const badKey = await sendBatch(key, [{ ...a, idempotency_key: '' }]);
  assert.match(badKey.body.rejected[0].message, /^idempotency_key: /);

  // A call whose every object lost its key's claim accepted nothing: its Idempotency-Key is not
  // kept, so the call can be fixed and sent again with the same key (docs/sending-api.md).
  const retryKey = { 'Idempotency-Key': 'retry-after-conflict-1' };
  const allTaken = await sendBatch(key, [{ ...a, body: 'A changed again' }], retryKey);
  assert.deepEqual(allTaken.body.accepted, []);
  assert.deepEqual(allTaken.body.rejected, [{ key: '0', message: 'idempotency_key: was used for a different message object in the last 24 hours' }]);
  assert.equal(await count(`SELECT count(*)::int AS n FROM idempotency_keys WHERE idem_key = 'retry-after-conflict-1'`), 0, 'the call key is not kept');
  const fixed = await sendBatch(key, [{ ...a, body: 'A changed again', idempotency_key: 'obj-a2' }], retryKey);
  assert.equal(fixed.status, 200, fixed.text);
  assert.equal(fixed.headers['idempotent-replayed'], undefined);
  assert.deepEqual(fixed.body.rejected, []);
  assert.equal(fixed.body.accepted.length, 1);
  const fixedAgain = await sendBatch(key, [{ ...a, body: 'A changed again', idempotency_key: 'obj-a2' }], retryKey);
  assert.equal(fixedAgain.headers['idempotent-replayed'], 'true');
  assert.deepEqual(fixedAgain.body, fixed.body);
});

// ---------------------------------------------------------------------------------------------
// Opt-out
// ---------------------------------------------------------------------------------------------

test('STOP puts the sender on the suppression list: promotional sends are rejected [304] uncharged, priority still delivered, START restores', async () => {
  const acc = await svc.createAccount({ credit_czk: 100 });
  await post(acc.apiKey, '/v1/apikey/update', { default_callback_url: `${hooks.url}/optout` });
  const phone = '420777340000';
  const inbound = (body: string) => post(acc.apiKey, '/sandbox/inbound', { gateway: 'sms', sender: phone, recipient: 'Shop', body });

  const stop = await inbound('Stop!');
  assert.equal(stop.status, 200, stop.text);
  assert.equal(stop.body.keyword, 'opt-out');
  // The inbound message is still delivered as an event.
  await waitFor(() => hooks.requests.some((q) => q.path === '/optout' && q.events.some((e) => e.body === 'Stop!')), 10_000, 'the STOP event');
  const listed = await get(acc.apiKey, '/v1/suppressions');
  assert.equal(listed.status, 200, listed.text);
  assert.deepEqual(listed.body.suppressions.map((s: { phone_number: string; family: string; source: string }) => [s.phone_number, s.family, s.source]),
    [[phone, 'sms', 'keyword']]);

  const before = await credit(acc.apiKey);
  const promo = (await sendBatch(acc.apiKey, [{ body: 'Sale!', to: [{ phone_number: phone }] }])).body.accepted[0].message_id as string;
  const urgent = (await sendBatch(acc.apiKey, [{ body: 'Your code', to: [{ phone_number: phone }], tag: 'priority' }])).body.accepted[0].message_id as string;
  const receipt = (await sendBatch(acc.apiKey, [{ body: 'Receipt', to: [{ phone_number: phone }], tag: 'transactional' }])).body.accepted[0].message_id as string;
  await waitFor(async () => {
    const states = await Promise.all([promo, urgent, receipt].map(async (id) => (await lookup(acc.apiKey, `${id}-0`)).body.recipients?.[0]?.result));
    return states[0] === 'rejected' && states[1] === 'delivered' && states[2] === 'delivered';
  }, 10_000, 'promotional rejected, priority and transactional delivered');
  const rejected = (await lookup(acc.apiKey, `${promo}-0`)).body.recipients[0];
  assert.equal(rejected.result_info, '[304] Recipient opted out');
  assert.equal(rejected.attempts[0].end_reason, 'opted_out');
  assert.equal(rejected.attempts[0].charged, 0);
  assert.equal(rejected.price_czk, 0);
  const paid = (await lookup(acc.apiKey, `${urgent}-0`)).body.recipients[0].price_czk as number;
  await waitFor(async () => Math.abs((await credit(acc.apiKey)) - (before - 2 * paid)) < 1e-9, 10_000, 'only the two sent are charged');
  await waitFor(() => hooks.requests.filter((q) => q.path === '/optout').flatMap((q) => q.events).some((e) => e.message_id === `${promo}-0`), 10_000, 'the rejected event');
  const promoEvents = hooks.requests.filter((q) => q.path === '/optout').flatMap((q) => q.events).filter((e) => e.message_id === `${promo}-0`);
  assert.deepEqual(promoEvents.map((e) => `${e.result} ${e.result_info}`), ['rejected [304] Recipient opted out'], 'one event, no sending');

  // Switched off for the account: promotional sends go out again.
  assert.equal((await svc.admin('PATCH', `/accounts/${acc.accountId}`, { opt_out_promotional: false })).status, 200);
  const unchecked = (await sendBatch(acc.apiKey, [{ body: 'Sale, unchecked', to: [{ phone_number: phone }] }])).body.accepted[0].message_id as string;
  await waitFor(async () => (await lookup(acc.apiKey, `${unchecked}-0`)).body.recipients?.[0]?.result === 'delivered', 10_000, 'sent while switched off');
  assert.equal((await svc.admin('PATCH', `/accounts/${acc.accountId}`, { opt_out_promotional: true })).status, 200);

  const start = await inbound('start');
  assert.equal(start.body.keyword, 'opt-in');
  assert.deepEqual((await get(acc.apiKey, '/v1/suppressions')).body.suppressions, []);
  const again = (await sendBatch(acc.apiKey, [{ body: 'Sale again', to: [{ phone_number: phone }] }])).body.accepted[0].message_id as string;
  await waitFor(async () => (await lookup(acc.apiKey, `${again}-0`)).body.recipients?.[0]?.result === 'delivered', 10_000, 'delivered after START');
  assert.equal((await svc.admin('GET', `/accounts/${acc.accountId}`)).body.suppressions, 0, 'the account\'s count follows its list');
});

test('suppressions through the REST API: add, list, remove, per family; bad numbers are 400 naming the field', async () => {
  const acc = await svc.createAccount();
  const added = await post(acc.apiKey, '/v1/suppressions', { phone_number: '+420 777 350 000' });
  assert.equal(added.status, 200, added.text);
  assert.deepEqual(added.body.suppressions.map((s: { family: string; phone_number: string; source: string }) => `${s.family} ${s.phone_number} ${s.source}`),
    ['sms 420777350000 api', 'viber 420777350000 api', 'whatsapp 420777350000 api']);
  assert.equal((await post(acc.apiKey, '/v1/suppressions', { phone_number: '777350001', family: 'viber' })).status, 200, 'national form, account country');
  const again = await post(acc.apiKey, '/v1/suppressions', { phone_number: '420777350001', family: 'viber' });
  assert.equal(again.body.suppressions.length, 1, 'adding twice keeps one row');
  assert.equal((await svc.admin('GET', `/accounts/${acc.accountId}`)).body.suppressions, 4);

  const page1 = await get(acc.apiKey, '/v1/suppressions?limit=3');
  assert.equal(page1.body.suppressions.length, 3);
  const page2 = await get(acc.apiKey, `/v1/suppressions?limit=3&cursor=${page1.body.next_cursor}`);
  assert.deepEqual(page2.body.suppressions.map((s: { family: string }) => s.family), ['whatsapp']);
  assert.equal(page2.body.next_cursor, null);
  assert.deepEqual((await get(acc.apiKey, '/v1/suppressions?family=viber')).body.suppressions.map((s: { phone_number: string }) => s.phone_number),
    ['420777350000', '420777350001']);

  const removed = await svc.request('DELETE', '/v1/suppressions/420777350000?family=sms', { headers: auth(acc.apiKey) });
  assert.equal(removed.status, 200, removed.text);
  assert.deepEqual(removed.body.removed.map((s: { family: string }) => s.family), ['sms']);
  const rest = await svc.request('DELETE', '/v1/suppressions/420777350000', { headers: auth(acc.apiKey) });
  assert.deepEqual(rest.body.removed.map((s: { family: string }) => s.family), ['viber', 'whatsapp']);
  assert.equal((await svc.request('DELETE', '/v1/suppressions/420777350000', { headers: auth(acc.apiKey) })).status, 404);
  assert.equal((await svc.admin('GET', `/accounts/${acc.accountId}`)).body.suppressions, 1);

  for (const [res, field] of [
    [await post(acc.apiKey, '/v1/suppressions', { phone_number: '12' }), /^phone_number: is not a valid phone number/],
    [await post(acc.apiKey, '/v1/suppressions', {}), /^phone_number: is required/],
    [await post(acc.apiKey, '/v1/suppressions', { phone_number: '420777350002', family: 'fax' }), /^family: /],
    [await post(acc.apiKey, '/v1/suppressions', { phone_number: '420777350002', note: 'x' }), /^note: /],
    [await svc.request('DELETE', '/v1/suppressions/abc', { headers: auth(acc.apiKey) }), /^phone_number: /],
    [await get(acc.apiKey, '/v1/suppressions?phone_number=1'), /^phone_number: /],
    [await get(acc.apiKey, '/v1/suppressions?cursor=zzz'), /^cursor: /],
  ] as const) {
    assert.equal(res.status, 400, res.text);
    assert.match(res.body.message, field);
  }
  assert.equal((await get(null, '/v1/suppressions')).status, 401);
});

// ---------------------------------------------------------------------------------------------
// Origin-client compatibility
// ---------------------------------------------------------------------------------------------

test('payload is left out of sentMessage and incomingReplyMessage events of a message that had none (D4), and kept when it had one', async () => {
  const res = await sendBatch(key, [
    { body: 'No payload', to: [{ phone_number: '420777360000' }], callback: `${hooks.url}/payload`, flow: [{ sms: { sender: 'Acme' } }] },
    { body: 'Payload', to: [{ phone_number: '420777360001' }], callback: `${hooks.url}/payload`, payload: { order: 7 } },
  ]);
  const [none, some] = res.body.accepted.map((a: { message_id: string }) => `${a.message_id}-0`);
  const eventsOf = (id: string) => hooks.requests.filter((q) => q.path === '/payload').flatMap((q) => q.events).filter((e) => e.message_id === id);
  await waitFor(() => eventsOf(none).length >= 3 && eventsOf(some).length >= 3, 10_000, 'the events');
  for (const e of eventsOf(none)) {
    assert.equal('payload' in e, false, JSON.stringify(e));
  }
  for (const e of eventsOf(some)) {
    assert.deepEqual(e.payload, { order: 7 });
  }
  const reply = await post(key, '/sandbox/inbound', { gateway: 'sms', sender: '420777360000', recipient: 'Acme', body: 'Thanks' });
  assert.equal(reply.body.event, 'incomingReplyMessage', reply.text);
  await waitFor(() => eventsOf(none).some((e) => e.type === 'incoming'), 10_000, 'the reply event');
  const replyEvent = eventsOf(none).find((e) => e.type === 'incoming');
  assert.equal('payload' in replyEvent, false, JSON.stringify(replyEvent));
  assert.equal(replyEvent.body, 'Thanks');
});

test('apikey/change takes {id, disable} and the origin\'s {apikey, scope?, disable?}; scopes are enforced on every API family', async () => {
  const acc = await svc.createAccount();
  const sub = (await post(acc.apiKey, '/v1/apikey/add', { shared: true, currency: 'CZK' })).body as { apikey: string; id: number };
  const message = [{ body: 'scoped', to: [{ phone_number: '420777370000' }] }];
  const send = () => post(sub.apikey, '/v2/messages', message);
  const rest = () => get(sub.apikey, '/v1/credit');
  const xml = () => svc.request('POST', '/xml', {
    raw: new URLSearchParams({
      apikey: sub.apikey,
      XMLDATA: '<RequestDocument><RequestList><Request Type="high"><Message Type="Text">Hi</Message><NumbersList><Number>420777370001</Number></NumbersList></Request></RequestList></RequestDocument>',
    }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  const verify = () => post(sub.apikey, '/v1/validations', { phoneNumber: '420777370002' });

  const toApi = await post(acc.apiKey, '/v1/apikey/change', { apikey: sub.apikey, scope: 'api' });
  assert.equal(toApi.status, 200, toApi.text);
  assert.deepEqual(toApi.body, { success: true, id: sub.id, disabled: false, scope: 'api' });
  assert.equal((await send()).status, 200, 'an api key sends');
  assert.equal((await xml()).status, 200);
  assert.equal((await verify()).status, 200);
  const refused = await rest();
  assert.equal(refused.status, 403, 'an api key may not use the REST API');
  assert.match(refused.body.message, /scope is "api"/);
  assert.equal((await get(acc.apiKey, '/v1/apikey/list')).body.list[0].scope, 'api');

  const toRest = await post(acc.apiKey, '/v1/apikey/change', { apikey: sub.apikey, scope: 'rest-api' });
  assert.equal(toRest.body.scope, 'rest-api');
  assert.equal((await rest()).status, 200, 'a rest-api key uses the REST API');
  const denied = await send();
  assert.equal(denied.status, 400, 'and may not send');
  assert.deepEqual(denied.body, { Message: NOT_AUTHORIZED });
  assert.match((await xml()).text, /ID="103"/);
  assert.equal((await verify()).status, 401);
  assert.equal((await lookup(sub.apikey, '0123456789abcdef0123')).status, 400, 'nor look messages up on the sending API');

  // {apikey, disable} and {id, disable} both revoke and restore; {id, scope} changes the scope.
  assert.equal((await post(acc.apiKey, '/v1/apikey/change', { apikey: sub.apikey, disable: 1 })).body.disabled, true);
  assert.equal((await rest()).status, 401);
  assert.equal((await post(acc.apiKey, '/v1/apikey/change', { id: sub.id, disable: 0 })).body.disabled, false);
  assert.equal((await rest()).status, 200);
  assert.deepEqual((await post(acc.apiKey, '/v1/apikey/change', { id: sub.id, scope: 'full', disable: 0 })).body, { success: true, id: sub.id, disabled: false, scope: 'full' });
  assert.equal((await send()).status, 200);
  assert.equal((await rest()).status, 200);

  for (const [body, status, message] of [
    [{ apikey: sub.apikey, scope: 'admin' }, 400, /^scope: must be one of full, api, rest-api/],
    [{ apikey: sub.apikey }, 400, /^disable: /],
    [{ apikey: sub.apikey, id: sub.id, disable: 1 }, 400, /^id: give either id or apikey/],
    [{ apikey: 42, disable: 1 }, 400, /^apikey: /],
    [{ apikey: acc.apiKey, scope: 'api' }, 404, /^apikey: not a sub-key/],
    [{ apikey: 'sb_unknown', disable: 1 }, 404, /^apikey: not a sub-key/],
  ] as const) {
    const res = await post(acc.apiKey, '/v1/apikey/change', body);
    assert.equal(res.status, status, JSON.stringify(body));
    assert.match(res.body.message, message);
  }
  // A sub-key of another account cannot be named by its key either.
  const other = await svc.createAccount();
  assert.equal((await post(other.apiKey, '/v1/apikey/change', { apikey: sub.apikey, scope: 'api' })).status, 404);
});
