/**
 * The sending ingress over HTTP (issue 3): JSON API v2 (`/v2/messages`, `/v2/message`), the simple
 * endpoints, legacy JSON v1, against the running service with real Postgres and Redis. Contract:
 * the spec's "Resources and their fields", "Endpoints", "Authentication", "Errors", "Limits" and
 * decisions D2 and D9.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { startTestService, waitFor, type TestService, type TestResponse } from '../support/harness.js';
import { clearKeyCache } from '../../shared/domain/keys.js';

const NOT_AUTHORIZED = { Message: 'User is not authorized to access this resource with an explicit deny' };
/** D2: accepted with ids, never sent, never charged, no webhooks. Used wherever delivery is not under test. */
const TEST_NUMBER = '420777777777';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const OWN_ID = /^[0-9a-f]{20}$/;

let svc: TestService;
let apiKey: string;

before(async () => {
  svc = await startTestService();
  apiKey = (await svc.createAccount({ country: 'CZ' })).apiKey;
});
after(async () => {
  await svc.settle();
  await svc.stop();
});

const to = (...numbers: string[]) => numbers.map((phone_number) => ({ phone_number }));
const valid = (extra: Record<string, unknown> = {}) => ({ body: 'hello', to: to(TEST_NUMBER), ...extra });

function post(path: string, body: unknown, key: string | null = apiKey): Promise<TestResponse> {
  return svc.request('POST', path, { body, headers: key === null ? {} : { 'x-api-key': key } });
}

function postRaw(path: string, raw: string | Buffer, headers: Record<string, string> = {}, key: string | null = apiKey): Promise<TestResponse> {
  return svc.request('POST', path, { raw, headers: { ...(key !== null && { 'x-api-key': key }), ...headers } });
}

const jsonType = { 'content-type': 'application/json' };
const formType = { 'content-type': 'application/x-www-form-urlencoded' };

async function counts(): Promise<{ messages: number; recipients: number }> {
  const [row] = await svc.sql<{ messages: number; recipients: number }>(
    'SELECT (SELECT count(*) FROM messages)::int AS messages, (SELECT count(*) FROM recipients)::int AS recipients');
  return row!;
}

function isoIn(ms: number): string {
  return new Date(Date.now() + ms).toISOString();
}
const DAY = 24 * 3600 * 1000;

// ---------------------------------------------------------------------------------------------
// Response shapes and ids
// ---------------------------------------------------------------------------------------------

test('POST /v2/messages: request_id, one message_id per object, recipients <message_id>-<index> in the recipients table', async () => {
  const res = await post('/v2/messages', [
    { body: 'first', to: to(TEST_NUMBER, TEST_NUMBER, TEST_NUMBER) },
    { body: 'second', to: to(TEST_NUMBER) },
  ]);
  assert.equal(res.status, 200);
  assert.deepEqual(Object.keys(res.body).sort(), ['accepted', 'rejected', 'request_id']);
  assert.match(res.body.request_id, UUID);
  assert.deepEqual(res.body.rejected, []);
  assert.equal(res.body.accepted.length, 2);
  assert.deepEqual(res.body.accepted.map((a: { key: string }) => a.key), ['0', '1']);
  for (const a of res.body.accepted) {
    assert.deepEqual(Object.keys(a).sort(), ['key', 'message_id']);
    assert.equal(typeof a.message_id, 'string');
  }
  const [first, second] = res.body.accepted as Array<{ message_id: string }>;
  assert.notEqual(first!.message_id, second!.message_id);
  const messages = await svc.sql<{ id: string; request_id: string; body: string; source: string }>(
    'SELECT id, request_id, body, source FROM messages WHERE id = ANY($1) ORDER BY body', [[first!.message_id, second!.message_id]]);
  assert.deepEqual(messages.map((m) => [m.id, m.request_id, m.body, m.source]), [
    [first!.message_id, res.body.request_id, 'first', 'v2'],
    [second!.message_id, res.body.request_id, 'second', 'v2'],
  ]);
  const recipients = await svc.sql<{ public_id: string; message_id: string; idx: number }>(
    'SELECT public_id, message_id, idx FROM recipients WHERE message_id = ANY($1) ORDER BY message_id, idx', [[first!.message_id, second!.message_id]]);
  const expected = [
    ...[0, 1, 2].map((i) => ({ public_id: `${first!.message_id}-${i}`, message_id: first!.message_id, idx: i })),
    { public_id: `${second!.message_id}-0`, message_id: second!.message_id, idx: 0 },
  ].sort((a, b) => a.message_id.localeCompare(b.message_id) || a.idx - b.idx);
  assert.deepEqual(recipients, expected);
});

test('POST /v2/messages: large calls beyond the waiting budget get 429 with Retry-After and nothing of them is accepted', async () => {
  const small = await startTestService({ env: { ACCEPT_LARGE_CALL_CONCURRENCY: '1', ACCEPT_LARGE_CALL_CONCURRENCY_ALONE: '1', ACCEPT_LARGE_CALL_BACKLOG_MB: '1' } });
  try {
    const key = (await small.createAccount({ country: 'CZ' })).apiKey;
    // 40 calls of ~250 KB (whitespace is JSON too) against one turn and 1 MB of waiting bodies.
    const raw = (k: number) => `${JSON.stringify(Array.from({ length: 10 }, (_, m) => ({ body: `big ${k}.${m}`, to: to(TEST_NUMBER, TEST_NUMBER) })))}${' '.repeat(250_000)}`;
    const calls = await Promise.all(Array.from({ length: 40 }, (_, k) =>
      small.request('POST', '/v2/messages', { raw: raw(k), headers: { ...jsonType, 'x-api-key': key } })));
    const refused = calls.filter((c) => c.status === 429);
    const accepted = calls.filter((c) => c.status === 200);
    assert.equal(refused.length + accepted.length, calls.length, `only 200 and 429: ${calls.map((c) => c.status).join(',')}`);
    assert.ok(refused.length >= 1, 'some calls found the waiting budget spent');
    assert.ok(accepted.length >= 2, 'calls within the budget were accepted');
    for (const c of refused) {
      assert.equal(c.headers['retry-after'], '1');
      assert.match(c.body.Message, /Too many large requests are waiting/);
    }
    const [row] = await small.sql<{ messages: number; recipients: number }>(
      'SELECT (SELECT count(*) FROM messages)::int AS messages, (SELECT count(*) FROM recipients)::int AS recipients');
    assert.deepEqual(row, { messages: accepted.length * 10, recipients: accepted.length * 20 }, 'exactly the accepted calls were written');
  } finally {
    await small.settle();
    await small.stop();
  }
});

test('POST /v2/messages: large calls (over 2 KB, which take turns) and small ones side by side get the same answers', async () => {
  const large = (k: number) => Array.from({ length: 10 }, (_, m) => ({ body: `large ${k}.${m}`, to: to(...Array.from({ length: 10 }, () => TEST_NUMBER)) }));
  assert.ok(Buffer.byteLength(JSON.stringify(large(0))) > 2048);
  const calls = await Promise.all([
    ...Array.from({ length: 6 }, (_, k) => post('/v2/messages', large(k))),
    post('/v2/messages', [{ body: 'small', to: to(TEST_NUMBER) }]),
    post('/v2/messages', { body: 'x'.repeat(3000), to: to(TEST_NUMBER) }),
    post('/v2/messages', [...large(9).slice(0, 9), { body: '', to: to(TEST_NUMBER) }]),
  ]);
  for (const res of calls.slice(0, 7)) {
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.rejected, []);
  }
  assert.equal(calls.slice(0, 6).reduce((n, res) => n + res.body.accepted.length, 0), 60);
  assert.equal(calls[7]!.status, 400, 'a large body that is not an array');
  assert.match(calls[7]!.text, /JSON array of message objects/);
  assert.equal(calls[8]!.status, 200, calls[8]!.text);
  assert.equal(calls[8]!.body.accepted.length, 9);
  assert.deepEqual(calls[8]!.body.rejected.map((r: { key: string }) => r.key), ['9'], 'the bad object of a large call is named');
});

test('POST /v2/message: key is the recipient index and every recipient gets its own id (no -<index>)', async () => {
  const res = await post('/v2/message', { body: 'single', to: to(TEST_NUMBER, TEST_NUMBER, TEST_NUMBER) });
  assert.equal(res.status, 200);
  assert.match(res.body.request_id, UUID);
  assert.deepEqual(res.body.rejected, []);
  assert.deepEqual(res.body.accepted.map((a: { key: string }) => a.key), ['0', '1', '2']);
  const ids = res.body.accepted.map((a: { message_id: string }) => a.message_id) as string[];
  assert.equal(new Set(ids).size, 3);
  for (const id of ids) {
    assert.match(id, OWN_ID);
  }
  const rows = await svc.sql<{ public_id: string; idx: number; message_id: string }>(
    'SELECT public_id, idx, message_id FROM recipients WHERE public_id = ANY($1) ORDER BY idx', [ids]);
  assert.deepEqual(rows.map((r) => [r.public_id, r.idx]), ids.map((id, i) => [id, i]));
  assert.equal(new Set(rows.map((r) => r.message_id)).size, 1, 'one message object, three recipients');
  const [msg] = await svc.sql<{ request_id: string }>('SELECT request_id FROM messages WHERE id = $1', [rows[0]!.message_id]);
  assert.equal(msg!.request_id, res.body.request_id);
});

test('POST /v2/message: any error in the object is a whole-request 400 {Message} naming the field, and nothing is written', async () => {
  const before = await counts();
  const cases: Array<[unknown, RegExp]> = [
    [{ body: 'x', to: [] }, /^to: /],
    [{ body: 'x', to: to(...Array<string>(11).fill(TEST_NUMBER)) }, /^to: .*10/],
    [{ to: to(TEST_NUMBER) }, /^body: /],
    [{ body: 'x'.repeat(1001), to: to(TEST_NUMBER) }, /^body: .*1000/],
    [{ body: 'x', to: to(TEST_NUMBER), flow: [{ sms: { ttl: '5' } }] }, /^flow\[0\]\.sms\.ttl: /],
    [{ body: 'x', to: to(TEST_NUMBER), datetime: 'soon' }, /^datetime: /],
    [[{ body: 'x', to: to(TEST_NUMBER) }], /object/],
    ['text', /object/],
    [null, /object/],
  ];
  for (const [body, message] of cases) {
    const res = await post('/v2/message', body);
    assert.equal(res.status, 400, JSON.stringify(body).slice(0, 80));
    assert.deepEqual(Object.keys(res.body), ['Message']);
    assert.match(res.body.Message, message);
  }
  const ten = await post('/v2/message', { body: 'x', to: to(...Array<string>(10).fill(TEST_NUMBER)) });
  assert.equal(ten.status, 200);
  assert.equal(ten.body.accepted.length, 10);
  const afterCounts = await counts();
  assert.deepEqual(afterCounts, { messages: before.messages + 1, recipients: before.recipients + 10 });
});

test('legacy POST /v1/messages: the v2 batch contract in camelCase (requestId, accepted[].messageId, rejected[].key)', async () => {
  const res = await post('/v1/messages', [valid(), { to: to(TEST_NUMBER) }, valid({ to: to(TEST_NUMBER, TEST_NUMBER) })]);
  assert.equal(res.status, 200);
  assert.deepEqual(Object.keys(res.body).sort(), ['accepted', 'rejected', 'requestId']);
  assert.match(res.body.requestId, UUID);
  assert.deepEqual(res.body.accepted.map((a: Record<string, unknown>) => Object.keys(a).sort()), [['key', 'messageId'], ['key', 'messageId']]);
  assert.deepEqual(res.body.accepted.map((a: { key: string }) => a.key), ['0', '2']);
  assert.equal(res.body.rejected.length, 1);
  assert.equal(res.body.rejected[0].key, '1');
  assert.match(res.body.rejected[0].message, /^body: /);
  const id = res.body.accepted[1].messageId as string;
  const rows = await svc.sql<{ public_id: string }>('SELECT public_id FROM recipients WHERE message_id = $1 ORDER BY idx', [id]);
  assert.deepEqual(rows.map((r) => r.public_id), [`${id}-0`, `${id}-1`]);
  const [msg] = await svc.sql<{ source: string }>('SELECT source FROM messages WHERE id = $1', [id]);
  assert.equal(msg!.source, 'v1');
  const bad = await postRaw('/v1/messages', '{"body":"x"}', jsonType);
  assert.equal(bad.status, 400);
  assert.equal(typeof bad.body.Message, 'string');
});

// ---------------------------------------------------------------------------------------------
// Field rules: every limit at its edge and one past it, each a rejected entry naming the field
// ---------------------------------------------------------------------------------------------

type Case = [name: string, object: unknown, expect: 'ok' | RegExp];

const emoji = '\u{1F600}';
const step = (channel: string, config: Record<string, unknown>) => ({ [channel]: config });
const viber = (extra: Record<string, unknown> = {}) => step('viber', { sender: 'Acme', ...extra });
const button = { title: 'Open', url: 'https://example.com/offer' };

const fieldCases: Case[] = [
  // body
  ['body of 1000 characters', valid({ body: 'a'.repeat(1000) }), 'ok'],
  ['body of 1001 characters', valid({ body: 'a'.repeat(1001) }), /^body: must be at most 1000 characters long$/],
  ['body of 1000 emoji (code points, not UTF-16 units)', valid({ body: emoji.repeat(1000) }), 'ok'],
  ['body of 1001 emoji', valid({ body: emoji.repeat(1001) }), /^body: .*1000/],
  ['channel body of 1001 characters', valid({ flow: [step('sms', { body: 'a'.repeat(1001) })] }), /^flow\[0\]\.sms\.body: .*1000/],
  ['body null', valid({ body: null }), /^body: must be a string$/],
  ['body a number', valid({ body: 5 }), /^body: must be a string$/],
  // to
  ['to with 1 recipient', valid({ to: to(TEST_NUMBER) }), 'ok'],
  ['to with 10 recipients', valid({ to: to(...Array<string>(10).fill(TEST_NUMBER)) }), 'ok'],
  ['to with 0 recipients', valid({ to: [] }), /^to: must contain at least 1 items$/],
  ['to with 11 recipients', valid({ to: to(...Array<string>(11).fill(TEST_NUMBER)) }), /^to: must contain less than or equal to 10 items$/],
  ['to missing', { body: 'x' }, /^to: is required$/],
  ['to an object', valid({ to: { phone_number: TEST_NUMBER } }), /^to: must be an array$/],
  ['phone_number a number', valid({ to: [{ phone_number: 420777777777 }] }), /^to\[0\]\.phone_number: must be a string$/],
  ['phone_number empty', valid({ to: [{ phone_number: '' }] }), /^to\[0\]\.phone_number: /],
  ['phone_number missing in the 3rd recipient', valid({ to: [...to(TEST_NUMBER, TEST_NUMBER), {}] }), /^to\[2\]\.phone_number: is required$/],
  // A misspelt field is named as the one not allowed, not as its right spelling missing.
  ['phone_number misspelt', valid({ to: [{ phone: TEST_NUMBER }] }), /^to\[0\]\.phone: is not allowed$/],
  ['phone_number not a number at all (D2: settled later as [302])', valid({ to: to('call me maybe') }), 'ok'],
  ['phone_number of 100 characters (D2: any non-empty string)', valid({ to: to('1'.repeat(100)) }), 'ok'],
  ['duplicates in to are sent as given', valid({ to: to(TEST_NUMBER, TEST_NUMBER) }), 'ok'],
  // flow
  ['flow empty', valid({ flow: [] }), /^flow: must contain at least 1 items$/],
  ['flow not an array', valid({ flow: { sms: {} } }), /^flow: must be an array$/],
  ['flow element with two channel properties', valid({ flow: [{ sms: {}, whatsapp_template: { template_name: 't' } }] }), /^flow\[0\]: must have exactly one property/],
  ['flow element empty', valid({ flow: [{}] }), /^flow\[0\]: must have exactly one property/],
  ['flow element with an unknown channel', valid({ flow: [{ fax: {} }] }), /^flow\[0\]\.fax: is not allowed$/],
  ['unknown property inside a channel object', valid({ flow: [step('sms', { colour: 'red' })] }), /^flow\[0\]\.sms\.colour: is not allowed$/],
  ['channel object null', valid({ flow: [{ sms: null }] }), /^flow\[0\]\.sms: must be of type object$/],
  ['second flow element wrong', valid({ flow: [step('sms', {}), step('viber', {})] }), /^flow\[1\]\.viber\.sender: is required$/],
  // sms
  ['sms.sender of 11 alphanumeric characters', valid({ flow: [step('sms', { sender: 'ABCDEFGHIJK' })] }), 'ok'],
  ['sms.sender of 12 alphanumeric characters', valid({ flow: [step('sms', { sender: 'ABCDEFGHIJKL' })] }), /^flow\[0\]\.sms\.sender: /],
  ['sms.sender a 15-digit number', valid({ flow: [step('sms', { sender: '420777000111222' })] }), 'ok'],
  ['sms.sender a 16-digit number', valid({ flow: [step('sms', { sender: '4207770001112223' })] }), /^flow\[0\]\.sms\.sender: /],
  ['sms.sender with a leading +', valid({ flow: [step('sms', { sender: '+420777000111' })] }), /^flow\[0\]\.sms\.sender: /],
  ['sms.gateway high', valid({ flow: [step('sms', { gateway: 'high' })] }), 'ok'],
  ['sms.gateway direct', valid({ flow: [step('sms', { gateway: 'direct' })] }), 'ok'],
  ['sms.gateway custom', valid({ flow: [step('sms', { gateway: 'custom' })] }), 'ok'],
  ['sms.gateway unknown', valid({ flow: [step('sms', { gateway: 'cheap' })] }), /^flow\[0\]\.sms\.gateway: must be one of \[high, direct, custom\]$/],
  ['sms.type utf', valid({ flow: [step('sms', { type: 'utf' })] }), 'ok'],
  ['sms.type sms', valid({ flow: [step('sms', { type: 'sms' })] }), 'ok'],
  ['sms.type unknown', valid({ flow: [step('sms', { type: 'ucs2' })] }), /^flow\[0\]\.sms\.type: must be one of \[utf, sms\]$/],
  ['sms.ttl integer', valid({ flow: [step('sms', { ttl: 30 })] }), 'ok'],
  ['sms.ttl fractional', valid({ flow: [step('sms', { ttl: 1.5 })] }), /^flow\[0\]\.sms\.ttl: must be an integer$/],
  ['sms.ttl a number as string', valid({ flow: [step('sms', { ttl: '30' })] }), /^flow\[0\]\.sms\.ttl: must be a number$/],
  // viber
  ['viber with sender', valid({ flow: [viber()] }), 'ok'],
  ['viber without sender', valid({ flow: [step('viber', {})] }), /^flow\[0\]\.viber\.sender: is required$/],
  ['viber with 1 button', valid({ flow: [viber({ buttons: [button] })] }), 'ok'],
  ['viber with 2 buttons', valid({ flow: [viber({ buttons: [button, button] })] }), /^flow\[0\]\.viber\.buttons: must contain less than or equal to 1 items$/],
  ['viber button without title', valid({ flow: [viber({ buttons: [{ url: button.url }] })] }), /^flow\[0\]\.viber\.buttons\[0\]\.title: is required$/],
  ['viber button without url', valid({ flow: [viber({ buttons: [{ title: 'Open' }] })] }), /^flow\[0\]\.viber\.buttons\[0\]\.url: is required$/],
  ['viber button url not a URI', valid({ flow: [viber({ buttons: [{ title: 'Open', url: 'not a url' }] })] }), /^flow\[0\]\.viber\.buttons\[0\]\.url: /],
  ['viber button title of 30 characters', valid({ flow: [viber({ buttons: [{ title: 'x'.repeat(30), url: button.url }] })] }), 'ok'],
  ['viber button title of 31 characters (Viber shows 30)', valid({ flow: [viber({ buttons: [{ title: 'x'.repeat(31), url: button.url }] })] }),
    /^flow\[0\]\.viber\.buttons\[0\]\.title: must be at most 30 characters for Viber \(has 31\)$/],
  ['viber.ttl as string', valid({ flow: [viber({ ttl: '10' })] }), /^flow\[0\]\.viber\.ttl: must be a number$/],
  // whatsapp
  ['whatsapp_text with sender', valid({ flow: [step('whatsapp_text', { sender: '1234567890' })] }), 'ok'],
  ['whatsapp_text without sender', valid({ flow: [step('whatsapp_text', {})] }), /^flow\[0\]\.whatsapp_text\.sender: is required$/],
  ['whatsapp_template.template_name of 100', valid({ flow: [step('whatsapp_template', { template_name: 't'.repeat(100), sender: '1' })] }), 'ok'],
  ['whatsapp_template.template_name of 101', valid({ flow: [step('whatsapp_template', { template_name: 't'.repeat(101), sender: '1' })] }), /^flow\[0\]\.whatsapp_template\.template_name: .*100/],
  ['whatsapp_template.language (D2: accepted, optional)', valid({ flow: [step('whatsapp_template', { template_name: 'x', language: 'cs' })] }), 'ok'],
  ['whatsapp_template params must be strings', valid({ flow: [step('whatsapp_template', { template_name: 'x', params: [1] })] }), /^flow\[0\]\.whatsapp_template\.params\[0\]: must be a string$/],
  // body required unless every flow channel has its own
  ['template-only flow without body', { to: to(TEST_NUMBER), flow: [step('whatsapp_template', { template_name: 'welcome', sender: '1' })] }, 'ok'],
  ['every step with its own body, no root body', { to: to(TEST_NUMBER), flow: [viber({ body: 'v' }), step('sms', { body: 's' })] }, 'ok'],
  ['sms step without body and no root body', { to: to(TEST_NUMBER), flow: [step('sms', {})] }, /^body: is required unless every flow channel has its own body/],
  ['no flow and no body', { to: to(TEST_NUMBER) }, /^body: is required/],
  ['second step without body and no root body', { to: to(TEST_NUMBER), flow: [viber({ body: 'v' }), step('sms', {})] }, /^body: .*flow\[1\]/],
  ['channel body without root body is enough for that channel', { to: to(TEST_NUMBER), flow: [step('sms', { body: 'own' })] }, 'ok'],
  // callback
  ['callback https URI', valid({ callback: 'https://example.com/hook?a=1' }), 'ok'],
  ['callback http URI', valid({ callback: 'http://example.com/hook' }), 'ok'],
  ['callback ftp URI', valid({ callback: 'ftp://example.com/hook' }), /^callback: /],
  ['callback not a URI', valid({ callback: 'example dot com' }), /^callback: /],
  ['callback a number', valid({ callback: 5 }), /^callback: must be a string$/],
  // datetime
  ['datetime in the past (send now)', valid({ datetime: '2020-01-01T00:00:00Z' }), 'ok'],
  ['datetime 30 days ahead', valid({ datetime: isoIn(30 * DAY) }), 'ok'],
  ['datetime 364 days ahead', valid({ datetime: isoIn(364 * DAY) }), 'ok'],
  ['datetime more than 365 days ahead', valid({ datetime: isoIn(366 * DAY) }), /^datetime: .*365 days/],
  ['datetime garbage', valid({ datetime: 'next tuesday' }), /^datetime: .*ISO 8601/],
  ['datetime a number', valid({ datetime: 1767225600 }), /^datetime: must be a string$/],
  // delivery_time
  ['delivery_time complete', valid({ delivery_time: { days: ['monday', 'friday'], start: '08:00', end: '20:00', tz: 'Europe/Prague' } }), 'ok'],
  ['delivery_time days only', valid({ delivery_time: { days: ['sunday'] } }), 'ok'],
  ['delivery_time wrapping past midnight', valid({ delivery_time: { start: '22:00', end: '06:00' } }), 'ok'],
  ['delivery_time unknown day', valid({ delivery_time: { days: ['monday', 'funday'] } }), /^delivery_time\.days\[1\]: /],
  ['delivery_time start 24:00', valid({ delivery_time: { start: '24:00', end: '06:00' } }), /^delivery_time\.start: .*HH:MM/],
  ['delivery_time end 8:00 (not HH:MM)', valid({ delivery_time: { start: '06:00', end: '8:00' } }), /^delivery_time\.end: .*HH:MM/],
  ['delivery_time start without end', valid({ delivery_time: { start: '08:00' } }), /^delivery_time\.end: .*required/],
  ['delivery_time end without start', valid({ delivery_time: { end: '08:00' } }), /^delivery_time\.start: .*required/],
  ['delivery_time unknown tz', valid({ delivery_time: { tz: 'Mars/Olympus_Mons' } }), /^delivery_time\.tz: /],
  ['delivery_time offset instead of tz', valid({ delivery_time: { tz: '+02:00' } }), /^delivery_time\.tz: /],
  ['delivery_time unknown property', valid({ delivery_time: { days: ['monday'], hours: 3 } }), /^delivery_time\.hours: is not allowed$/],
  // other fields and wrong types
  ['tag priority', valid({ tag: 'priority' }), 'ok'],
  ['tag transactional', valid({ tag: 'transactional' }), 'ok'],
  ['tag a number', valid({ tag: 1 }), /^tag: must be a string$/],
  ['params object', valid({ params: { shorten_links: true } }), 'ok'],
  ['params an array', valid({ params: [1] }), /^params: must be of type object$/],
  ['payload an array', valid({ payload: ['a'] }), /^payload: must be of type object$/],
  ['payload null', valid({ payload: null }), /^payload: must be of type object$/],
  ['unknown root property', valid({ colour: 'red' }), /^colour: is not allowed$/],
  ['unknown property whose name has a quote', valid({ 'say "hi"': 1 }), /^say "hi": is not allowed$/],
  ['message object null', null, /^message: must be of type object$/],
  ['message object a number', 5, /^message: must be of type object$/],
  ['message object an array', [valid()], /^message: must be of type object$/],
  // text Postgres cannot store: a rejected entry, never a 500
  ['NUL in body', valid({ body: 'a\u0000b' }), /^body: must not contain NUL/],
  ['NUL in phone_number', valid({ to: to('420777\u0000123456') }), /^to\[0\]\.phone_number: must not contain NUL/],
  ['NUL in a channel sender', valid({ flow: [viber({ sender: 'Ac\u0000me' })] }), /^flow\[0\]\.viber\.sender: must not contain NUL/],
  ['unpaired surrogate in a channel body', valid({ flow: [step('sms', { body: 'a\uD800b' })] }), /^flow\[0\]\.sms\.body: .*unpaired surrogates/],
  ['NUL in params', valid({ params: { a: ['x\u0000'] } }), /^params\.a\[0\]: must not contain NUL/],
  ['NUL in a params property name', valid({ params: { 'a\u0000': 1 } }), /^params: property names/],
  ['NUL in payload is kept (json column, returned unchanged)', valid({ payload: { a: 'x\u0000y' } }), 'ok'],
];

test('field rules: each limit at its edge and one past it; a rejected entry {key, message} names the field path, the other object of the call is accepted, nothing is written for the rejected one', async (t) => {
  for (const [name, object, expect] of fieldCases) {
    await t.test(name, async () => {
      const before = await counts();
      const res = await post('/v2/messages', [valid(), object]);
      assert.equal(res.status, 200, res.text);
      const objectRecipients = (object as { to?: unknown[] } | null)?.to?.length ?? 0;
      if (expect === 'ok') {
        assert.deepEqual(res.body.rejected, [], res.text);
        assert.deepEqual(res.body.accepted.map((a: { key: string }) => a.key), ['0', '1']);
        assert.deepEqual(await counts(), { messages: before.messages + 2, recipients: before.recipients + 1 + objectRecipients });
      } else {
        assert.deepEqual(res.body.accepted.map((a: { key: string }) => a.key), ['0'], res.text);
        assert.equal(res.body.rejected.length, 1, res.text);
        assert.deepEqual(Object.keys(res.body.rejected[0]).sort(), ['key', 'message']);
        assert.equal(res.body.rejected[0].key, '1');
        assert.match(res.body.rejected[0].message, expect);
        assert.deepEqual(await counts(), { messages: before.messages + 1, recipients: before.recipients + 1 });
      }
    });
  }
});

test('several rejected objects in one call: each its own entry, in request order, accepted ones still written', async () => {
  const before = await counts();
  const res = await post('/v2/messages', [
    { to: to(TEST_NUMBER) },
    valid(),
    valid({ flow: [] }),
    valid({ to: to(TEST_NUMBER, TEST_NUMBER) }),
    valid({ datetime: 'x' }),
  ]);
  assert.equal(res.status, 200);
  assert.deepEqual(res.body.accepted.map((a: { key: string }) => a.key), ['1', '3']);
  assert.deepEqual(res.body.rejected.map((r: { key: string; message: string }) => [r.key, r.message.split(':')[0]]), [['0', 'body'], ['2', 'flow'], ['4', 'datetime']]);
  assert.deepEqual(await counts(), { messages: before.messages + 2, recipients: before.recipients + 3 });
  const all = await post('/v2/messages', [{ to: [] }, { body: 'x' }]);
  assert.equal(all.status, 200, 'a call whose every object is rejected still answers 200 (spec rule 1)');
  assert.deepEqual(all.body.accepted, []);
  assert.equal(all.body.rejected.length, 2);
  assert.deepEqual(await counts(), { messages: before.messages + 2, recipients: before.recipients + 3 });
});

test('batch size: 10 message objects (100 recipients) accepted, 11 or 0 a whole-request 400', async () => {
  const ten = await post('/v2/messages', Array.from({ length: 10 }, () => valid({ to: to(...Array<string>(10).fill(TEST_NUMBER)) })));
  assert.equal(ten.status, 200);
  assert.equal(ten.body.accepted.length, 10);
  const ids = ten.body.accepted.map((a: { message_id: string }) => a.message_id);
  const [row] = await svc.sql<{ n: number }>('SELECT count(*)::int AS n FROM recipients WHERE message_id = ANY($1)', [ids]);
  assert.equal(row!.n, 100);
  const before = await counts();
  const eleven = await post('/v2/messages', Array.from({ length: 11 }, () => valid()));
  assert.equal(eleven.status, 400);
  assert.deepEqual(Object.keys(eleven.body), ['Message']);
  assert.match(eleven.body.Message, /1 to 10/);
  const none = await post('/v2/messages', []);
  assert.equal(none.status, 400);
  assert.match(none.body.Message, /1 to 10/);
  const legacy = await post('/v1/messages', Array.from({ length: 11 }, () => valid()));
  assert.equal(legacy.status, 400);
  assert.match(legacy.body.Message, /1 to 10/);
  assert.deepEqual(await counts(), before);
});

// ---------------------------------------------------------------------------------------------
// Whole-request failures: 400 {Message}, never a 500, nothing written
// ---------------------------------------------------------------------------------------------

const MAX_BODY = 256 * 1024;
const smallBatch = JSON.stringify([valid()]);
const nestedArrays = (n: number) => '['.repeat(n) + ']'.repeat(n);

const wholeRequestCases: Array<[name: string, raw: string | Buffer, headers: Record<string, string>, message: RegExp]> = [
  ['bad JSON', '[{"body": "x", ', jsonType, /^Invalid JSON/],
  ['empty body', '', jsonType, /^Invalid JSON/],
  ['trailing garbage', `${smallBatch}x`, jsonType, /^Invalid JSON/],
  ['invalid UTF-8 bytes', Buffer.concat([Buffer.from('[{"body":"'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from(`","to":[{"phone_number":"${TEST_NUMBER}"}]}]`)]), jsonType, /UTF-8/],
  ['Content-Type text/plain', smallBatch, { 'content-type': 'text/plain' }, /Content-Type/],
  ['Content-Type form', smallBatch, formType, /Content-Type/],
  ['no Content-Type', Buffer.from(smallBatch), {}, /Content-Type/],
  ['body an object', JSON.stringify(valid()), jsonType, /array/],
  ['body a string', '"hello"', jsonType, /array/],
  ['body null', 'null', jsonType, /array/],
  ['duplicate keys', `[{"body":"a","to":[{"phone_number":"${TEST_NUMBER}"}],"body":"b"}]`, jsonType, /^Duplicate key "body"/],
  ['duplicate keys spelled with an escape', `[{"body":"a","to":[{"phone_number":"${TEST_NUMBER}"}],"b\\u006fdy":"b"}]`, jsonType, /^Duplicate key "body"/],
  ['duplicate keys deep in payload', `[{"body":"a","to":[{"phone_number":"${TEST_NUMBER}"}],"payload":{"a":{"x":1,"x":2}}}]`, jsonType, /^Duplicate key "x" at \[0\]\.payload\.a$/],
  ['100 nested arrays in payload', `[{"body":"a","to":[{"phone_number":"${TEST_NUMBER}"}],"payload":{"deep":${nestedArrays(100)}}}]`, jsonType, /nested too deeply/],
  ['100000 nested arrays', nestedArrays(100_000), jsonType, /nested too deeply|Invalid JSON/],
  ['body over 256 KB', `[${' '.repeat(MAX_BODY)}]`, jsonType, /too large/],
];

test('whole-request failures answer 400 {Message} with a specific text on every batch endpoint, never a 500, and write nothing', async (t) => {
  const before = await counts();
  for (const path of ['/v2/messages', '/v1/messages']) {
    for (const [name, raw, headers, message] of wholeRequestCases) {
      await t.test(`${path}: ${name}`, async () => {
        const res = await postRaw(path, raw, headers);
        assert.equal(res.status, 400, res.text);
        assert.deepEqual(Object.keys(res.body), ['Message']);
        assert.match(res.body.Message, message);
      });
    }
  }
  for (const [name, raw, headers] of wholeRequestCases) {
    if (name === 'body an object') {
      continue; // the one body /v2/message takes
    }
    await t.test(`/v2/message: ${name}`, async () => {
      const res = await postRaw('/v2/message', raw, headers);
      assert.equal(res.status, 400, res.text);
      assert.deepEqual(Object.keys(res.body), ['Message']);
      assert.equal(typeof res.body.Message, 'string');
    });
  }
  assert.deepEqual(await counts(), before);
});

test('body size limit: exactly 256 KB accepted, one byte more refused; also when streamed without Content-Length', async () => {
  const padded = smallBatch.padEnd(MAX_BODY, ' ');
  assert.equal(Buffer.byteLength(padded), MAX_BODY);
  const exact = await postRaw('/v2/messages', padded, jsonType);
  assert.equal(exact.status, 200, exact.text);
  assert.equal(exact.body.accepted.length, 1);
  const over = await postRaw('/v2/messages', `${padded} `, jsonType);
  assert.equal(over.status, 400);
  assert.match(over.body.Message, /too large.*256 KB/);

  // Chunked transfer: the cap is enforced while reading, not only from Content-Length.
  const chunked = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request(`${svc.url}/v2/messages`, { method: 'POST', headers: { 'x-api-key': apiKey, 'content-type': 'application/json', 'transfer-encoding': 'chunked' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.write('[');
    for (let i = 0; i < 40; i++) {
      req.write(' '.repeat(8 * 1024));
    }
    req.end(']');
  });
  assert.equal(chunked.status, 400);
  assert.match(JSON.parse(chunked.body).Message, /too large/);
});

test('JSON nesting: 32 levels deep are accepted, 33 refused', async () => {
  // [ {  payload { ... } } ]: the array and the message object are two levels, payload a third.
  const payloadDepth = (levels: number) => '{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1);
  const at = (payloadLevels: number) => `[{"body":"x","to":[{"phone_number":"${TEST_NUMBER}"}],"payload":${payloadDepth(payloadLevels)}}]`;
  const ok = await postRaw('/v2/messages', at(30), jsonType);
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.body.accepted.length, 1);
  const deep = await postRaw('/v2/messages', at(31), jsonType);
  assert.equal(deep.status, 400);
  assert.match(deep.body.Message, /nested too deeply \(max depth 32\)/);
});

// ---------------------------------------------------------------------------------------------
// Authentication
// ---------------------------------------------------------------------------------------------

test('missing, unknown or disabled key: HTTP 400 with the exact D2 body on every sending endpoint', async () => {
  const victim = await svc.createAccount();
  const keys: Array<[string, string | null]> = [['missing', null], ['unknown', 'sb_thisKeyDoesNotExist000000000000000'], ['empty', '']];
  const before = await counts();
  const check = async (what: string, res: TestResponse) => {
    assert.equal(res.status, 400, `${what}: ${res.text}`);
    assert.deepEqual(res.body, NOT_AUTHORIZED, what);
  };
  for (const [label, key] of keys) {
    const header: Record<string, string> = key === null ? {} : { 'x-api-key': key };
    await check(`${label} /v2/messages`, await svc.request('POST', '/v2/messages', { body: [valid()], headers: header }));
    await check(`${label} /v2/message`, await svc.request('POST', '/v2/message', { body: valid(), headers: header }));
    await check(`${label} /v1/messages`, await svc.request('POST', '/v1/messages', { body: [valid()], headers: header }));
    await check(`${label} GET simple`, await svc.request('GET', `/v2/simple/message?phone_number=${TEST_NUMBER}&message=hi`, { headers: header }));
    await check(`${label} GET simple apikey`, await svc.request('GET', `/v2/simple/message?apikey=${encodeURIComponent(key ?? '')}&phone_number=${TEST_NUMBER}&message=hi`));
    await check(`${label} POST simple`, await svc.request('POST', '/v2/simple/message', { raw: `phone_number=${TEST_NUMBER}&message=hi`, headers: { ...header, ...formType } }));
  }
  // Auth is checked before the body is read: a bad key with a broken or oversized body is still the auth answer.
  await check('bad key, bad JSON', await postRaw('/v2/messages', '[{', jsonType, 'nope'));
  await check('bad key, oversized body', await postRaw('/v2/messages', `[${' '.repeat(MAX_BODY + 10)}]`, jsonType, 'nope'));

  // Only GET /simple/message accepts `apikey` as a query parameter (spec Authentication 3).
  const good = victim.apiKey;
  await check('apikey query on /v2/messages', await svc.request('POST', `/v2/messages?apikey=${good}`, { body: [valid()] }));
  await check('apikey query on /v2/message', await svc.request('POST', `/v2/message?apikey=${good}`, { body: valid() }));
  await check('apikey query on /v1/messages', await svc.request('POST', `/v1/messages?apikey=${good}`, { body: [valid()] }));
  await check('apikey query on POST simple', await svc.request('POST', `/v2/simple/message?apikey=${good}`, { raw: `phone_number=${TEST_NUMBER}&message=hi`, headers: formType }));
  await check('apikey form field on POST simple', await svc.request('POST', '/v2/simple/message', { raw: `apikey=${good}&phone_number=${TEST_NUMBER}&message=hi`, headers: formType }));

  // A disabled key is refused like an unknown one.
  await svc.sql('UPDATE api_keys SET disabled = true WHERE account_id = $1', [victim.accountId]);
  clearKeyCache();
  await check('disabled /v2/messages', await post('/v2/messages', [valid()], good));
  await check('disabled /v2/message', await post('/v2/message', valid(), good));
  await check('disabled /v1/messages', await post('/v1/messages', [valid()], good));
  await check('disabled GET simple', await svc.request('GET', `/v2/simple/message?apikey=${good}&phone_number=${TEST_NUMBER}&message=hi`));
  await check('disabled POST simple', await svc.request('POST', '/v2/simple/message', { raw: `phone_number=${TEST_NUMBER}&message=hi`, headers: { 'x-api-key': good, ...formType } }));
  assert.deepEqual(await counts(), before);
});

// ---------------------------------------------------------------------------------------------
// Simple endpoints (D9)
// ---------------------------------------------------------------------------------------------

test('GET /v2/simple/message: key in the header or as apikey, aliases, customID kept as payload.customID, own recipient id', async () => {
  const viaHeader = await svc.request('GET', `/v2/simple/message?phone_number=${TEST_NUMBER}&message=hello&sender=Acme`, { headers: { 'x-api-key': apiKey } });
  assert.equal(viaHeader.status, 200, viaHeader.text);
  assert.deepEqual(Object.keys(viaHeader.body).sort(), ['accepted', 'message_id', 'request_id']);
  assert.equal(viaHeader.body.accepted, true);
  assert.match(viaHeader.body.request_id, UUID);
  assert.match(viaHeader.body.message_id, OWN_ID);

  const when = isoIn(2 * DAY);
  const aliases = await svc.request('GET', `/v2/simple/message?apikey=${apiKey}&number=${encodeURIComponent('+420 777 777 777')}&body=${encodeURIComponent('Dobrý den 😀')}&time=${encodeURIComponent(when)}&customID=order-42&gateway=direct&sender=420777000111`);
  assert.equal(aliases.status, 200, aliases.text);
  const [rec] = await svc.sql<{ public_id: string; phone: string; raw_phone: string; message_id: string }>(
    'SELECT public_id, phone, raw_phone, message_id FROM recipients WHERE public_id = $1', [aliases.body.message_id]);
  assert.ok(rec, 'the simple message id is the recipient id');
  assert.equal(rec.phone, TEST_NUMBER);
  assert.equal(rec.raw_phone, '+420 777 777 777');
  const [msg] = await svc.sql<{ body: string; payload: string; send_at: Date; flow: unknown; source: string; request_id: string }>(
    'SELECT body, payload, send_at, flow, source, request_id FROM messages WHERE id = $1', [rec.message_id]);
  assert.equal(msg!.body, 'Dobrý den 😀');
  assert.equal(msg!.payload, '{"customID":"order-42"}', 'the json column keeps the text');
  assert.equal(msg!.send_at.toISOString(), when);
  assert.deepEqual(msg!.flow, [{ sms: { sender: '420777000111', gateway: 'direct' } }]);
  assert.equal(msg!.source, 'simple');
  assert.equal(msg!.request_id, aliases.body.request_id);

  const before = await counts();
  const failures: Array<[string, RegExp]> = [
    [`message=hi`, /^phone_number: /],
    [`phone_number=${TEST_NUMBER}`, /^message: is required$/],
    [`phone_number=${TEST_NUMBER}&message=${'x'.repeat(1001)}`, /^message: .*1000/],
    [`phone_number=${TEST_NUMBER}&message=hi&sender=ABCDEFGHIJKL`, /^sender: /],
    [`phone_number=${TEST_NUMBER}&message=hi&gateway=cheap`, /^gateway: /],
    [`phone_number=${TEST_NUMBER}&message=hi&datetime=soon`, /^datetime: /],
    [`phone_number=${TEST_NUMBER}&message=a%00b`, /^message: must not contain NUL/],
  ];
  for (const [query, message] of failures) {
    const res = await svc.request('GET', `/v2/simple/message?${query}`, { headers: { 'x-api-key': apiKey } });
    assert.equal(res.status, 400, `${query}: ${res.text}`);
    assert.deepEqual(Object.keys(res.body).sort(), ['accepted', 'message', 'request_id']);
    assert.equal(res.body.accepted, false);
    assert.match(res.body.request_id, UUID);
    assert.match(res.body.message, message);
  }
  assert.deepEqual(await counts(), before);
});

test('POST /v2/simple/message: form-encoded with the key in the header; JSON answers 415 {"message": "Unsupported Media Type"}', async () => {
  const res = await svc.request('POST', '/v2/simple/message', {
    raw: new URLSearchParams({ number: '777123456', body: 'form text & more', customID: 'c-1' }).toString(),
    headers: { 'x-api-key': apiKey, 'content-type': 'application/x-www-form-urlencoded; charset=UTF-8' },
  });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.accepted, true);
  assert.match(res.body.message_id, OWN_ID);
  const [row] = await svc.sql<{ phone: string; body: string; payload: string }>(
    'SELECT r.phone, m.body, m.payload FROM recipients r JOIN messages m ON m.id = r.message_id WHERE r.public_id = $1', [res.body.message_id]);
  assert.deepEqual(row, { phone: '420777123456', body: 'form text & more', payload: '{"customID":"c-1"}' });

  const before = await counts();
  for (const type of ['application/json', 'text/plain', 'multipart/form-data; boundary=x']) {
    const json = await svc.request('POST', '/v2/simple/message', { raw: JSON.stringify({ phone_number: TEST_NUMBER, message: 'hi' }), headers: { 'x-api-key': apiKey, 'content-type': type } });
    assert.equal(json.status, 415, type);
    assert.deepEqual(json.body, { message: 'Unsupported Media Type' });
  }
  const none = await svc.request('POST', '/v2/simple/message', { raw: Buffer.from('phone_number=1&message=hi'), headers: { 'x-api-key': apiKey } });
  assert.equal(none.status, 415);
  assert.deepEqual(none.body, { message: 'Unsupported Media Type' });
  const bad = await svc.request('POST', '/v2/simple/message', { raw: `phone_number=${TEST_NUMBER}`, headers: { 'x-api-key': apiKey, ...formType } });
  assert.equal(bad.status, 400);
  assert.equal(bad.body.accepted, false);
  assert.match(bad.body.message, /^message: /);

  // Percent-escapes that are not UTF-8 (windows-1250 `ý`, no charset named): the parameter is
  // named, nothing is sent (it was read as U+FFFD and sent). In the charset named, it is read.
  const notUtf8 = `phone_number=${TEST_NUMBER}&message=Dobr%FD+den`;
  const refused = await svc.request('POST', '/v2/simple/message', { raw: notUtf8, headers: { 'x-api-key': apiKey, ...formType } });
  assert.equal(refused.status, 400, refused.text);
  assert.equal(refused.body.accepted, false);
  assert.match(refused.body.message, /^message: is not valid text in the request's character set/);
  // HEAD sends nothing (Express would have run the GET handler: a monitor's HEAD sent and charged an SMS).
  const head = await svc.request('HEAD', `/v2/simple/message?phone_number=${TEST_NUMBER}&message=hi`, { headers: { 'x-api-key': apiKey } });
  assert.equal(head.status, 405);
  assert.equal(head.headers.allow, 'GET, POST');
  const viaGet = await svc.request('GET', `/v2/simple/message?${notUtf8}`, { headers: { 'x-api-key': apiKey } });
  assert.equal(viaGet.status, 400, viaGet.text);
  assert.match(viaGet.body.message, /^message: is not valid text/);
  // The key is checked first, as for every other problem.
  const noKey = await svc.request('GET', `/v2/simple/message?${notUtf8}`);
  assert.equal(noKey.status, 400);
  assert.deepEqual(noKey.body, NOT_AUTHORIZED);
  const unknownSet = await svc.request('POST', '/v2/simple/message', { raw: `phone_number=${TEST_NUMBER}&message=hi`, headers: { 'x-api-key': apiKey, 'content-type': 'application/x-www-form-urlencoded; charset=x-klingon' } });
  assert.equal(unknownSet.status, 400, unknownSet.text);
  assert.match(unknownSet.body.Message, /^charset x-klingon is not supported/);
  assert.deepEqual(await counts(), before);
  const named = await svc.request('POST', '/v2/simple/message', { raw: notUtf8, headers: { 'x-api-key': apiKey, 'content-type': 'application/x-www-form-urlencoded; charset=windows-1250' } });
  assert.equal(named.status, 200, named.text);
  const [text] = await svc.sql<{ body: string }>('SELECT m.body FROM recipients r JOIN messages m ON m.id = r.message_id WHERE r.public_id = $1', [named.body.message_id]);
  assert.equal(text!.body, 'Dobrý den');
});

// ---------------------------------------------------------------------------------------------
// Phone numbers, the test number, payload round trip
// ---------------------------------------------------------------------------------------------

test('phone numbers are stored as E.164 digits (CZ account): national, +, 00 and formatted forms', async () => {
  const inputs = ['777123456', '+44 7911 123456', '00421 903 123 456', '(+420) 777-123-457', '420777123458', '+420777777777'];
  const res = await post('/v2/messages', [{ body: 'numbers', to: to(...inputs) }]);
  assert.equal(res.status, 200);
  const id = res.body.accepted[0].message_id as string;
  const rows = await svc.sql<{ raw_phone: string; phone: string }>('SELECT raw_phone, phone FROM recipients WHERE message_id = $1 ORDER BY idx', [id]);
  assert.deepEqual(rows.map((r) => [r.raw_phone, r.phone]), [
    ['777123456', '420777123456'],
    ['+44 7911 123456', '447911123456'],
    ['00421 903 123 456', '421903123456'],
    ['(+420) 777-123-457', '420777123457'],
    ['420777123458', '420777123458'],
    ['+420777777777', TEST_NUMBER],
  ]);
});

test('a number that cannot be normalised is accepted and then reported as a rejected event with [302] (D2 two-phase acceptance)', async () => {
  const res = await post('/v2/message', { body: 'x', to: to('call me maybe') });
  assert.equal(res.status, 200);
  const id = res.body.accepted[0].message_id as string;
  const event = await waitFor(async () => {
    const rows = await svc.sql<{ body: string }>(
      `SELECT e.body FROM events e JOIN recipients r ON r.id = e.recipient_id WHERE r.public_id = $1`, [id]);
    return rows.map((r) => JSON.parse(r.body)).find((e) => e.result === 'rejected');
  }, 10_000, 'the [302] event');
  assert.equal(event.result_info, '[302] Invalid phone number');
  assert.equal(event.message_id, id);
  // The number as it was given (it has no international form), as the REST list shows it; it was ''.
  assert.deepEqual(event.to, { phone_number: 'call me maybe' });
});

test('test number 420777777777: accepted with ids on every endpoint, never sent, charged or reported', async () => {
  const account = await svc.createAccount({ credit_czk: 50, credit_eur: 0 });
  const key = account.apiKey;
  const batch = await post('/v2/messages', [{ body: 't', to: to(TEST_NUMBER, '+420 777 777 777') }], key);
  const single = await post('/v2/message', { body: 't', to: to(TEST_NUMBER) }, key);
  const simple = await svc.request('GET', `/v2/simple/message?apikey=${key}&phone_number=${TEST_NUMBER}&message=t`);
  const legacy = await post('/v1/messages', [{ body: 't', to: to(TEST_NUMBER), flow: [viber({ body: 'v' }), step('sms', {})] }], key);
  for (const res of [batch, single, simple, legacy]) {
    assert.equal(res.status, 200, res.text);
  }
  const batchId = batch.body.accepted[0].message_id as string;
  const publicIds = [`${batchId}-0`, `${batchId}-1`, single.body.accepted[0].message_id, simple.body.message_id, `${legacy.body.accepted[0].messageId}-0`];
  const rows = await svc.sql<{ id: number; public_id: string }>('SELECT id, public_id FROM recipients WHERE public_id = ANY($1)', [publicIds]);
  assert.equal(rows.length, 5);
  await new Promise((r) => setTimeout(r, 1200));
  const ids = rows.map((r) => r.id);
  const [attempts] = await svc.sql<{ n: number }>('SELECT count(*)::int AS n FROM attempts WHERE recipient_id = ANY($1)', [ids]);
  const [events] = await svc.sql<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE recipient_id = ANY($1) OR account_id = $2', [ids, account.accountId]);
  assert.equal(attempts!.n, 0, 'no attempt');
  assert.equal(events!.n, 0, 'no event');
  const balance = await svc.admin('GET', `/accounts/${account.accountId}`);
  assert.equal(balance.body.credit_czk, 50, 'not charged');
  assert.equal(balance.body.credit_eur, 0);
});

test('payload round trip: nested objects, unicode and key order come back byte for byte in every sentMessage event', async () => {
  // Integer-like keys, 1.0, a number beyond 2^53, \u escapes and inner spaces survive as written
  // (a parse-and-stringify round trip would change each of them).
  const payloadText = '{"z":1,"a":2,"2":"second","1":"first","x":1.0,"big":12345678901234567890,"esc":"\\u00e9", "spaced" : [ 1 , 2 ],"nested":{"list":[1,"two",{"ü":"ř😀"}],"empty":{},"none":null,"yes":true,"pi":3.25},"text":"Příliš žluťoučký kůň úpěl ďábelské ódy 😀"}';
  const batchRaw = `[{"body":"payload test","to":[{"phone_number":"420777123450"}],"payload":${payloadText}}]`;
  const batch = await postRaw('/v2/messages', batchRaw, jsonType);
  assert.equal(batch.status, 200, batch.text);
  const single = await postRaw('/v2/message', `{"body":"payload test","payload":${payloadText},"to":[{"phone_number":"420777123460"}]}`, jsonType);
  assert.equal(single.status, 200, single.text);
  const publicIds = [`${batch.body.accepted[0].message_id}-0`, single.body.accepted[0].message_id as string];
  for (const publicId of publicIds) {
    const events = await waitFor(async () => {
      const rows = await svc.sql<{ body: string; kind: string }>(
        `SELECT e.body, e.kind FROM events e JOIN recipients r ON r.id = e.recipient_id WHERE r.public_id = $1 ORDER BY e.id`, [publicId]);
      return rows.some((r) => JSON.parse(r.body).result === 'delivered') ? rows : null;
    }, 15_000, `delivered event of ${publicId}`);
    assert.ok(events.length >= 2, 'sending ... delivered');
    for (const e of events) {
      assert.equal(e.kind, 'sentMessage');
      assert.ok(e.body.includes(`"payload":${payloadText}`), `payload text kept exactly: ${e.body}`);
      assert.equal(JSON.parse(e.body).message_id, publicId);
    }
  }
  const [stored] = await svc.sql<{ payload: string }>('SELECT payload::text AS payload FROM messages WHERE id = $1', [batch.body.accepted[0].message_id]);
  assert.equal(stored!.payload, payloadText);
});

test('unexpected routes and methods are not a 500', async () => {
  for (const [method, path] of [['GET', '/v2/messages'], ['PUT', '/v2/message'], ['DELETE', '/v2/simple/message'], ['GET', '/v2/nothing']] as const) {
    const res = await svc.request(method, path, { headers: { 'x-api-key': apiKey } });
    assert.ok(res.status < 500, `${method} ${path}: ${res.status}`);
  }
});
