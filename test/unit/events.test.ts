import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BODY_SEPARATOR, RawJson, SentMessageBody, eventParams, payloadField, stringifyEvent, type SentMessageFacts } from '../../shared/engine/events.js';
import { SENT_MESSAGE_FIELDS, sentMessageText } from '../../shared/engine/sent-message.js';
import { JsonBytes } from '../../shared/engine/event-json.js';

test('stringifyEvent writes top-level RawJson values byte for byte and everything else as JSON.stringify does', () => {
  const cases: Array<{ name: string; body: Record<string, unknown>; expected: string }> = [
    { name: 'no raw value', body: { a: 1, b: 'x"y', c: { d: [1, 2] } }, expected: '{"a":1,"b":"x\\"y","c":{"d":[1,2]}}' },
    { name: 'no payload (left out, D4)', body: { request_id: 'r', payload: payloadField(null), type: 'incoming' }, expected: '{"request_id":"r","type":"incoming"}' },
    { name: 'raw payload keeps its spacing and key order', body: { a: 1, payload: new RawJson('{ "z": 1,  "a" : [ 2 ] }'), b: 2 },
      expected: '{"a":1,"payload":{ "z": 1,  "a" : [ 2 ] },"b":2}' },
    { name: 'raw unicode and escapes', body: { payload: new RawJson('"\\u00e9 ž \\n"') }, expected: '{"payload":"\\u00e9 ž \\n"}' },
    { name: 'two raw values', body: { p: new RawJson('1'), q: new RawJson('[true]') }, expected: '{"p":1,"q":[true]}' },
    { name: 'a string that looks like a marker stays a string', body: { s: '\u0000raw0\u0000', payload: new RawJson('0') },
      expected: '{"s":"\\u0000raw0\\u0000","payload":0}' },
  ];
  for (const c of cases) {
    assert.equal(stringifyEvent(c.body), c.expected, c.name);
  }
});

test('stringifyEvent does not change the body it is given', () => {
  const raw = new RawJson('{"k":1}');
  const body = { payload: raw };
  stringifyEvent(body);
  assert.equal(body.payload, raw);
});

test('a sentMessage event parses back to the spec fields with the payload as sent', () => {
  const text = sentMessageText({
    requestId: 'req', publicId: 'pub', channel: 'sms', payload: '{"order": 17}', phone: '+420777123456', state: 'delivered',
    resultInfo: 'Delivered', at: 1_700_000_000_123, sender: 'Shop', country: 230, operator: 1, priceCzk: 0.123456, priceEur: 0.00499,
    count: 1, smsGateway: 'high',
  });
  assert.ok(text.includes('"payload":{"order": 17}'));
  assert.deepEqual(JSON.parse(text), {
    request_id: 'req', message_id: 'pub', gateway: 'sms', timestamp: 1_700_000_000, payload: { order: 17 }, type: 'outgoing',
    to: { phone_number: '+420777123456' }, result: 'delivered', result_info: 'Delivered',
    sms: { sender: 'Shop', country: 230, operator: 1, price_czk: 0.1235, price_eur: 0.005, count: 1, gateway: 'high' },
  });
  assert.equal(payloadField(null), undefined);
});

test('a sentMessage event of a message without payload has no payload field (D4: omitted, never null)', () => {
  const text = sentMessageText({
    requestId: 'req', publicId: 'pub', channel: 'viber', payload: null, phone: '420777123456', state: 'sent',
    resultInfo: 'Sent', at: 1_700_000_000_000, sender: 'Shop', country: 230, operator: 0, priceCzk: 0.6, priceEur: 0.025,
    count: 1, smsGateway: null,
  });
  assert.ok(!text.includes('payload'), text);
  assert.deepEqual(Object.keys(JSON.parse(text)), ['request_id', 'message_id', 'gateway', 'timestamp', 'type', 'to', 'result', 'result_info', 'viber']);
});

test('event bodies never contain the separator they travel with, whatever their strings hold', () => {
  const bodies: Array<Record<string, unknown>> = [
    { result_info: `a${BODY_SEPARATOR}b`, to: { phone_number: '\u0001\u0000\u001f' } },
    { payload: new RawJson('{"k":"\\u0001"}'), text: 'tab\tnewline\n' },
    { s: String.fromCharCode(...Array.from({ length: 32 }, (_, i) => i)) },
  ];
  const joined = eventParams(bodies.map((body) => ({ accountId: 1, keyId: null, callbackUrl: null, recipientId: null, kind: 'sentMessage' as const, body }))).event_bodies;
  assert.ok(Buffer.isBuffer(joined), 'the bodies travel as one Buffer of UTF-8');
  const texts = (joined as Buffer).toString('utf8').split(BODY_SEPARATOR);
  assert.equal(texts.length, bodies.length, 'one piece per body');
  texts.forEach((text, i) => assert.equal(text, stringifyEvent(bodies[i]!)));
  assert.deepEqual(JSON.parse(texts[0]!), { result_info: `a${BODY_SEPARATOR}b`, to: { phone_number: '\u0001\u0000\u001f' } });
});

test('the sentMessage writer writes what JSON.stringify writes for the event, with the payload byte for byte', () => {
  const base: SentMessageFacts = {
    requestId: 'req-1', publicId: 'abc-0', channel: 'sms', payload: null, phone: '+420777123456', state: 'sending',
    resultInfo: 'Sending', at: 1_700_000_000_999, sender: 'Shop', country: 230, operator: 0, priceCzk: 0.9, priceEur: 0.036,
    count: 1, smsGateway: 'high',
  };
  const cases: Array<{ name: string; facts: Partial<SentMessageFacts>; channelObject?: Record<string, unknown> }> = [
    { name: 'sms, default gateway, no payload', facts: {} },
    { name: 'sms on the direct gateway, multi-part, delivered', facts: { smsGateway: 'direct', count: 3, state: 'delivered', resultInfo: 'Delivered' } },
    { name: 'payload kept byte for byte', facts: { payload: '{ "order" : 17, "tags": ["a", "ž"] }' } },
    { name: 'payload that is a JSON string', facts: { payload: '"x\\ny"' } },
    { name: 'numeric payload', facts: { payload: '42' } },
    { name: 'viber', facts: { channel: 'viber', smsGateway: null, priceCzk: 0.45, priceEur: 0.018 } },
    { name: 'whatsapp text, rejected', facts: { channel: 'whatsapp_text', smsGateway: null, state: 'rejected', resultInfo: '[3] Not enough credit' } },
    { name: 'whatsapp template', facts: { channel: 'whatsapp_template', smsGateway: null, state: 'seen', resultInfo: 'Seen' } },
    { name: 'strings needing escapes', facts: { sender: 'A "quoted" \\ sender\t', resultInfo: 'line\nbreak \u2028 \u0001 ž', requestId: '</script>' } },
    { name: 'prices rounded to four places', facts: { priceCzk: 0.123456, priceEur: 1e-7 } },
    { name: 'large and odd numbers', facts: { at: 0, country: 0, operator: 123456789, count: 10 } },
    { name: 'non-finite price written as null', facts: { priceCzk: Number.NaN } },
  ];
  const round4 = (x: number) => Math.round(x * 10000) / 10000;
  for (const c of cases) {
    const f = { ...base, ...c.facts };
    const text = sentMessageText(f);
    // The spec's fields in the table's order, with the values the facts give them.
    const channelObject: Record<string, unknown> = {
      sender: f.sender, country: f.country, operator: f.operator, price_czk: round4(f.priceCzk), price_eur: round4(f.priceEur), count: f.count,
    };
    if (f.smsGateway !== null) channelObject.gateway = f.smsGateway;
    // D4: no payload field at all when the message had none.
    const expected = {
      request_id: f.requestId, message_id: f.publicId, gateway: f.channel, timestamp: Math.floor(f.at / 1000),
      ...(f.payload !== null && { payload: '\u0000p' }), type: 'outgoing', to: { phone_number: f.phone }, result: f.state,
      result_info: f.resultInfo, [f.channel === 'whatsapp_text' ? 'whatsapp_body' : f.channel]: channelObject,
    };
    const withPayloadAsGiven = f.payload === null ? JSON.stringify(expected) : JSON.stringify(expected).replace('"\\u0000p"', f.payload);
    assert.equal(text, withPayloadAsGiven, c.name);
  }
  // The same bodies written by eventParams, all in one parameter, next to other kinds of body.
  const events = cases.map((c) => ({
    accountId: 1, keyId: 2, callbackUrl: null, recipientId: 3, kind: 'sentMessage' as const, body: new SentMessageBody({ ...base, ...c.facts }),
  }));
  const mixed = [...events, { accountId: 1, keyId: null, callbackUrl: null, recipientId: null, kind: 'incomingMessage' as const, body: { text: 'ž' } }];
  const texts = (eventParams(mixed).event_bodies as Buffer).toString('utf8').split(BODY_SEPARATOR);
  assert.deepEqual(texts, [...cases.map((c) => sentMessageText({ ...base, ...c.facts })), '{"text":"ž"}']);
});

test('the sentMessage field table names the spec\'s fields in order', () => {
  assert.deepEqual(SENT_MESSAGE_FIELDS.map((f) => (typeof f.key === 'string' ? f.key : '<channel>')),
    ['request_id', 'message_id', 'gateway', 'timestamp', 'payload', 'type', 'to', 'result', 'result_info', '<channel>']);
});

test('JsonBytes writes strings and numbers exactly as JSON.stringify does', () => {
  const strings: string[] = [
    '', 'plain', 'with "quotes"', 'back\\slash', '\u0000\u0001\u001f', '\b\t\n\f\r', '\u007f DEL', 'Příliš žluťoučký kůň', 'こんにちは',
    '😀 a𝄞b', '\u2028\u2029', '\ud800 lone high', 'lone low \udfff', '\udbff\udfff', '</script>', '\u00e9',
  ];
  // And random strings over the characters that matter: ASCII edges, escapes, non-ASCII, surrogates.
  const alphabet = [0x00, 0x01, 0x1f, 0x20, 0x21, 0x22, 0x5c, 0x7e, 0x7f, 0x80, 0xe9, 0x17e, 0x2028, 0x3042, 0xd83d, 0xde00, 0xdc00, 0xfffd, 0x41, 0x7a];
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
  for (let i = 0; i < 2000; i++) {
    const len = next() % 12;
    let s = '';
    for (let j = 0; j < len; j++) s += String.fromCharCode(alphabet[next() % alphabet.length]!);
    strings.push(s);
  }
  const w = new JsonBytes(8); // small, so that writing grows it many times
  for (const s of strings) {
    w.reset();
    w.string(s);
    assert.equal(w.toString(), JSON.stringify(s), JSON.stringify(s));
  }
  const numbers = [0, 1, 9, 10, 99, 100, 230, 1_700_000_000, 2 ** 53 - 1, 2 ** 53, -1, -0, 0.5, 0.9, 0.036, 1e-7, 1e21, 123.456, Number.NaN, Infinity, -Infinity];
  for (const n of numbers) {
    w.reset();
    w.number(n);
    assert.equal(w.toString(), JSON.stringify(n), String(n));
  }
});

test('eventParams writes a prepared body as it is and stringifies object bodies', () => {
  const prepared = new RawJson(sentMessageText({
    requestId: 'r', publicId: 'p', channel: 'sms', payload: '{"a":1}', phone: '+1', state: 'sent', resultInfo: 'Sent',
    at: 1_000, sender: 'S', country: 1, operator: 2, priceCzk: 1, priceEur: 2, count: 1, smsGateway: 'high',
  }));
  const params = eventParams([
    { accountId: 1, keyId: 2, callbackUrl: 'https://x.test/', recipientId: 3, kind: 'sentMessage', body: prepared },
    { accountId: 1, keyId: null, callbackUrl: null, recipientId: null, kind: 'incomingMessage', body: { text: 'hi' } },
  ]);
  assert.deepEqual((params.event_bodies as Buffer).toString('utf8').split(BODY_SEPARATOR), [prepared.text, '{"text":"hi"}']);
});

test('eventParams lends its bodies buffer only when asked: a borrowed one is the writer\'s memory, a copy is not', () => {
  const event = (text: string) => ({ accountId: 1, keyId: null, callbackUrl: null, recipientId: null, kind: 'incomingMessage' as const, body: { text } });
  const copy = eventParams([event('first')]).event_bodies as Buffer;
  const borrowed = eventParams([event('second')], 'borrow').event_bodies as Buffer;
  assert.equal(borrowed.toString('utf8'), '{"text":"second"}');
  eventParams([event('third!')]);
  assert.equal(copy.toString('utf8'), '{"text":"first"}', 'a copy keeps its bytes');
  assert.notEqual(borrowed.toString('utf8'), '{"text":"second"}', 'a borrowed buffer is written over by the next call');
});
