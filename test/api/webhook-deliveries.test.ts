/**
 * Customers see their webhook deliveries: `GET /v1/webhooks/deliveries` (recent batches with
 * status, attempts, last error and next attempt; a key its own, the primary key also its
 * sub-keys') and `POST /v1/webhooks/replay` for their own dead letters, in the REST API's auth and
 * error forms. Real deliveries to local receivers, one failing until its batch is dead-lettered.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startReceiver, startTestService, waitFor, type Receiver, type TestService } from '../support/harness.js';

let svc: TestService;
let ok: Receiver;
let failing: Receiver;
let primary: string;
let sub: string;
let other: string;

before(async () => {
  ok = await startReceiver();
  failing = await startReceiver();
  failing.respond = () => ({ status: 503 });
  // One retry after about 3 s, then the batch is dead-lettered.
  svc = await startTestService({ env: { WEBHOOK_RETRY_SCHEDULE_MS: '3000' } });
  ({ apiKey: primary } = await svc.createAccount());
  ({ apiKey: other } = await svc.createAccount());
  const added = await svc.request('POST', '/v1/apikey/add', { body: { shared: true, currency: 'CZK' }, headers: { 'x-api-key': primary } });
  assert.equal(added.status, 200, added.text);
  sub = added.body.apikey as string;
});

after(async () => {
  await svc?.stop();
  await ok?.close();
  await failing?.close();
});

const get = (key: string | undefined, query = '') =>
  svc.request('GET', `/v1/webhooks/deliveries${query}`, { ...(key !== undefined && { headers: { 'x-api-key': key } }) });
const replay = (key: string, body: unknown) => svc.request('POST', '/v1/webhooks/replay', { body, headers: { 'x-api-key': key } });

async function send(key: string, callback: string, phone: string): Promise<void> {
  const res = await svc.request('POST', '/v2/message', { body: { body: 'hook', to: [{ phone_number: phone }], callback }, headers: { 'x-api-key': key } });
  assert.equal(res.status, 200, res.text);
}

test('a failing receiver: pending with its last error and next attempt, then dead; the sub-key sees its own, the primary key both', { timeout: 60_000 }, async () => {
  await send(sub, failing.url.replace('http://', 'http://user:pw@'), '420777200100');
  await send(primary, ok.url, '420777200200');

  const pending = await waitFor(async () => {
    const res = await get(sub, '?status=pending');
    const batch = res.body.deliveries?.find((d: { attempts: number; next_attempt_at: string | null }) => d.attempts === 1 && d.next_attempt_at);
    return batch ? { res, batch } : null;
  }, 20_000, 'a pending batch waiting out its retry');
  assert.equal(pending.res.status, 200);
  assert.equal(pending.res.body.success, true);
  const batch = pending.batch;
  assert.equal(batch.status, 'pending');
  assert.equal(batch.last_status, 503);
  assert.equal(batch.last_error, 'HTTP 503');
  assert.equal(batch.url, `${failing.url}/`, 'credentials are never shown');
  const due = Date.parse(batch.next_attempt_at) - Date.now();
  assert.ok(due > -5000 && due < 4000, `next attempt in ${due} ms (about 3 s after the first)`);
  assert.ok(batch.events >= 1);
  assert.match(batch.webhook_id, /^msg_/);

  const dead = await waitFor(async () => {
    const res = await get(sub, '?status=dead');
    return res.body.deliveries?.find((d: { id: number }) => d.id === batch.id);
  }, 20_000, 'the batch dead-lettered');
  assert.equal(dead.attempts, 2);
  assert.equal(dead.next_attempt_at, null);
  assert.ok(dead.dead_at);

  await waitFor(async () => (await get(primary, '?status=delivered')).body.deliveries.length > 0, 10_000, 'the primary key\'s delivery');
  // Under load one message's events may travel in more than one batch: the sub-key's are all to the failing receiver.
  const mine = (await get(sub)).body.deliveries as Array<{ id: number; url: string }>;
  const all = (await get(primary)).body.deliveries as Array<{ id: number; status: string; url: string }>;
  assert.ok(mine.some((d) => d.id === batch.id));
  assert.ok(mine.every((d) => d.url === `${failing.url}/`), 'a sub-key sees only its own');
  assert.ok(all.some((d) => d.id === batch.id) && all.some((d) => d.status === 'delivered' && d.url === `${ok.url}/`), 'the primary key sees its sub-keys\' too');
  assert.deepEqual((await get(other)).body.deliveries, [], 'another account sees nothing');
  assert.ok(all.every((d, i) => i === 0 || d.id < all[i - 1]!.id), 'newest first');
});

test('replay: own dead letters only, delivered again; pages with next_cursor', { timeout: 60_000 }, async () => {
  const [dead] = (await get(primary, '?status=dead')).body.deliveries as Array<{ id: number }>;
  assert.ok(dead);
  const refused = await replay(other, { id: dead.id });
  assert.equal(refused.status, 400);
  assert.deepEqual(refused.body, { success: false, message: `id: batch ${dead.id} is not one of your dead-lettered batches` });

  failing.respond = () => ({ status: 200 });
  await waitFor(async () => (await get(sub, '?status=pending')).body.deliveries.length === 0, 20_000, 'every batch of the sub-key settled');
  const deadOfSub = ((await get(sub, '?status=dead')).body.deliveries as Array<{ id: number }>).map((d) => d.id).sort((a, b) => a - b);
  const replayed = await replay(sub, { since: new Date(Date.now() - 3600_000).toISOString() });
  assert.equal(replayed.status, 200, replayed.text);
  assert.deepEqual(replayed.body, { success: true, replayed: deadOfSub.length, ids: deadOfSub });
  assert.ok(deadOfSub.includes(dead.id));
  const delivered = await waitFor(async () => (await get(sub, '?status=delivered')).body.deliveries.find((d: { id: number }) => d.id === dead.id), 15_000, 'the replayed batch delivered');
  assert.equal(delivered.attempts, 1, 'the replay starts its attempts anew');
  assert.equal((await replay(primary, { id: dead.id })).status, 400, 'no longer dead');

  const first = await get(primary, '?limit=1');
  assert.equal(first.body.deliveries.length, 1);
  assert.ok(first.body.next_cursor);
  const second = await get(primary, `?limit=1&cursor=${first.body.next_cursor}`);
  assert.equal(second.body.deliveries.length, 1);
  assert.ok(second.body.deliveries[0].id < first.body.deliveries[0].id);
});

test('REST auth and error shape: 401 without a key, 400 naming the field, 405 for another method', async () => {
  assert.deepEqual(await get(undefined).then((r) => [r.status, r.body]), [401, { success: false, message: 'Missing API key (header x-api-key)' }]);
  const badStatus = await get(primary, '?status=lost');
  assert.equal(badStatus.status, 400);
  assert.equal(badStatus.body.success, false);
  assert.match(badStatus.body.message, /^status: must be one of \[pending, delivered, dead\]/);
  assert.match((await get(primary, '?limit=1000')).body.message, /^limit: must be less than or equal to 200/);
  assert.match((await get(primary, '?colour=red')).body.message, /^colour: is not allowed/);
  assert.deepEqual((await replay(primary, {})).body, { success: false, message: 'body: give id or since' });
  assert.equal((await replay(primary, { id: 1, since: '2026-01-01T00:00:00Z' })).status, 400);
  // An instant Postgres cannot hold is the caller's mistake, named (it was a 500).
  for (const since of ['-004714-11-23T00:00:00Z', '+275760-09-13T00:00:00.000Z']) {
    const far = await replay(primary, { since });
    assert.equal(far.status, 400, far.text);
    assert.match(far.body.message, /^since: must be (greater|less) than or equal to/);
  }
  const wrongMethod = await svc.request('DELETE', '/v1/webhooks/deliveries', { headers: { 'x-api-key': primary } });
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.body.success, false);
});
