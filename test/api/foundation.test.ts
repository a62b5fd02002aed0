import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService, ADMIN_TOKEN } from '../support/harness.js';

let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(async () => {
  await svc.stop();
});

test('health answers 200 when Postgres and Redis answer', async () => {
  const res = await svc.request('GET', '/health');
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, { status: 'ok', postgres: 'ok', redis: 'ok' });
});

test('terminated Postgres connections, one of them in a transaction, do not take the service down', async () => {
  const held = await svc.runtime.db.connect(); // a worker in the middle of a transaction
  await held.query('BEGIN');
  const running = held.query('SELECT pg_sleep(5)').then(() => null, (err: unknown) => err);
  await new Promise((resolve) => setTimeout(resolve, 100));
  await svc.sql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                  WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = ''`);
  assert.ok((await running) instanceof Error, 'the statement running on it fails');
  await new Promise((resolve) => setTimeout(resolve, 100));
  held.release(); // the pool drops it
  await new Promise((resolve) => setTimeout(resolve, 100));
  const res = await svc.request('GET', '/health');
  assert.equal(res.status, 200, 'the pools opened new connections');
});

test('migrations ran from an empty database and installed a default price for every channel', async () => {
  const rows = await svc.sql<{ channel: string }>(`SELECT channel FROM prices WHERE prefix = '' ORDER BY channel`);
  assert.deepEqual(rows.map((r) => r.channel), ['sms', 'viber', 'whatsapp_template', 'whatsapp_text']);
  const applied = await svc.sql<{ name: string }>('SELECT name FROM schema_migrations');
  assert.ok(applied.length >= 1);
});

test('admin API refuses a missing or wrong token', async () => {
  const none = await svc.request('POST', '/admin/api/accounts', { body: { currency: 'CZK' } });
  assert.equal(none.status, 401);
  const wrong = await svc.request('POST', '/admin/api/accounts', { body: { currency: 'CZK' }, headers: { authorization: 'Bearer nope' } });
  assert.equal(wrong.status, 401);
  const ok = await svc.request('GET', '/admin/api/prices', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  // A misspelt filter is named, not ignored (every account's keys came back).
  const misspelt = await svc.request('GET', '/admin/api/keys?acount_id=2', { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(misspelt.status, 400, misspelt.text);
  assert.match(misspelt.body.message, /^acount_id: unknown query parameter \(allowed: account_id\)$/);
  // A misspelt body field is named as not allowed (it was reported as its right spelling missing).
  const typo = await svc.admin('PUT', '/prices', [{ channel: 'sms', prefx: '420', price_czk: 1, price_eur: 0.04 }]);
  assert.equal(typo.status, 400, typo.text);
  assert.match(typo.body.message, /^\[0\]\.prefx: is not allowed$/);
  // The scheme's name is case-insensitive (RFC 9110): it was refused with 401.
  assert.equal((await svc.request('GET', '/admin/api/prices', { headers: { authorization: `bearer ${ADMIN_TOKEN}` } })).status, 200);
  assert.equal((await svc.request('GET', '/admin/api/prices', { headers: { authorization: `BEARER ${ADMIN_TOKEN}` } })).status, 200);
  assert.equal(ok.status, 200);
});

test('accounts:create returns a key that is stored only as a hash with a short prefix', async () => {
  const res = await svc.admin('POST', '/accounts', { name: 'Acme', currency: 'EUR', credit_eur: 12.5, country: 'sk' });
  assert.equal(res.status, 201);
  assert.match(res.body.api_key, /^sb_[A-Za-z0-9_-]{32}$/);
  const [key] = await svc.sql<{ key_hash: Buffer; key_prefix: string }>('SELECT key_hash, key_prefix FROM api_keys WHERE account_id = $1', [res.body.account_id]);
  assert.ok(key);
  assert.equal(key.key_hash.length, 32);
  assert.equal(key.key_prefix, res.body.api_key.slice(0, 10));
  const dump = JSON.stringify(await svc.sql('SELECT * FROM api_keys'));
  assert.ok(!dump.includes(res.body.api_key), 'the clear key is stored nowhere');
  const account = await svc.admin('GET', `/accounts/${res.body.account_id}`);
  assert.equal(account.body.country, 'SK');
  assert.equal(account.body.credit_eur, 12.5);
});

test('admin validation names the field and refuses unknown fields', async () => {
  const bad = await svc.admin('POST', '/accounts', { currency: 'USD' });
  assert.equal(bad.status, 400);
  assert.match(bad.body.message, /^currency: /);
  const unknown = await svc.admin('POST', '/accounts', { currency: 'CZK', colour: 'red' });
  assert.equal(unknown.status, 400);
  assert.match(unknown.body.message, /colour/);
  const country = await svc.admin('POST', '/accounts', { currency: 'CZK', country: 'XX' });
  assert.equal(country.status, 400);
  assert.match(country.body.message, /^country/);
});

test('credit is added and may be taken back', async () => {
  const { accountId } = await svc.createAccount({ credit_czk: 10, credit_eur: 0 });
  const res = await svc.admin('POST', `/accounts/${accountId}/credit`, { czk: 5.25, eur: -1 });
  assert.equal(res.status, 200);
  assert.deepEqual(res.body, { credit_czk: 15.25, credit_eur: -1 });
  const missing = await svc.admin('POST', '/accounts/999999/credit', { czk: 1 });
  assert.equal(missing.status, 404);
});

test('account settings are patched and validated', async () => {
  const { accountId } = await svc.createAccount();
  const res = await svc.admin('PATCH', `/accounts/${accountId}`, { verification_attempts: 3, verification_template: 'Code: {code}', reply_window_days: 2 });
  assert.equal(res.status, 200);
  assert.equal(res.body.verification_attempts, 3);
  assert.equal(res.body.reply_window_days, 2);
  const bad = await svc.admin('PATCH', `/accounts/${accountId}`, { verification_template: 'no placeholder' });
  assert.equal(bad.status, 400);
  assert.match(bad.body.message, /^verification_template/);
});

test('an account\'s default_sender is what a step\'s sms.sender may be (it stands in for one)', async () => {
  const { accountId } = await svc.createAccount();
  for (const good of ['Shop', 'A&B shop.cz', '420777000111']) {
    const res = await svc.admin('PATCH', `/accounts/${accountId}`, { default_sender: good });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.default_sender, good);
  }
  // Each of these the sending API refuses as flow[0].sms.sender; as the default they were stored
  // and sent as the SMS sender (a 13-letter name, no letter at all, a + in a number).
  const rule = 'must be an alphanumeric name of at most 11 characters or a number of at most 15 digits without +';
  for (const bad of ['ABCDEFGHIJKLM', '-----', '+420777000111']) {
    const res = await svc.admin('PATCH', `/accounts/${accountId}`, { default_sender: bad });
    assert.equal(res.status, 400, `${bad}: ${res.text}`);
    assert.equal(res.body.message, `default_sender: ${rule}`);
    const created = await svc.admin('POST', '/accounts', { currency: 'CZK', default_sender: bad });
    assert.equal(created.status, 400, `${bad}: ${created.text}`);
    assert.equal(created.body.message, `default_sender: ${rule}`);
    const refused = await svc.request('POST', '/v2/message', { body: { body: 'x', to: [{ phone_number: '420777777777' }], flow: [{ sms: { sender: bad } }] }, headers: { 'x-api-key': (await svc.createAccount()).apiKey } });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.Message, `flow[0].sms.sender: ${rule}`);
  }
  assert.equal((await svc.admin('GET', `/accounts/${accountId}`)).body.default_sender, '420777000111');
});

test('prices are upserted and the longest prefix row is stored beside the default', async () => {
  const res = await svc.admin('PUT', '/prices', [{ channel: 'sms', prefix: '42060', price_czk: 2, price_eur: 0.08 }]);
  assert.deepEqual(res.body, { updated: 1 });
  const list = await svc.admin('GET', '/prices');
  assert.ok(list.body.prices.some((p: { prefix: string; price_czk: number }) => p.prefix === '42060' && p.price_czk === 2));
  const bad = await svc.admin('PUT', '/prices', [{ channel: 'fax', prefix: '1', price_czk: 1, price_eur: 1 }]);
  assert.equal(bad.status, 400);
  assert.match(bad.body.message, /channel/);
  // Two rows of one (channel, prefix, operator) in one call: named, nothing written (it was a 500).
  const twice = await svc.admin('PUT', '/prices', [{ channel: 'sms', prefix: '42061', price_czk: 0.9, price_eur: 0.036 }, { channel: 'sms', prefix: '42061', operator: 0, price_czk: 1.9, price_eur: 0.036 }]);
  assert.equal(twice.status, 400, twice.text);
  assert.equal(twice.body.message, '[1]: has the channel, prefix and operator of row 0');
  assert.ok(!(await svc.admin('GET', '/prices')).body.prices.some((p: { prefix: string }) => p.prefix === '42061'));
  // A fifth decimal is refused as credit amounts are, not rounded (0.00004 EUR was stored as a free 0).
  const fine = await svc.admin('PUT', '/prices', [{ channel: 'sms', prefix: '42062', price_czk: 0.12345, price_eur: 0.00004 }]);
  assert.equal(fine.status, 400, fine.text);
  assert.match(fine.body.message, /^\[0\]\.price_czk: must have no more than 4 decimal places/);
});

test('every sending API family refuses a bad key in its own form', async () => {
  const v2 = await svc.request('POST', '/v2/messages', { body: [{ body: 'x', to: [{ phone_number: '420777123456' }] }], headers: { 'x-api-key': 'sb_wrong' } });
  assert.equal(v2.status, 400);
  assert.deepEqual(v2.body, { Message: 'User is not authorized to access this resource with an explicit deny' });
  const missing = await svc.request('POST', '/v2/message', { body: { body: 'x', to: [{ phone_number: '420777123456' }] } });
  assert.equal(missing.status, 400);
  assert.deepEqual(missing.body, { Message: 'User is not authorized to access this resource with an explicit deny' });
  const v1 = await svc.request('POST', '/v1/messages', { body: [], headers: { 'x-api-key': 'nope' } });
  assert.deepEqual(v1.body, { Message: 'User is not authorized to access this resource with an explicit deny' });
  const simple = await svc.request('GET', '/v2/simple/message?apikey=nope&phone_number=420777123456&message=hi');
  assert.equal(simple.status, 400);
  assert.deepEqual(simple.body, { Message: 'User is not authorized to access this resource with an explicit deny' });
  const xml = await svc.request('POST', '/xml', { raw: 'apikey=nope&XMLDATA=' + encodeURIComponent('<RequestDocument><RequestList><Request Type="high"><Message Type="Text">hi</Message><NumbersList><Number>420777123456</Number></NumbersList></Request></RequestList></RequestDocument>'), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  assert.equal(xml.status, 401);
  assert.match(xml.text, /<Response Type="ERROR" ID="103"\/>/);
});

test('bull-board is behind the admin token', async () => {
  const res = await svc.request('GET', '/admin/queues');
  assert.equal(res.status, 401);
  const basic = Buffer.from(`admin:${ADMIN_TOKEN}`).toString('base64');
  const ok = await svc.request('GET', '/admin/queues', { headers: { authorization: `Basic ${basic}` } });
  assert.equal(ok.status, 200);
  assert.match(ok.text, /<html/i);

  // A change a cross-site page makes the browser send with its cached basic credentials is refused;
  // the same from the page itself, or from a client that is not a browser, reaches bull-board.
  const clean = '/admin/queues/api/queues/webhooks/clean/failed';
  const host = new URL(svc.url).host;
  for (const headers of [{ origin: 'https://evil.example' }, { 'sec-fetch-site': 'cross-site' }, { origin: 'null' }] as Array<Record<string, string>>) {
    const refused = await svc.request('PUT', clean, { headers: { authorization: `Basic ${basic}`, ...headers } });
    assert.equal(refused.status, 403, JSON.stringify(headers));
  }
  // The page itself behind a proxy that does not pass the public Host on: Sec-Fetch-Site is believed.
  for (const headers of [{ origin: `http://${host}`, 'sec-fetch-site': 'same-origin' }, { origin: 'https://queues.example', 'sec-fetch-site': 'same-origin' }, {}] as Array<Record<string, string>>) {
    const allowed = await svc.request('PUT', clean, { headers: { authorization: `Basic ${basic}`, ...headers } });
    assert.notEqual(allowed.status, 403, JSON.stringify(headers));
    assert.ok(allowed.status < 500, `${allowed.status} ${allowed.text}`);
  }
});
