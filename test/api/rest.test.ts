/**
 * REST API v1 (issue 6, D6): credit, sent-message listing, key settings and sub-keys, against the
 * real service (Postgres, Redis, workers, sandbox carrier). Everything a test needs is created
 * through the API; SQL only moves `created_at` for the day-boundary test and reads stored settings.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { startTestService, startReceiver, waitFor, type TestService, type TestResponse } from '../support/harness.js';

const NOT_AUTHORIZED = 'User is not authorized to access this resource with an explicit deny';
const RECORD_FIELDS = ['body', 'delivered', 'flow', 'message_id', 'message_parts', 'nondelivered', 'sender', 'sent', 'to', 'ts_delivered', 'ts_sent'];
const LIST_FIELDS = ['created_at', 'currency', 'default_callback_url', 'disabled', 'id', 'key_prefix', 'note', 'scope', 'shared'];

let svc: TestService;
let smsCzk = 0;
let smsEur = 0;

before(async () => {
  // Private callbacks are allowed in this service (the webhook receiver listens on 127.0.0.1); the
  // refusal of private addresses is tested against a second service started without them.
  svc = await startTestService({ env: { SANDBOX_SLOW_DELIVERY_MS: '300', ALLOW_PRIVATE_CALLBACKS: 'true' } });
  const prices = await svc.admin('GET', '/prices');
  const row = prices.body.prices.find((p: { channel: string; prefix: string; operator: number }) => p.channel === 'sms' && p.prefix === '420' && p.operator === 0);
  assert.ok(row, 'a price row for sms 420');
  smsCzk = row.price_czk;
  smsEur = row.price_eur;
});
after(async () => {
  await svc.stop();
});

const auth = (key: string) => ({ 'x-api-key': key });
const round4 = (x: number) => Math.round(x * 10000) / 10000;
const today = () => new Date().toISOString().slice(0, 10);

function get(key: string | null, path: string): Promise<TestResponse> {
  return svc.request('GET', path, key === null ? {} : { headers: auth(key) });
}
function post(key: string | null, path: string, body: unknown): Promise<TestResponse> {
  return svc.request('POST', path, { body, ...(key !== null && { headers: auth(key) }) });
}

/** Send message objects through `POST /v2/messages`; returns the per-recipient ids of each object. */
async function send(key: string, messages: Array<Record<string, unknown>>): Promise<string[][]> {
  const res = await post(key, '/v2/messages', messages);
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.body.rejected, []);
  return res.body.accepted.map((a: { key: string; message_id: string }) =>
    (messages[Number(a.key)]!.to as unknown[]).map((_, i) => `${a.message_id}-${i}`));
}
/** Send one message object with one recipient; returns that recipient's id. */
async function sendOne(key: string, message: Record<string, unknown>): Promise<string> {
  const [ids] = await send(key, [message]);
  assert.ok(ids?.[0]);
  return ids[0];
}
const sms = (body: string, numbers: string[], extra: Record<string, unknown> = {}) => ({ body, to: numbers.map((n) => ({ phone_number: n })), ...extra });

async function credit(key: string): Promise<{ credit_czk: number; credit_eur: number }> {
  const res = await get(key, '/v1/credit');
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.success, true);
  return res.body.credit;
}

async function waitCredit(key: string, expected: { credit_czk: number; credit_eur: number }, what: string): Promise<void> {
  await waitFor(async () => {
    const c = await credit(key);
    return round4(c.credit_czk) === round4(expected.credit_czk) && round4(c.credit_eur) === round4(expected.credit_eur);
  }, 10_000, what);
  assert.deepEqual(await credit(key), expected);
}

async function addSubKey(primary: string, body: Record<string, unknown>): Promise<{ apikey: string; id: number }> {
  const res = await post(primary, '/v1/apikey/add', body);
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(Object.keys(res.body).sort(), ['apikey', 'id', 'success']);
  assert.equal(res.body.success, true);
  return { apikey: res.body.apikey, id: res.body.id };
}

/** Every record of the day visible to `key` (following next_cursor), optionally filtered. */
async function listAll(key: string, query: string, limit = 1000): Promise<Array<Record<string, unknown>>> {
  const out: Array<Record<string, unknown>> = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const res = await get(key, `/v1/messages?${query}&limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    assert.equal(res.status, 200, res.text);
    out.push(...res.body.messages);
    cursor = res.body.next_cursor;
    if (cursor === null) {
      return out;
    }
  }
  throw new Error('too many pages');
}

test('GET /v1/credit: balances fall by the price table after sandbox sends, in CZK and in EUR', async () => {
  assert.equal(smsCzk, 0.9);
  assert.equal(smsEur, 0.036);
  const czk = await svc.createAccount({ currency: 'CZK', credit_czk: 100, credit_eur: 10 });
  const eur = await svc.createAccount({ currency: 'EUR', credit_czk: 50, credit_eur: 20 });
  assert.deepEqual(await credit(czk.apiKey), { credit_czk: 100, credit_eur: 10 });
  assert.deepEqual(await credit(eur.apiKey), { credit_czk: 50, credit_eur: 20 });

  // One single-part and one two-part SMS (161 GSM-7 characters): three parts per account.
  const long = 'x'.repeat(161);
  await send(czk.apiKey, [sms('hello', ['420777100100']), sms(long, ['420777100200'])]);
  await send(eur.apiKey, [sms('hello', ['420777100100']), sms(long, ['420777100200'])]);
  await waitCredit(czk.apiKey, { credit_czk: round4(100 - 3 * smsCzk), credit_eur: 10 }, 'CZK account charged');
  await waitCredit(eur.apiKey, { credit_czk: 50, credit_eur: round4(20 - 3 * smsEur) }, 'EUR account charged');

  const missing = await get(null, '/v1/credit');
  assert.equal(missing.status, 401);
  assert.equal(missing.body.success, false);
  assert.equal(typeof missing.body.message, 'string');
  const bad = await get('sb_not_a_key', '/v1/credit');
  assert.equal(bad.status, 401);
  assert.equal(bad.body.success, false);
  // Endpoints without query parameters name one they are given, as the others do (it was ignored).
  for (const path of ['/v1/credit?x=1', '/v1/credit?__proto__=1', '/v1/apikey/list?foo=1']) {
    const extra = await get(czk.apiKey, path);
    assert.equal(extra.status, 400, `${path}: ${extra.text}`);
    assert.match(extra.body.message, /^(x|__proto__|foo): unknown query parameter \(this endpoint takes none\)$/);
  }
});

test('shared sub-keys spend and show the account balance; own-credit sub-keys their own, in their currency', async () => {
  const acc = await svc.createAccount({ currency: 'CZK', credit_czk: 100, credit_eur: 10 });
  const shared = await addSubKey(acc.apiKey, { shared: true, currency: 'CZK', note: 'shared' });
  const ownEur = await addSubKey(acc.apiKey, { shared: false, currency: 'EUR', note: 'own eur' });
  const ownCzk = await addSubKey(acc.apiKey, { shared: false, currency: 'CZK' });

  assert.deepEqual(await credit(shared.apikey), { credit_czk: 100, credit_eur: 10 });
  assert.deepEqual(await credit(ownEur.apikey), { credit_czk: 0, credit_eur: 0 });
  const topUp = await svc.admin('POST', `/keys/${ownEur.id}/credit`, { amount: 2 });
  assert.equal(topUp.status, 200, topUp.text);
  assert.deepEqual(await credit(ownEur.apikey), { credit_czk: 0, credit_eur: 2 });

  await send(shared.apikey, [sms('from shared', ['420777110100'])]);
  await waitCredit(acc.apiKey, { credit_czk: round4(100 - smsCzk), credit_eur: 10 }, 'shared sub-key pays from the account');
  assert.deepEqual(await credit(shared.apikey), await credit(acc.apiKey));

  await send(ownEur.apikey, [sms('from own', ['420777110200'])]);
  await waitCredit(ownEur.apikey, { credit_czk: 0, credit_eur: round4(2 - smsEur) }, 'own-credit sub-key pays from its balance');
  assert.deepEqual(await credit(acc.apiKey), { credit_czk: round4(100 - smsCzk), credit_eur: 10 }, 'the account is untouched');

  // An own-credit sub-key with nothing on it cannot spend the account's money: [307] rejected.
  const rejected = await sendOne(ownCzk.apikey, sms('no money', ['420777110300']));
  await waitFor(async () => {
    const rows = await listAll(ownCzk.apikey, `date=${today()}`);
    return rows.length === 1 && rows[0]!.message_id === rejected && rows[0]!.nondelivered === 1;
  }, 10_000, 'rejected for insufficient credit');
  assert.deepEqual(await credit(ownCzk.apikey), { credit_czk: 0, credit_eur: 0 });
  assert.deepEqual(await credit(acc.apiKey), { credit_czk: round4(100 - smsCzk), credit_eur: 10 });
});

test('sub-keys: add, list, currency rule, primary only, input checks', async () => {
  const acc = await svc.createAccount({ currency: 'CZK' });
  const eurAcc = await svc.createAccount({ currency: 'EUR' });

  const wrongCurrency = await post(acc.apiKey, '/v1/apikey/add', { shared: true, currency: 'EUR' });
  assert.equal(wrongCurrency.status, 400);
  assert.equal(wrongCurrency.body.success, false);
  assert.match(wrongCurrency.body.message, /^currency: .*CZK/);
  assert.equal((await post(eurAcc.apiKey, '/v1/apikey/add', { shared: true, currency: 'CZK' })).status, 400);
  await addSubKey(eurAcc.apiKey, { shared: true, currency: 'EUR' });

  const a = await addSubKey(acc.apiKey, { shared: true, currency: 'CZK', note: 'web shop', default_callback_url: 'https://example.com/hooks' });
  const b = await addSubKey(acc.apiKey, { shared: false, currency: 'EUR' });
  assert.match(a.apikey, /^sb_[A-Za-z0-9_-]{32}$/);
  assert.notEqual(a.apikey, b.apikey);

  const list = await get(acc.apiKey, '/v1/apikey/list');
  assert.equal(list.status, 200);
  assert.equal(list.body.success, true);
  assert.equal(list.body.list.length, 2, 'sub-keys only, not the primary');
  for (const item of list.body.list) {
    assert.deepEqual(Object.keys(item).sort(), LIST_FIELDS);
    assert.equal(item.created_at, new Date(item.created_at).toISOString());
  }
  assert.deepEqual({ ...list.body.list[0], created_at: undefined }, {
    id: a.id, key_prefix: a.apikey.slice(0, 10), note: 'web shop', shared: true, currency: 'CZK',
    default_callback_url: 'https://example.com/hooks', disabled: false, scope: 'full', created_at: undefined,
  });
  assert.deepEqual({ ...list.body.list[1], created_at: undefined }, {
    id: b.id, key_prefix: b.apikey.slice(0, 10), note: '', shared: false, currency: 'EUR',
    default_callback_url: null, disabled: false, scope: 'full', created_at: undefined,
  });
  assert.ok(!list.text.includes(a.apikey) && !list.text.includes(b.apikey), 'keys are shown only once');

  // A sub-key manages nothing: 403, whatever the body.
  for (const [method, path, body] of [['POST', '/v1/apikey/add', { shared: true, currency: 'CZK' }], ['GET', '/v1/apikey/list', undefined],
    ['POST', '/v1/apikey/change', { id: b.id, disable: 1 }], ['POST', '/v1/apikey/add', '{oops']] as const) {
    const res = body === '{oops'
      ? await svc.request(method, path, { raw: body, headers: { ...auth(a.apikey), 'content-type': 'application/json' } })
      : await svc.request(method, path, { headers: auth(a.apikey), ...(body !== undefined && { body }) });
    assert.equal(res.status, 403, `${method} ${path}`);
    assert.equal(res.body.success, false);
  }

  const cases: Array<[unknown, RegExp]> = [
    [{ currency: 'CZK' }, /^shared: /],
    [{ shared: 'true', currency: 'CZK' }, /^shared: /],
    [{ shared: true }, /^currency: /],
    [{ shared: false, currency: 'USD' }, /^currency: /],
    [{ shared: true, currency: 'CZK', colour: 'red', size: 2 }, /colour, size/],
    [{ shared: true, currency: 'CZK', note: 5 }, /^note: /],
    [{ shared: true, currency: 'CZK', note: 'a\u0000b' }, /^note: /],
    [{ shared: true, currency: 'CZK', default_callback_url: 'ftp://example.com/x' }, /^default_callback_url: /],
    [[{ shared: true }], /^body: /],
    [null, /^body: /],
  ];
  for (const [body, message] of cases) {
    const res = await post(acc.apiKey, '/v1/apikey/add', body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(res.body.success, false);
    assert.match(res.body.message, message, JSON.stringify(body));
  }
  const malformed = await svc.request('POST', '/v1/apikey/add', { raw: '{"shared": true,', headers: { ...auth(acc.apiKey), 'content-type': 'application/json' } });
  assert.equal(malformed.status, 400);
  assert.equal(malformed.body.success, false);
  const badUtf8 = await svc.request('POST', '/v1/apikey/add', { raw: Buffer.from([0x7b, 0x22, 0x6e, 0x6f, 0x74, 0x65, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d]), headers: { ...auth(acc.apiKey), 'content-type': 'application/json' } });
  assert.equal(badUtf8.status, 400);
  assert.match(badUtf8.body.message, /UTF-8/);
  const wrongType = await svc.request('POST', '/v1/apikey/add', { raw: 'shared=true', headers: { ...auth(acc.apiKey), 'content-type': 'application/x-www-form-urlencoded' } });
  assert.equal(wrongType.status, 400);
  const duplicate = await svc.request('POST', '/v1/apikey/add', { raw: '{"shared": true, "currency": "CZK", "currency": "EUR"}', headers: { ...auth(acc.apiKey), 'content-type': 'application/json' } });
  assert.equal(duplicate.status, 400);

  // change: only the account's own sub-keys exist for it.
  const otherSub = await addSubKey(eurAcc.apiKey, { shared: false, currency: 'CZK' });
  const [primaryRow] = await svc.sql<{ id: number }>('SELECT id FROM api_keys WHERE account_id = $1 AND is_primary', [acc.accountId]);
  for (const id of [otherSub.id, primaryRow!.id, 99_999_999]) {
    const res = await post(acc.apiKey, '/v1/apikey/change', { id, disable: 1 });
    assert.equal(res.status, 404, `id ${id}`);
    assert.equal(res.body.success, false);
  }
  assert.equal((await credit(otherSub.apikey)).credit_czk, 0, 'the other account\'s sub-key still works');
  for (const [body, message] of [[{ id: a.id, disable: 2 }, /^disable: /], [{ id: 'x', disable: 1 }, /^id: /], [{ disable: 1 }, /^id: /],
    [{ id: a.id }, /^disable: /], [{ id: a.id, disable: 1, note: 'x' }, /note/]] as const) {
    const res = await post(acc.apiKey, '/v1/apikey/change', body);
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.match(res.body.message, message);
  }
});

test('a revoked sub-key is refused at once by every API family, and restoring it works', async () => {
  const acc = await svc.createAccount({ currency: 'CZK', credit_czk: 100 });
  const sub = await addSubKey(acc.apiKey, { shared: true, currency: 'CZK' });
  const message = [sms('hi', ['420777120100'])];
  const xmlDoc = '<RequestDocument><RequestList><Request Type="high"><Message Type="Text">hi</Message><NumbersList><Number>420777120100</Number></NumbersList></Request></RequestList></RequestDocument>';
  const xml = () => svc.request('POST', '/xml', { raw: `apikey=${encodeURIComponent(sub.apikey)}&XMLDATA=${encodeURIComponent(xmlDoc)}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  const simple = () => svc.request('GET', `/v2/simple/message?apikey=${encodeURIComponent(sub.apikey)}&phone_number=420777120100&message=hi`);

  // Warm every cache with the working key first: the revocation must still be seen on the next request.
  assert.equal((await get(sub.apikey, '/v1/credit')).status, 200);
  assert.equal((await post(sub.apikey, '/v2/messages', message)).status, 200);

  const revoke = await post(acc.apiKey, '/v1/apikey/change', { id: sub.id, disable: 1 });
  assert.equal(revoke.status, 200, revoke.text);
  assert.equal(revoke.body.success, true);

  const v2 = await post(sub.apikey, '/v2/messages', message);
  assert.equal(v2.status, 400);
  assert.deepEqual(v2.body, { Message: NOT_AUTHORIZED });
  const rest = await get(sub.apikey, '/v1/credit');
  assert.equal(rest.status, 401);
  assert.equal(rest.body.success, false);
  assert.equal((await get(sub.apikey, `/v1/messages?date=${today()}`)).status, 401);
  assert.equal((await post(sub.apikey, '/v1/apikey/update', { note: 'x' })).status, 401);
  const x = await xml();
  assert.equal(x.status, 401);
  assert.match(x.text, /<Response Type="ERROR" ID="103"\/>/);
  const s = await simple();
  assert.equal(s.status, 400);
  assert.deepEqual(s.body, { Message: NOT_AUTHORIZED });

  const listed = await get(acc.apiKey, '/v1/apikey/list');
  assert.equal(listed.body.list.find((k: { id: number }) => k.id === sub.id).disabled, true);

  const restore = await post(acc.apiKey, '/v1/apikey/change', { id: sub.id, disable: 0 });
  assert.equal(restore.status, 200);
  assert.equal((await get(sub.apikey, '/v1/credit')).status, 200);
  assert.equal((await post(sub.apikey, '/v2/messages', message)).status, 200);
  assert.equal((await simple()).status, 200);
  const again = await xml();
  assert.equal(again.status, 200, again.text);
  assert.match(again.text, /Type="OK"/);
  assert.equal((await get(acc.apiKey, '/v1/apikey/list')).body.list[0].disabled, false);
});

test('GET /v1/messages: one record per recipient with the spec fields, flags, flow and filters', async () => {
  const acc = await svc.createAccount({ currency: 'CZK', credit_czk: 100 });
  const numbers = ['420777200300', '420777200301', '420777200302', '420777200303', '420777200305'];
  const sent = await send(acc.apiKey, [
    sms('Hello REST', numbers, { tag: 'campaign-a', flow: [{ sms: { sender: 'Acme' } }] }),
    sms('Other', ['+420 777 200 300'], { tag: 'other' }),
    { body: 'Via viber first', to: [{ phone_number: '420777200404' }], flow: [{ viber: { sender: 'Acme', body: 'Viber text' } }, { sms: {} }] },
  ]);
  const [ids, other, fallback] = [sent[0]!, sent[1]![0]!, sent[2]![0]!];
  const date = `date=${today()}`;

  // `sent: null` for the 01 number: the sandbox reports `sent` then `undelivered` 30 ms apart, and
  // the status workers may apply the second before the first (sending → undelivered directly, the
  // late `sent` dropped as a step back), so whether it "reached sent" is not deterministic yet.
  // The record must still agree with itself (sent ⇔ ts_sent), checked below.
  const expected: Record<string, { sent: number | null; delivered: number; nondelivered: number }> = {
    [ids[0]!]: { sent: 1, delivered: 1, nondelivered: 0 },
    [ids[1]!]: { sent: null, delivered: 0, nondelivered: 1 },
    [ids[2]!]: { sent: 0, delivered: 0, nondelivered: 1 },
    [ids[3]!]: { sent: 1, delivered: 0, nondelivered: 0 },
    [ids[4]!]: { sent: 0, delivered: 0, nondelivered: 1 },
    [other]: { sent: 1, delivered: 1, nondelivered: 0 },
    [fallback]: { sent: 1, delivered: 1, nondelivered: 0 },
  };
  const rows = await waitFor(async () => {
    const list = await listAll(acc.apiKey, date);
    const done = list.length === 7 && list.every((r) => {
      const e = expected[r.message_id as string];
      return e && (e.sent === null || r.sent === e.sent) && r.delivered === e.delivered && r.nondelivered === e.nondelivered;
    });
    return done ? list : null;
  }, 15_000, 'every recipient at its sandbox outcome');

  const byId = new Map(rows.map((r) => [r.message_id as string, r]));
  for (const r of rows) {
    assert.deepEqual(Object.keys(r).sort(), RECORD_FIELDS);
    assert.equal(r.sent, (r.ts_sent as number) > 0 ? 1 : 0, 'sent ⇔ ts_sent');
    assert.equal(r.delivered, (r.ts_delivered as number) > 0 ? 1 : 0, 'delivered ⇔ ts_delivered');
  }
  const now = Math.floor(Date.now() / 1000);
  const delivered = byId.get(ids[0]!)!;
  assert.equal(delivered.to, '420777200300');
  assert.equal(delivered.body, 'Hello REST');
  assert.equal(delivered.sender, 'Acme');
  assert.equal(delivered.flow, 'sms');
  assert.equal(delivered.message_parts, 1);
  assert.ok(Number.isInteger(delivered.ts_sent) && (delivered.ts_sent as number) > now - 60 && (delivered.ts_sent as number) <= now);
  assert.ok((delivered.ts_delivered as number) >= (delivered.ts_sent as number));
  assert.equal(byId.get(ids[1]!)!.ts_delivered, 0);
  assert.equal(byId.get(ids[2]!)!.ts_sent, 0);
  assert.equal(byId.get(ids[3]!)!.ts_delivered, 0);
  assert.equal(byId.get(other)!.sender, 'Info', 'the service default sender');
  const viaViber = byId.get(fallback)!;
  assert.equal(viaViber.flow, 'viber,sms', 'the gateways attempted, in order');
  assert.equal(viaViber.to, '420777200404');
  assert.deepEqual(rows.map((r) => r.message_id), [...ids, other, fallback], 'in sending order');

  const tagged = await get(acc.apiKey, `/v1/messages?${date}&tag=other`);
  assert.equal(tagged.status, 200);
  assert.deepEqual(tagged.body.messages.map((r: { message_id: string }) => r.message_id), [other]);
  assert.equal(tagged.body.next_cursor, null);
  assert.equal((await listAll(acc.apiKey, `${date}&tag=campaign-a`)).length, 5);
  assert.equal((await listAll(acc.apiKey, `${date}&tag=nothing`)).length, 0);
  for (const phone of ['420777200300', '%2B420%20777%20200%20300', '777200300']) {
    const res = await get(acc.apiKey, `/v1/messages?${date}&phone_number=${phone}`);
    assert.deepEqual(res.body.messages.map((r: { message_id: string }) => r.message_id), [ids[0], other], phone);
  }
  const both = await get(acc.apiKey, `/v1/messages?${date}&phone_number=420777200300&tag=campaign-a`);
  assert.deepEqual(both.body.messages.map((r: { message_id: string }) => r.message_id), [ids[0]]);
  const empty = await get(acc.apiKey, '/v1/messages?date=2001-01-01');
  assert.deepEqual(empty.body, { success: true, messages: [], next_cursor: null });

  // POST on the same path is still the legacy sending API (method decides, D1).
  const legacy = await post(acc.apiKey, '/v1/messages', [sms('legacy', ['420777200900'])]);
  assert.equal(legacy.status, 200, legacy.text);
  assert.ok(legacy.body.requestId);
  assert.equal(legacy.body.accepted[0].key, '0');
});

test('GET /v1/messages refuses bad query parameters with 400 naming them', async () => {
  const acc = await svc.createAccount();
  const cases: Array<[string, RegExp]> = [
    ['', /^date: /],
    ['date=', /^date: /],
    ['date=2024-02-30', /^date: /],
    ['date=24-02-01', /^date: /],
    ['date=2024-01-01&date=2024-01-02', /^date: /],
    ['date=2024-01-01&limit=0', /^limit: /],
    ['date=2024-01-01&limit=1001', /^limit: /],
    ['date=2024-01-01&limit=ten', /^limit: /],
    ['date=2024-01-01&limit=1.5', /^limit: /],
    ['date=2024-01-01&cursor=garbage!', /^cursor: /],
    [`date=2024-01-01&cursor=${Buffer.from('2024-13-01T00:00:00.000000Z|5').toString('base64url')}`, /^cursor: /],
    [`date=2024-01-01&cursor=${Buffer.from('hello|5').toString('base64url')}`, /^cursor: /],
    [`date=2024-01-01&cursor=${Buffer.from('0000-01-01T00:00:00.000000Z|5').toString('base64url')}`, /^cursor: /],
    ['date=2024-01-01&tag=%00', /^tag: /],
    ['date=2024-01-01&tag=', /^tag: /],
    ['date=2024-01-01&phone_number=' + '1'.repeat(65), /^phone_number: /],
    ['date=2024-01-01&foo=1&apikey=x', /foo, apikey/],
  ];
  for (const [query, message] of cases) {
    const res = await get(acc.apiKey, `/v1/messages?${query}`);
    assert.equal(res.status, 400, query);
    assert.equal(res.body.success, false);
    assert.match(res.body.message, message, query);
  }
  assert.equal((await get(null, '/v1/messages?date=2024-01-01')).status, 401);
  const wrongMethod = await svc.request('DELETE', '/v1/messages?date=2024-01-01', { headers: auth(acc.apiKey) });
  assert.equal(wrongMethod.status, 405);
  assert.equal(wrongMethod.body.success, false);
  assert.equal((await get(acc.apiKey, '/v1/messages?date=2024-01-01&limit=1000')).status, 200);
});

test('GET /v1/messages: the UTC day boundary is exact, and the cursor keeps microseconds and ties', async () => {
  const acc = await svc.createAccount({ currency: 'CZK', credit_czk: 100 });
  const [ids] = await send(acc.apiKey, [sms('boundary', Array.from({ length: 9 }, (_, i) => `42077750010${i}`))]);
  assert.ok(ids);
  const at = [
    '2024-03-10 23:59:59.9+00', // 0: last instant of the 10th (well, nearly)
    '2024-03-11 00:00:00.0+00', // 1: first instant of the 11th
    '2024-03-10 00:00:00.0+00', // 2: first instant of the 10th
    '2024-03-09 23:59:59.999999+00', // 3: last microsecond of the 9th
    '2024-03-11 23:59:59.999999+00', // 4: last microsecond of the 11th
    '2024-03-12 00:00:00+00', // 5
    '2024-03-13 12:00:00.123456+00', // 6 and 7: the same instant (ties broken by id)
    '2024-03-13 12:00:00.123456+00',
    '2024-03-13 12:00:00.123457+00', // 8: one microsecond later
  ];
  for (const [i, id] of ids.entries()) {
    await svc.sql('UPDATE recipients SET created_at = $2 WHERE public_id = $1', [id, at[i]]);
  }
  const day = async (date: string) => (await listAll(acc.apiKey, `date=${date}`)).map((r) => r.message_id);
  assert.deepEqual(await day('2024-03-09'), [ids[3]]);
  assert.deepEqual(await day('2024-03-10'), [ids[2], ids[0]]);
  assert.deepEqual(await day('2024-03-11'), [ids[1], ids[4]]);
  assert.deepEqual(await day('2024-03-12'), [ids[5]]);
  // One per page: the cursor must not skip the tie or the next microsecond.
  assert.deepEqual((await listAll(acc.apiKey, 'date=2024-03-13', 1)).map((r) => r.message_id), [ids[6], ids[7], ids[8]]);
});

test('GET /v1/messages: a key sees its own messages, the primary its sub-keys\' too, and accounts are apart', async () => {
  const a = await svc.createAccount({ currency: 'CZK', credit_czk: 100 });
  const b = await svc.createAccount({ currency: 'CZK', credit_czk: 100 });
  const s1 = await addSubKey(a.apiKey, { shared: true, currency: 'CZK' });
  const s2 = await addSubKey(a.apiKey, { shared: true, currency: 'CZK' });
  const fromA = await sendOne(a.apiKey, sms('a', ['420777600100']));
  const fromS1 = await sendOne(s1.apikey, sms('s1', ['420777600200']));
  const fromS2 = await sendOne(s2.apikey, sms('s2', ['420777600300']));
  const fromB = await sendOne(b.apiKey, sms('b', ['420777600100']));
  const ids = async (key: string, query = '') => (await listAll(key, `date=${today()}${query}`)).map((r) => r.message_id).sort();

  assert.deepEqual(await ids(a.apiKey), [fromA, fromS1, fromS2].sort());
  assert.deepEqual(await ids(s1.apikey), [fromS1]);
  assert.deepEqual(await ids(s2.apikey), [fromS2]);
  assert.deepEqual(await ids(b.apiKey), [fromB]);
  assert.deepEqual(await ids(b.apiKey, '&phone_number=420777600100'), [fromB]);
  assert.deepEqual(await ids(s1.apikey, '&phone_number=420777600300'), [], 'a sibling\'s number finds nothing');
});

test('POST /v1/apikey/update: settings are checked, stored, cleared; the default callback receives events', async () => {
  const receiver = await startReceiver();
  try {
    const acc = await svc.createAccount({ currency: 'CZK', credit_czk: 100 });
    const secret = `whsec_${Buffer.alloc(32, 7).toString('base64')}`;
    const url = `${receiver.url}/hooks/main`;
    const ok = await post(acc.apiKey, '/v1/apikey/update', { default_callback_url: url, note: 'main key', webhook_secret: secret });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.body, { success: true });
    const [stored] = await svc.sql('SELECT default_callback_url, note, webhook_secret, webhook_secret_sealed IS NOT NULL AS sealed FROM api_keys WHERE account_id = $1 AND is_primary', [acc.accountId]);
    // The secret is kept sealed (D12, migration 032), never in clear; the signature below shows it is the one given.
    assert.deepEqual(stored, { default_callback_url: url, note: 'main key', webhook_secret: null, sealed: true });

    // A message without `callback` falls back to the key's default URL (D4), signed with its secret.
    const id = await sendOne(acc.apiKey, sms('callback fallback', ['420777700100']));
    const events = await waitFor(() => {
      const mine = receiver.events().filter((e) => e.message_id === id);
      return mine.some((e) => e.result === 'delivered') ? mine : null;
    }, 10_000, 'sentMessage events at the default callback');
    assert.deepEqual(events.map((e) => e.result), ['sending', 'sent', 'delivered']);
    assert.ok(events.every((e) => e.type === 'outgoing' && e.to.phone_number === '420777700100'));
    const request = receiver.requests.find((r) => r.events.some((e) => e.message_id === id))!;
    assert.equal(request.path, '/hooks/main');
    new Webhook(secret).verify(request.body, request.headers as Record<string, string>);

    // Bad input: 400 naming the field, nothing changed.
    const cases: Array<[unknown, RegExp]> = [
      [{ default_callback_url: 'ftp://example.com/x' }, /^default_callback_url: .*http/],
      [{ default_callback_url: `https://example.com/${'a'.repeat(2030)}` }, /^default_callback_url: .*2048/],
      [{ default_callback_url: 'not a url' }, /^default_callback_url: /],
      [{ default_callback_url: 42 }, /^default_callback_url: /],
      [{ webhook_secret: 'secret' }, /^webhook_secret: /],
      [{ webhook_secret: `whsec_${Buffer.alloc(16, 1).toString('base64')}` }, /^webhook_secret: /],
      [{ webhook_secret: 7 }, /^webhook_secret: /],
      [{ note: ['x'] }, /^note: /],
      [{ note: 'x'.repeat(256) }, /^note: /],
      [{ note: 'ok', callback: 'https://example.com' }, /^callback: /],
      [{}, /^body: /],
      ['note', /^body: /],
    ];
    for (const [body, message] of cases) {
      const res = await post(acc.apiKey, '/v1/apikey/update', body);
      assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
      assert.equal(res.body.success, false);
      assert.match(res.body.message, message);
    }
    const malformed = await svc.request('POST', '/v1/apikey/update', { raw: '{"note": ', headers: { ...auth(acc.apiKey), 'content-type': 'application/json' } });
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.success, false);
    const badUtf8 = await svc.request('POST', '/v1/apikey/update', { raw: Buffer.concat([Buffer.from('{"note":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]), headers: { ...auth(acc.apiKey), 'content-type': 'application/json' } });
    assert.equal(badUtf8.status, 400);
    assert.equal(badUtf8.body.success, false);
    assert.deepEqual((await svc.sql('SELECT default_callback_url, note, webhook_secret, webhook_secret_sealed IS NOT NULL AS sealed FROM api_keys WHERE account_id = $1 AND is_primary', [acc.accountId]))[0], stored);

    // null and "" clear the URL and the secret; a note alone leaves them as they are.
    assert.equal((await post(acc.apiKey, '/v1/apikey/update', { note: 'renamed' })).status, 200);
    assert.equal((await post(acc.apiKey, '/v1/apikey/update', { default_callback_url: null, webhook_secret: '' })).status, 200);
    const [cleared] = await svc.sql('SELECT default_callback_url, note, webhook_secret, webhook_secret_sealed IS NOT NULL AS sealed FROM api_keys WHERE account_id = $1 AND is_primary', [acc.accountId]);
    assert.deepEqual(cleared, { default_callback_url: null, note: 'renamed', webhook_secret: null, sealed: false });
    const quiet = await sendOne(acc.apiKey, sms('no callback now', ['420777700200']));
    const kept = await waitFor(async () => {
      const rows = await svc.sql<{ callback_url: string | null; body: string }>(
        'SELECT e.callback_url, e.body FROM events e JOIN recipients r ON r.id = e.recipient_id WHERE r.public_id = $1', [quiet]);
      return rows.some((r) => JSON.parse(r.body).result === 'delivered') ? rows : null;
    }, 10_000, 'events kept without a callback');
    assert.ok(kept.every((r) => r.callback_url === null));

    // A sub-key's own default callback: set by the sub-key itself.
    const sub = await addSubKey(acc.apiKey, { shared: true, currency: 'CZK' });
    assert.equal((await post(sub.apikey, '/v1/apikey/update', { default_callback_url: `${receiver.url}/hooks/sub` })).status, 200);
    const fromSub = await sendOne(sub.apikey, sms('sub callback', ['420777700300']));
    await waitFor(() => receiver.requests.some((r) => r.path === '/hooks/sub' && r.events.some((e) => e.message_id === fromSub && e.result === 'delivered')),
      10_000, 'the sub-key default callback');
    assert.ok(!receiver.events().some((e) => e.message_id === quiet), 'nothing sent once the URL is cleared');
  } finally {
    await receiver.close();
  }
});

test('private and loopback callback URLs are refused with 400 when private callbacks are off (D4)', async () => {
  const web = await startTestService({ role: 'web', env: { ALLOW_PRIVATE_CALLBACKS: 'false' } });
  try {
    const { apiKey } = await web.createAccount();
    for (const url of ['http://127.0.0.1:8080/hook', 'http://10.1.2.3/hook', 'http://localhost/hook', 'http://[::1]/hook', 'http://169.254.169.254/latest', 'http://[::ffff:192.168.0.1]/']) {
      const res = await web.request('POST', '/v1/apikey/update', { body: { default_callback_url: url }, headers: auth(apiKey) });
      assert.equal(res.status, 400, url);
      assert.match(res.body.message, /^default_callback_url: /, url);
      const add = await web.request('POST', '/v1/apikey/add', { body: { shared: true, currency: 'CZK', default_callback_url: url }, headers: auth(apiKey) });
      assert.equal(add.status, 400, url);
      assert.match(add.body.message, /^default_callback_url: /);
    }
    const ok = await web.request('POST', '/v1/apikey/update', { body: { default_callback_url: 'https://hooks.example.com/switchboard' }, headers: auth(apiKey) });
    assert.equal(ok.status, 200, ok.text);
  } finally {
    await web.stop();
  }
});

test('GET /v1/messages pages through 2,500 recipients without gaps or repeats', async () => {
  const acc = await svc.createAccount({ currency: 'CZK', credit_czk: 10_000 });
  const expected: string[] = [];
  const calls = Array.from({ length: 25 }, (_, c) => Array.from({ length: 10 }, (_, m) =>
    sms(`bulk ${c}/${m}`, Array.from({ length: 10 }, (_, r) => `4207773${String(c * 100 + m * 10 + r).padStart(5, '0')}`))));
  for (let i = 0; i < calls.length; i += 5) {
    const results = await Promise.all(calls.slice(i, i + 5).map((messages) => send(acc.apiKey, messages)));
    for (const objects of results) {
      expected.push(...objects.flat());
    }
  }
  assert.equal(expected.length, 2500);

  for (const limit of [333, 500]) {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: TestResponse = await get(acc.apiKey, `/v1/messages?date=${today()}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(res.status, 200, res.text);
      pages++;
      assert.ok(res.body.messages.length > 0, 'no empty trailing page');
      assert.ok(res.body.messages.length === limit || res.body.next_cursor === null, 'only the last page is short');
      seen.push(...res.body.messages.map((r: { message_id: string }) => r.message_id));
      cursor = res.body.next_cursor;
    } while (cursor !== null);
    assert.equal(pages, Math.ceil(2500 / limit));
    assert.equal(seen.length, 2500, `limit ${limit}`);
    assert.equal(new Set(seen).size, 2500, 'no repeats');
    assert.deepEqual([...seen].sort(), [...expected].sort(), 'no gaps');
  }
  const first = await get(acc.apiKey, `/v1/messages?date=${today()}`);
  assert.equal(first.body.messages.length, 100, 'default limit');

  // The page query is one range scan of the account index, bounded by the page size.
  const [plan] = await svc.sql<{ 'QUERY PLAN': unknown }>(
    `EXPLAIN (FORMAT JSON) SELECT r.id FROM recipients r WHERE r.account_id = $1 AND r.created_at >= $2 AND r.created_at < $3
      AND (r.created_at, r.id) > ($2::timestamptz, 0::bigint) ORDER BY r.created_at, r.id LIMIT 101`,
    [acc.accountId, new Date(`${today()}T00:00:00Z`), new Date(Date.parse(`${today()}T00:00:00Z`) + 86_400_000)],
  );
  assert.match(JSON.stringify(plan), /recipients_account_day/);
  assert.doesNotMatch(JSON.stringify(plan), /"Sort"/);
});
