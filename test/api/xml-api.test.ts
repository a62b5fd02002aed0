/**
 * The XML API (`POST /xml`, spec "XML API", decision D9) over HTTP against the running service:
 * the exact success and error documents, every error ID with its HTTP status, and that a refused
 * document writes nothing. The parser and the presenter are unit-tested in test/unit/xml.test.ts;
 * this file checks the route that joins them to authentication, credit and acceptance.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService, type TestResponse } from '../support/harness.js';
import { clearKeyCache } from '../../shared/domain/keys.js';

const TEST_NUMBER = '420777777777';
const DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';
const HEADER = '<ResultHeader><Interface Version="2.0"/></ResultHeader>';

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

const formType = { 'content-type': 'application/x-www-form-urlencoded' };

function request(text: string, numbers: string[], attrs = 'Type="high"'): string {
  return `<Request ${attrs}><Message Type="Text">${text}</Message><NumbersList>${numbers.map((n) => `<Number>${n}</Number>`).join('')}</NumbersList></Request>`;
}
function doc(...requests: string[]): string {
  return `<?xml version="1.0" encoding="UTF-8"?><RequestDocument><RequestList>${requests.join('')}</RequestList></RequestDocument>`;
}

function postXml(fields: Record<string, string>, headers: Record<string, string> = formType): Promise<TestResponse> {
  return svc.request('POST', '/xml', { raw: new URLSearchParams(fields).toString(), headers });
}
const send = (xml: string, key = apiKey) => postXml({ apikey: key, XMLDATA: xml });

function errorDocument(id: number): string {
  return `${DECLARATION}<Result>${HEADER}<Response Type="ERROR" ID="${id}"/></Result>`;
}

async function counts(): Promise<{ messages: number; recipients: number }> {
  const [row] = await svc.sql<{ messages: number; recipients: number }>(
    'SELECT (SELECT count(*) FROM messages)::int AS messages, (SELECT count(*) FROM recipients)::int AS recipients');
  return row!;
}

function assertError(res: TestResponse, id: number, status: number): void {
  assert.equal(res.status, status, res.text);
  assert.match(res.headers['content-type'] ?? '', /^application\/xml/);
  assert.equal(res.text, errorDocument(id));
}

test('success: the exact D9 document, RequestID = message id, numbers as stored E.164 digits without +', async () => {
  const xml = doc(
    request('Hello &amp; welcome', ['+420777123451', '777 123 452'], 'Type="high" Sender="+420777000111"'),
    request('Druhá zpráva 😀', ['+44 7911 123456'], 'Type="lowcost"'),
    request('<![CDATA[a < b]]>', [TEST_NUMBER], 'Type="direct" Sender="Acme Ltd"'),
  );
  const res = await send(xml);
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers['content-type'] ?? '', /^application\/xml/);
  const ids = [...res.text.matchAll(/<RequestID>([^<]+)<\/RequestID>/g)].map((m) => m[1]!);
  assert.equal(ids.length, 3);
  assert.equal(new Set(ids).size, 3);
  assert.equal(res.text,
    `${DECLARATION}<Result>${HEADER}<Response Type="OK" ID="0"/><ResponseRequestList>` +
    `<ResponseRequest><RequestID>${ids[0]}</RequestID><ResponseNumbersList><Number>420777123451</Number><Number>420777123452</Number></ResponseNumbersList></ResponseRequest>` +
    `<ResponseRequest><RequestID>${ids[1]}</RequestID><ResponseNumbersList><Number>447911123456</Number></ResponseNumbersList></ResponseRequest>` +
    `<ResponseRequest><RequestID>${ids[2]}</RequestID><ResponseNumbersList><Number>${TEST_NUMBER}</Number></ResponseNumbersList></ResponseRequest>` +
    '</ResponseRequestList></Result>');

  // Each Request is one message object; recipients are <RequestID>-<index>.
  const messages = await svc.sql<{ id: string; body: string; flow: unknown; tag: string; source: string; request_id: string }>(
    'SELECT id, body, flow, tag, source, request_id FROM messages WHERE id = ANY($1)', [ids]);
  const byId = new Map(messages.map((m) => [m.id, m]));
  assert.deepEqual([byId.get(ids[0]!)!.body, byId.get(ids[1]!)!.body, byId.get(ids[2]!)!.body], ['Hello & welcome', 'Druhá zpráva 😀', 'a < b']);
  // D9: high and direct map to the SMS gateways of the same name, lowcost to high at promotional priority.
  assert.deepEqual(byId.get(ids[0]!)!.flow, [{ sms: { gateway: 'high', sender: '420777000111' } }]);
  assert.deepEqual(byId.get(ids[1]!)!.flow, [{ sms: { gateway: 'high' } }]);
  assert.equal(byId.get(ids[1]!)!.tag, 'promotional');
  assert.deepEqual(byId.get(ids[2]!)!.flow, [{ sms: { gateway: 'direct', sender: 'Acme Ltd' } }]);
  assert.notEqual(byId.get(ids[0]!)!.tag, 'promotional');
  for (const m of messages) {
    assert.equal(m.source, 'xml');
    assert.equal(m.request_id, messages[0]!.request_id, 'one call, one request_id');
  }
  const recipients = await svc.sql<{ public_id: string; phone: string }>(
    'SELECT public_id, phone FROM recipients WHERE message_id = ANY($1) ORDER BY public_id', [ids]);
  assert.deepEqual(recipients.map((r) => [r.public_id, r.phone]).sort(), [
    [`${ids[0]}-0`, '420777123451'],
    [`${ids[0]}-1`, '420777123452'],
    [`${ids[1]}-0`, '447911123456'],
    [`${ids[2]}-0`, TEST_NUMBER],
  ].sort());
});

test('a number that yields digits but cannot be normalised is accepted and echoed as its digits (settled later as [302])', async () => {
  const res = await send(doc(request('x', ['12'])));
  assert.equal(res.status, 200, res.text);
  assert.match(res.text, /<ResponseNumbersList><Number>12<\/Number><\/ResponseNumbersList>/);
});

test('a Request with more numbers than a v2 message object is accepted (recipients <RequestID>-<index>)', async () => {
  const res = await send(doc(request('many', Array<string>(250).fill(TEST_NUMBER))));
  assert.equal(res.status, 200, res.text);
  assert.equal([...res.text.matchAll(/<Number>/g)].length, 250);
  const requestId = /<RequestID>([^<]+)<\/RequestID>/.exec(res.text)![1]!;
  const rows = await svc.sql<{ public_id: string }>('SELECT public_id FROM recipients WHERE message_id = $1 ORDER BY idx', [requestId]);
  assert.equal(rows.length, 250);
  assert.equal(rows[249]!.public_id, `${requestId}-249`);
});

test('text of 1000 code points is accepted (emoji count once)', async () => {
  const res = await send(doc(request('\u{1F600}'.repeat(1000), [TEST_NUMBER])));
  assert.equal(res.status, 200, res.text);
});

test('every error ID answers the exact error document with its HTTP status and writes nothing', async (t) => {
  const broke = await svc.createAccount({ credit_czk: 0, credit_eur: 0 });
  const negative = await svc.createAccount({ credit_czk: 3, credit_eur: 0 });
  await svc.admin('POST', `/accounts/${negative.accountId}/credit`, { czk: -8 });
  const good = request('hi', [TEST_NUMBER]);
  const cases: Array<[name: string, call: () => Promise<TestResponse>, id: number, status: number]> = [
    ['101 XMLDATA missing', () => postXml({ apikey: apiKey }), 101, 400],
    ['101 XMLDATA empty', () => send(''), 101, 400],
    ['101 XMLDATA whitespace only', () => send('  \n '), 101, 400],
    ['101 not form-encoded (JSON)', () => svc.request('POST', '/xml', { body: { apikey: apiKey, XMLDATA: doc(good) } }), 101, 400],
    ['101 no body at all', () => svc.request('POST', '/xml', {}), 101, 400],
    // `ý` in windows-1250 (0xFD) from a client that did not name its charset: not UTF-8, refused
    // (it was read as U+FFFD and sent, as UCS-2).
    ['101 a field that is not UTF-8', () => svc.request('POST', '/xml', { raw: `apikey=${apiKey}&XMLDATA=${encodeURIComponent(doc(request('Dobr-den', [TEST_NUMBER]))).replace('Dobr-den', 'Dobr%FD+den')}`, headers: formType }), 101, 400],
    ['101 a charset no form is read in', () => svc.request('POST', '/xml', { raw: new URLSearchParams({ apikey: apiKey, XMLDATA: doc(good) }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded; charset=utf-16le' } }), 101, 400],
    ['102 malformed XML', () => send('<RequestDocument><RequestList><Request Type="high">'), 102, 400],
    ['102 not XML', () => send('hello'), 102, 400],
    ['102 DOCTYPE', () => send(`<?xml version="1.0"?><!DOCTYPE RequestDocument>${doc(good).replace(/^<\?xml[^>]*\?>/, '')}`), 102, 400],
    ['102 external entity', () => send(`<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>${doc(request('&x;', [TEST_NUMBER])).replace(/^<\?xml[^>]*\?>/, '')}`), 102, 400],
    ['102 wrong root', () => send(`<Document><RequestList>${good}</RequestList></Document>`), 102, 400],
    ['102 no Request', () => send(doc()), 102, 400],
    ['102 unknown Type', () => send(doc(request('hi', [TEST_NUMBER], 'Type="cheap"'))), 102, 400],
    ['102 NUL character reference', () => send(doc(request('a&#0;b', [TEST_NUMBER]))), 102, 400],
    ['102 XMLDATA over 256 KB', () => send(doc(request('x'.repeat(300 * 1024), [TEST_NUMBER]))), 102, 400],
    ['103 unknown key', () => send(doc(good), 'sb_nope'), 103, 401],
    ['103 apikey missing', () => postXml({ XMLDATA: doc(good) }), 103, 401],
    ['103 key only in the x-api-key header', () => postXml({ XMLDATA: doc(good) }, { ...formType, 'x-api-key': apiKey }), 103, 401],
    ['105 zero credit', () => send(doc(good), broke.apiKey), 105, 402],
    ['105 negative credit', () => send(doc(good), negative.apiKey), 105, 402],
    ['109 Request without Message', () => send(doc(`<Request Type="high"><NumbersList><Number>${TEST_NUMBER}</Number></NumbersList></Request>`)), 109, 400],
    ['109 Request without NumbersList', () => send(doc('<Request Type="high"><Message Type="Text">hi</Message></Request>')), 109, 400],
    ['109 NumbersList without Number', () => send(doc(request('hi', []))), 109, 400],
    ['109 more than 1000 Numbers in one Request', () => send(doc(request('hi', Array<string>(1001).fill(TEST_NUMBER)))), 109, 400],
    ['201 a Number without digits', () => send(doc(request('hi', [TEST_NUMBER, 'call me']))), 201, 400],
    ['202 text empty', () => send(doc(request('', [TEST_NUMBER]))), 202, 400],
    ['202 text whitespace only', () => send(doc(request('   ', [TEST_NUMBER]))), 202, 400],
    ['202 text of 1001 characters', () => send(doc(request('x'.repeat(1001), [TEST_NUMBER]))), 202, 400],
    ['203 Sender of 12 characters', () => send(doc(request('hi', [TEST_NUMBER], 'Type="high" Sender="ABCDEFGHIJKL"'))), 203, 400],
    ['203 Sender of 16 digits', () => send(doc(request('hi', [TEST_NUMBER], 'Type="high" Sender="4207770001112223"'))), 203, 400],
    ['203 Sender refused by the message schema (no letter, not a number)', () => send(doc(request('hi', [TEST_NUMBER], 'Type="high" Sender="12-34"'))), 203, 400],
    // The document is checked whole: a bad second Request refuses the good first one too.
    ['202 in the second Request refuses the first', () => send(doc(good, request('', [TEST_NUMBER]))), 202, 400],
    ['203 in the third Request refuses the first two', () => send(doc(good, good, request('hi', [TEST_NUMBER], 'Type="high" Sender="ABCDEFGHIJKLMNOP"'))), 203, 400],
    // D9 order: 101, 102, 103, 105, then the per-Request checks.
    ['102 comes before 103', () => send('<broken', 'sb_nope'), 102, 400],
    ['103 comes before 109', () => send(doc('<Request Type="high"></Request>'), 'sb_nope'), 103, 401],
    ['105 comes before 202', () => send(doc(request('', [TEST_NUMBER])), broke.apiKey), 105, 402],
  ];
  const before = await counts();
  for (const [name, call, id, status] of cases) {
    await t.test(name, async () => {
      assertError(await call(), id, status);
    });
  }
  assert.deepEqual(await counts(), before, 'no error wrote anything');
});

test('a form in the character set its Content-Type names (windows-1250) is read in it', async () => {
  const raw = `apikey=${apiKey}&XMLDATA=${encodeURIComponent(doc(request('Dobr-den', ['420777123460']))).replace('Dobr-den', 'Dobr%FD+den+%8A%9A')}`;
  const res = await svc.request('POST', '/xml', { raw, headers: { 'content-type': 'application/x-www-form-urlencoded; charset=windows-1250' } });
  assert.equal(res.status, 200, res.text);
  const requestId = /<RequestID>([^<]+)<\/RequestID>/.exec(res.text)![1];
  const [row] = await svc.sql<{ body: string }>('SELECT body FROM messages WHERE id = $1', [requestId]);
  assert.equal(row!.body, 'Dobrý den Šš');
});

test('a key refused by the XML API is also refused when disabled', async () => {
  const account = await svc.createAccount();
  const ok = await send(doc(request('hi', [TEST_NUMBER])), account.apiKey);
  assert.equal(ok.status, 200);
  await svc.sql('UPDATE api_keys SET disabled = true WHERE account_id = $1', [account.accountId]);
  clearKeyCache();
  assertError(await send(doc(request('hi', [TEST_NUMBER])), account.apiKey), 103, 401);
});

test('the test number through XML: accepted, never sent or charged', async () => {
  const account = await svc.createAccount({ credit_czk: 20, credit_eur: 0 });
  const res = await send(doc(request('hi', [TEST_NUMBER, `+${TEST_NUMBER}`])), account.apiKey);
  assert.equal(res.status, 200, res.text);
  const id = /<RequestID>([^<]+)<\/RequestID>/.exec(res.text)![1]!;
  await new Promise((r) => setTimeout(r, 1000));
  const [row] = await svc.sql<{ attempts: number; events: number }>(
    `SELECT (SELECT count(*) FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.message_id = $1)::int AS attempts,
            (SELECT count(*) FROM events WHERE account_id = $2)::int AS events`, [id, account.accountId]);
  assert.deepEqual(row, { attempts: 0, events: 0 });
  const acc = await svc.admin('GET', `/accounts/${account.accountId}`);
  assert.equal(acc.body.credit_czk, 20);
});
