import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import type { CallbackEvent, SendOutcome } from '../../shared/carriers/http-carrier.js';
import {
  OFFICIAL_STATUSES, httpErrorOutcome, officialInfo, officialOutcome, partnerInfo, PARTNER_STATUSES,
} from '../../shared/carriers/viber/status-codes.js';
import {
  OFFICIAL_SEND_PATH, buildOfficialSend, officialTtl, parseOfficialCallback, parseOfficialSendResponse,
} from '../../shared/carriers/viber/official.js';
import {
  PARTNER_SEND_PATH, PARTNER_STATUS_PATH, buildPartnerSend, buildPartnerStatusQuery, parsePartnerCallback, parsePartnerSendResponse,
  parsePartnerStatus, partnerTtl,
} from '../../shared/carriers/viber/partner.js';
import { ViberInputError, viberButtonTitleProblem, type ViberSendInput } from '../../shared/carriers/viber/types.js';
import { officialScript, partnerScript } from '../../scripts/sim/viber/outcomes.js';
import { fixtureBuilder } from '../../scripts/sim/viber/simulator.js';

const FIXTURES = new URL('../../shared/carriers/viber/fixtures/', import.meta.url);
function fixture(name: string): unknown {
  return JSON.parse(readFileSync(new URL(name, FIXTURES), 'utf8'));
}

const base: ViberSendInput = {
  to: '380501234500',
  text: 'Your order shipped',
  ttlSeconds: 600,
  promotional: false,
  ourRef: '20260101-aaaa-1',
  sender: 1001,
};

// ---------------------------------------------------------------------------------------------
describe('official status table', () => {
  const cases: Array<[number, SendOutcome['kind'], boolean | null, string]> = [
    [1, 'retry', null, '[1] SRVC_INTERNAL_FAILURE'],
    [7, 'retry', null, '[7] SRVC_TIMEOUT'],
    [8, 'unreachable', null, '[8] SRVC_USER_BLOCKED'],
    [9, 'unreachable', null, '[9] SRVC_NOT_VIBER_USER'],
    [10, 'unreachable', null, '[10] SRVC_NO_SUITABLE_DEVICE'],
    [21, 'unreachable', null, '[21] SRVC_WAIT_FOR_USER_RESPONSE'],
    [2, 'failed', true, '[2] SRVC_BAD_SERVICE_ID'],
    [4, 'failed', true, '[4] SRVC_BLOCKED_MESSAGE_TYPE'],
    [11, 'failed', true, '[11] SRVC_UNAUTHORIZED_IP'],
    [13, 'failed', true, '[13] SRVC_NOT_PERMITTED'],
    [14, 'failed', true, '[14] SRVC_BILLING_FAILURE'],
    [17, 'failed', true, '[17] SRVC_NO_MORE_MESSAGES'],
    [38, 'failed', true, '[38] TEMPLATE_NOT_FOUND'],
    [43, 'failed', true, '[43] SRVC_SERVICE_BLOCKED'],
    [3, 'failed', false, '[3] SRVC_BAD_DATA'],
    [5, 'failed', false, '[5] SRVC_BAD_MESSAGE_TYPE'],
    [6, 'failed', false, '[6] SRVC_BAD_PARAMETERS'],
    [18, 'failed', false, '[18] SRVC_BAD_LABEL'],
    [20, 'failed', false, '[20] SRVC_INVALID_TTL'],
    [27, 'failed', false, '[27] SRVC_INVALID_PHONE_NUMBER'],
    [39, 'failed', false, '[39] TEMPLATE_VALIDATION_ERROR'],
    [99, 'failed', false, '[99] SRVC_UNKNOWN_STATUS'],
  ];
  for (const [code, kind, config, info] of cases) {
    it(`${code} → ${kind}${config === null ? '' : config ? ' (config)' : ' (request)'}`, () => {
      const out = officialOutcome(code, '123');
      assert.equal(out.kind, kind);
      assert.equal(officialInfo(code), info);
      assert.ok('info' in out);
      assert.equal(out.info, info);
      assert.equal(out.code, code);
      if (config !== null) assert.equal((out as { config: boolean }).config, config);
    });
  }

  it('0 and 12 SRVC_ALREADY_SENT are accepted with the token', () => {
    assert.deepEqual(officialOutcome(0, '77'), { kind: 'accepted', carrierRef: '77' });
    assert.deepEqual(officialOutcome(12, '77'), { kind: 'accepted', carrierRef: '77' });
    assert.deepEqual(officialOutcome(12, undefined), { kind: 'accepted', carrierRef: '' });
  });

  it('every listed code has an SRVC-style name and a class', () => {
    for (const [code, entry] of Object.entries(OFFICIAL_STATUSES)) {
      assert.match(entry.name, /^(SRVC|TEMPLATE)_[A-Z_]+$/, code);
      assert.ok(['accepted', 'unreachable', 'retry', 'config', 'request'].includes(entry.class));
    }
  });
});

describe('partner error and status tables', () => {
  const cases: Array<[number, string | undefined, SendOutcome]> = [
    [400, 'Invalid Parameter: text', { kind: 'failed', code: 400, info: '[400] Invalid Parameter: text', config: false }],
    [401, 'Unauthorized', { kind: 'failed', code: 401, info: '[401] Unauthorized', config: true }],
    [402, 'Topup balance is required', { kind: 'failed', code: 402, info: '[402] Topup balance is required', config: true }],
    [429, 'Too Many Requests', { kind: 'retry', code: 429, info: '[429] Too Many Requests' }],
    [500, 'Internal server error', { kind: 'retry', code: 500, info: '[500] Internal server error' }],
    [503, undefined, { kind: 'retry', code: 503, info: '[503] Service Unavailable' }],
    [404, undefined, { kind: 'failed', code: 404, info: '[404] Not Found', config: false }],
    [418, undefined, { kind: 'failed', code: 418, info: '[418] HTTP 418', config: false }],
  ];
  for (const [status, name, expected] of cases) {
    it(`HTTP ${status} → ${expected.kind}`, () => assert.deepEqual(httpErrorOutcome(status, name), expected));
  }

  it('status codes name receipts; pending and unknown make none', () => {
    const expected: Record<number, [string, string | null]> = {
      0: ['Sent', 'sent'], 1: ['Delivered', 'delivered'], 2: ['Error', 'failed'], 3: ['Rejected', 'failed'],
      4: ['Undelivered', 'undelivered'], 5: ['Pending', null], 20: ['Unknown', null],
    };
    assert.deepEqual(Object.keys(PARTNER_STATUSES).map(Number).sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 20]);
    for (const [code, [name, receipt]] of Object.entries(expected)) {
      assert.equal(PARTNER_STATUSES[Number(code)]?.name, name);
      assert.equal(PARTNER_STATUSES[Number(code)]?.receipt, receipt);
      assert.equal(partnerInfo(Number(code)), `[${code}] ${name}`);
    }
  });
});

// ---------------------------------------------------------------------------------------------
describe('viberButtonTitleProblem', () => {
  const cases: Array<[string, string | null]> = [
    ['Track order', null],
    ['x'.repeat(30), null],
    ['é'.repeat(30), null],
    ['😀'.repeat(30), null], // 30 code points, 60 UTF-16 units
    ['x'.repeat(31), 'must be at most 30 characters for Viber (has 31)'],
    ['x'.repeat(100), 'must be at most 30 characters for Viber (has 100)'],
    ['', 'must not be empty'],
  ];
  for (const [title, problem] of cases) {
    it(`${JSON.stringify(title.slice(0, 12))}… (${[...title].length}) → ${problem ?? 'ok'}`, () => assert.equal(viberButtonTitleProblem(title), problem));
  }
});

describe('ttl clamping', () => {
  const cases: Array<[number, number, number]> = [
    // step ttl seconds, official, partner
    [0, 30, 40],
    [10, 30, 40],
    [30, 30, 40],
    [39.6, 40, 40],
    [600, 600, 600],
    [21_600, 21_600, 21_600],
    [21_601, 21_601, 21_600],
    [86_400, 86_400, 21_600],
    [1_209_600, 1_209_600, 21_600],
    [1440 * 60 * 30, 1_209_600, 21_600],
    [Number.NaN, 1_209_600, 21_600],
  ];
  for (const [ttl, official, partner] of cases) {
    it(`${ttl} s → official ${official}, partner ${partner}`, () => {
      assert.equal(officialTtl(ttl), official);
      assert.equal(partnerTtl(ttl), partner);
      assert.equal(buildOfficialSend({ ...base, ttlSeconds: ttl }).json.ttl, official);
      assert.equal(buildPartnerSend({ ...base, sender: 'Shop', credentials: { apiKey: 'k' }, ttlSeconds: ttl }).json.validity_period, partner);
    });
  }
});

// ---------------------------------------------------------------------------------------------
describe('official buildSend', () => {
  const cases: Array<[string, Partial<ViberSendInput>, number, string]> = [
    ['transactional text', {}, 206, 'transaction'],
    ['promotional text', { promotional: true }, 225, 'promotion'],
    ['text + button (transactional step)', { button: { title: 'Track', url: 'https://example.com/t' } }, 209, 'promotion'],
    ['text + button (promotional)', { promotional: true, button: { title: 'Shop', url: 'https://example.com/s' } }, 209, 'promotion'],
  ];
  for (const [name, patch, type, label] of cases) {
    it(`${name} → type ${type}, label ${label}, tracking data`, () => {
      const req = buildOfficialSend({ ...base, ...patch, seq: 42 });
      assert.equal(req.method, 'POST');
      assert.equal(req.path, OFFICIAL_SEND_PATH);
      assert.deepEqual(req.headers, {});
      const message: Record<string, unknown> = { '#txt': base.text, '#tracking_data': base.ourRef };
      if (patch.button) Object.assign(message, { '#caption': patch.button.title, '#action': patch.button.url });
      assert.deepEqual(req.json, { service_id: 1001, dest: base.to, seq: 42, type, label, ttl: 600, message });
    });
  }

  it('takes a service id given as decimal text; refuses other senders', () => {
    assert.equal(buildOfficialSend({ ...base, sender: '2002' }).json.service_id, 2002);
    for (const sender of ['Shop', '', '-1', 0, 1.5, '12a']) {
      assert.throws(() => buildOfficialSend({ ...base, sender }), ViberInputError, String(sender));
    }
  });

  it('derives distinct increasing seqs when none is given', () => {
    const a = buildOfficialSend(base).json.seq as number;
    const b = buildOfficialSend(base).json.seq as number;
    assert.ok(Number.isSafeInteger(a) && b === a + 1);
  });
});

describe('official parseSendResponse', () => {
  const cases: Array<[string, number, unknown, SendOutcome]> = [
    ['accepted', 200, { status: 0, seq: 1, message_token: 4000000000000001 }, { kind: 'accepted', carrierRef: '4000000000000001' }],
    ['accepted, string token', 200, { status: 0, seq: 1, message_token: '5379697806260881548' }, { kind: 'accepted', carrierRef: '5379697806260881548' }],
    ['already sent', 200, { status: 12, seq: 1, message_token: 9 }, { kind: 'accepted', carrierRef: '9' }],
    ['not a user', 200, { status: 9, seq: 1 }, { kind: 'unreachable', code: 9, info: '[9] SRVC_NOT_VIBER_USER' }],
    ['internal failure', 200, { status: 1, seq: 1 }, { kind: 'retry', code: 1, info: '[1] SRVC_INTERNAL_FAILURE' }],
    ['bad service', 200, { status: 2, seq: 1 }, { kind: 'failed', code: 2, info: '[2] SRVC_BAD_SERVICE_ID', config: true }],
    ['proxy 502', 502, '<html>bad gateway</html>', { kind: 'retry', code: 502, info: '[502] Bad Gateway' }],
    ['proxy 401', 401, null, { kind: 'failed', code: 401, info: '[401] Unauthorized', config: true }],
    ['200 not JSON', 200, '<html>', { kind: 'failed', code: 200, info: '[200] Unreadable answer: not a JSON object', config: false }],
    ['200 without status', 200, { seq: 1 }, { kind: 'failed', code: 200, info: '[200] Unreadable answer: no integer status', config: false }],
  ];
  for (const [name, status, body, expected] of cases) {
    it(name, () => assert.deepEqual(parseOfficialSendResponse(status, body), expected));
  }
});

describe('official parseCallback', () => {
  const now = 1_800_000_000_000;
  it('delivered, seen and expired fixtures are receipts keyed by message_token with our tracking data', () => {
    assert.deepEqual(parseOfficialCallback(fixture('official-delivered.json'), now), [
      { kind: 'receipt', carrierRef: '4000000000000001', ourRef: '20260101-aaaa-1', status: 'delivered', at: 1767225600000 },
    ]);
    assert.deepEqual(parseOfficialCallback(fixture('official-seen.json'), now), [
      { kind: 'receipt', carrierRef: '4000000000000001', ourRef: '20260101-aaaa-1', status: 'seen', at: 1767225660000 },
    ]);
    assert.deepEqual(parseOfficialCallback(fixture('official-expired.json'), now), [
      { kind: 'receipt', carrierRef: '4000000000000002', ourRef: '20260101-aaaa-2', status: 'expired', at: 1767312000000 },
    ]);
  });

  it('a reply is inbound from the phone number to the service id, naming our message by tracking data', () => {
    assert.deepEqual(parseOfficialCallback(fixture('official-message.json'), now), [{
      kind: 'inbound', from: '380501234500', to: '1001', text: 'Yes, please', at: 1767225700000,
      carrierRef: '4000000000000003', replyToOurRef: '20260101-aaaa-1',
    }]);
  });

  it('subscribe events make no event; a batch keeps the first delivered of two devices', () => {
    assert.deepEqual(parseOfficialCallback(fixture('official-subscribed.json'), now), []);
    assert.deepEqual(parseOfficialCallback(fixture('official-batch.json'), now), [
      { kind: 'receipt', carrierRef: '4000000000000004', ourRef: '20260101-aaaa-3', status: 'delivered', at: 1767225600000 },
      { kind: 'receipt', carrierRef: '4000000000000004', ourRef: '20260101-aaaa-3', status: 'seen', at: 1767225602000 },
    ]);
  });

  it('without timestamp or tracking data: receipt time, no ourRef', () => {
    assert.deepEqual(parseOfficialCallback({ event: 'seen', message_token: '12' }, now), [{ kind: 'receipt', carrierRef: '12', status: 'seen', at: now }]);
    assert.deepEqual(parseOfficialCallback([], now), []);
  });

  const bad: Array<[string, unknown, string]> = [
    ['a string', 'delivered', 'body: must be a JSON object or an array of objects'],
    ['null', null, 'body: must be a JSON object or an array of objects'],
    ['no event', { message_token: 1 }, 'event: missing'],
    ['unknown event', { event: 'clicked', message_token: 1 }, 'event: unknown value "clicked"'],
    ['no token', { event: 'delivered' }, 'message_token: missing or not an id'],
    ['token object', { event: 'delivered', message_token: {} }, 'message_token: missing or not an id'],
    ['negative token', { event: 'delivered', message_token: -1 }, 'message_token: missing or not an id'],
    ['tracking not text', { event: 'seen', message_token: 1, tracking_data: 5 }, 'tracking_data: must be a string'],
    ['device not text', { event: 'delivered', message_token: 1, device: 1 }, 'device: must be a string'],
    ['bad timestamp', { event: 'seen', message_token: 1, timestamp: '2026-01-01' }, 'timestamp: must be unix milliseconds'],
    ['array element', [{ event: 'seen', message_token: 1 }, 7], '[1]: must be an object'],
    ['array field', [{ event: 'seen', message_token: 1 }, { event: 'seen' }], '[1].message_token: missing or not an id'],
    ['reply without text', { event: 'message', message_token: 1, service_id: 1001, phone_number: '380501234500', message: {} }, 'message.text: must be a string'],
    ['reply without message', { event: 'message', message_token: 1, service_id: 1001, phone_number: '380501234500' }, 'message: must be an object'],
    ['reply bad phone', { event: 'message', message_token: 1, service_id: 1001, phone_number: '+3805', message: { text: 'x' } }, 'phone_number: must be digits'],
    ['reply no service', { event: 'message', message_token: 1, phone_number: '380501234500', message: { text: 'x' } }, 'service_id: missing or not an id'],
  ];
  for (const [name, body, error] of bad) {
    it(`malformed: ${name} → ${error}`, () => assert.deepEqual(parseOfficialCallback(body, now), { error }));
  }
});

// ---------------------------------------------------------------------------------------------
describe('partner buildSend', () => {
  const input: ViberSendInput = { ...base, sender: 'Shop', credentials: { apiKey: 'secret-key' }, callbackUrl: 'https://sb.example/callbacks/viber/dt/tok' };
  const auth = `Basic ${Buffer.from('secret-key').toString('base64')}`;
  const cases: Array<[string, Partial<ViberSendInput>, Record<string, unknown>]> = [
    ['transactional text', {}, { message_type: 206, source_type: 2 }],
    ['promotional text', { promotional: true }, { message_type: 206, source_type: 1 }],
    ['text + button', { button: { title: 'Track', url: 'https://example.com/t' } }, { message_type: 208, source_type: 2, button_caption: 'Track', button_action: 'https://example.com/t' }],
  ];
  for (const [name, patch, fields] of cases) {
    it(name, () => {
      const req = buildPartnerSend({ ...input, ...patch });
      assert.equal(req.path, PARTNER_SEND_PATH);
      assert.deepEqual(req.headers, { authorization: auth });
      assert.deepEqual(req.json, {
        source_addr: 'Shop', destination_addr: base.to, text: base.text,
        callback_url: input.callbackUrl, validity_period: 600, ...fields,
      });
    });
  }

  it('refuses a missing API key and bad source names', () => {
    assert.throws(() => buildPartnerSend({ ...input, credentials: undefined }), /credentials\.apiKey/);
    assert.throws(() => buildPartnerSend({ ...input, sender: '' }), ViberInputError);
    assert.throws(() => buildPartnerSend({ ...input, sender: 'x'.repeat(21) }), ViberInputError);
  });

  it('builds a status poll', () => {
    assert.deepEqual(buildPartnerStatusQuery('100001', { apiKey: 'secret-key' }), {
      method: 'POST', path: PARTNER_STATUS_PATH, headers: { authorization: auth }, json: { message_id: 100001 },
    });
  });
});

describe('partner parseSendResponse', () => {
  const cases: Array<[string, number, unknown, Record<string, string> | undefined, SendOutcome]> = [
    ['accepted', 200, { message_id: 100001 }, undefined, { kind: 'accepted', carrierRef: '100001' }],
    ['400', 400, { name: 'Invalid Parameter: text', message: 'Empty parameter or parameter validation error', code: 1, status: 400 }, undefined,
      { kind: 'failed', code: 400, info: '[400] Invalid Parameter: text', config: false }],
    ['401 name only', 401, { name: 'Unauthorized', status: 401 }, undefined, { kind: 'failed', code: 401, info: '[401] Unauthorized', config: true }],
    ['402', 402, { name: 'Topup balance is required', message: 'User balance is empty', code: 3, status: 402 }, undefined,
      { kind: 'failed', code: 402, info: '[402] Topup balance is required', config: true }],
    ['429 with Retry-After', 429, { name: 'Too Many Requests', message: 'Rate limit exceeded', code: 0, status: 429 }, { 'retry-after': '2' },
      { kind: 'retry', code: 429, info: '[429] Too Many Requests', afterMs: 2000 }],
    ['500', 500, { name: 'Internal server error', message: '…', code: 2, status: 500 }, undefined, { kind: 'retry', code: 500, info: '[500] Internal server error' }],
    ['502 without body', 502, null, undefined, { kind: 'retry', code: 502, info: '[502] Bad Gateway' }],
    ['error body on a 200', 200, { name: 'Topup balance is required', message: 'User balance is empty', code: 3, status: 402 }, undefined,
      { kind: 'failed', code: 402, info: '[402] Topup balance is required', config: true }],
    ['200 without message_id', 200, { ok: true }, undefined, { kind: 'failed', code: 200, info: '[200] Unreadable answer: no message_id', config: false }],
  ];
  for (const [name, status, body, headers, expected] of cases) {
    it(name, () => assert.deepEqual(parsePartnerSendResponse(status, body, headers), expected));
  }
});

describe('partner parseCallback', () => {
  const now = 1_800_000_000_000;
  it('fixtures: status changes by message_id and replies', () => {
    assert.deepEqual(parsePartnerCallback(fixture('partner-status.json'), now), [
      { kind: 'receipt', carrierRef: '100001', status: 'delivered', at: 1767225600000 },
    ]);
    assert.deepEqual(parsePartnerCallback(fixture('partner-status-undelivered.json'), now), [
      { kind: 'receipt', carrierRef: '100002', status: 'undelivered', code: 4, info: '[4] Undelivered', at: 1767225600000 },
    ]);
    assert.deepEqual(parsePartnerCallback(fixture('partner-reply.json'), now), [{
      kind: 'inbound', from: '380501234500', to: 'Shop', text: 'Yes, please', at: 1767225700000, carrierRef: '200001', replyToCarrierRef: '100001',
    }]);
  });

  it('statuses in a batch; pending and unknown make no event', () => {
    const events = parsePartnerCallback([
      { message_id: 1, status: 0 }, { message_id: 1, status: 5 }, { message_id: 1, status: 20 },
      { message_id: 2, status: 2 }, { message_id: 3, status: 3 },
    ], now) as CallbackEvent[];
    assert.deepEqual(events, [
      { kind: 'receipt', carrierRef: '1', status: 'sent', at: now },
      { kind: 'receipt', carrierRef: '2', status: 'failed', code: 2, info: '[2] Error', at: now },
      { kind: 'receipt', carrierRef: '3', status: 'failed', code: 3, info: '[3] Rejected', at: now },
    ]);
  });

  it('a status poll answer is read like a callback', () => {
    assert.deepEqual(parsePartnerStatus(200, { message_id: 7, status: 1 }, now), { kind: 'receipt', carrierRef: '7', status: 'delivered', at: now });
    assert.equal(parsePartnerStatus(200, { message_id: 7, status: 5 }, now), null);
    assert.deepEqual(parsePartnerStatus(401, { name: 'Unauthorized', status: 401 }, now), { error: 'status poll answered HTTP 401' });
  });

  const bad: Array<[string, unknown, string]> = [
    ['number', 5, 'body: must be a JSON object or an array of objects'],
    ['no message_id', { status: 1 }, 'message_id: missing or not an id'],
    ['unknown status', { message_id: 1, status: 9 }, 'status: unknown value 9'],
    ['status as text', { message_id: 1, status: '1' }, 'status: unknown value "1"'],
    ['reply text not a string', { message_id: 1, text: 5 }, 'text: must be a string'],
    ['reply without sender', { message_id: 1, text: 'hi', destination_addr: 'Shop' }, 'source_addr: must be digits'],
    ['reply without destination', { message_id: 1, text: 'hi', source_addr: '380501234500' }, 'destination_addr: must be a string'],
    ['reply bad reply_to', { message_id: 1, text: 'hi', source_addr: '380501234500', destination_addr: 'Shop', reply_to: {} }, 'reply_to: not an id'],
    ['array field', [{ message_id: 1, status: 1 }, { status: 1 }], '[1].message_id: missing or not an id'],
  ];
  for (const [name, body, error] of bad) {
    it(`malformed: ${name} → ${error}`, () => assert.deepEqual(parsePartnerCallback(body, now), { error }));
  }
});

describe('fixtures', () => {
  it('every fixture parses with its dialect without error', () => {
    const files = readdirSync(FIXTURES).filter((f) => f.endsWith('.json'));
    assert.ok(files.length >= 9);
    for (const f of files) {
      const parse = f.startsWith('official-') ? parseOfficialCallback : parsePartnerCallback;
      const out = parse(fixture(f));
      assert.ok(Array.isArray(out), `${f}: ${JSON.stringify(out)}`);
    }
  });
});

describe('simulator fixture builder', () => {
  it('fills the fixture in its key order, drops undefined, refuses fields the fixture lacks', () => {
    const build = fixtureBuilder({ a: 1, m: { t: 'x', u: 'y' }, z: 0 }, ['z', 'm.u']);
    assert.equal(JSON.stringify(build({ z: 9, 'm.u': undefined })), '{"a":1,"m":{"t":"x"},"z":9}');
    assert.throws(() => fixtureBuilder({ a: 1 }, ['b']), /fixture has no field b/);
    assert.throws(() => fixtureBuilder({ a: 1 }, ['a.b']), /fixture has no field a\.b/);
  });
});

// ---------------------------------------------------------------------------------------------
describe('simulator outcome table', () => {
  const t = { callbackDelayMs: 20, expireAfterMs: 1000 };
  const official: Array<[string, number, string[]]> = [
    ['380501234500', 0, ['20 delivered phone', '40 seen phone']],
    ['380501234501', 0, ['1000 expired -']],
    ['380501234502', 1, []],
    ['380501234503', 0, []],
    ['380501234504', 9, []],
    ['380501234505', 8, []],
    ['380501234506', 10, []],
    ['380501234507', 21, []],
    ['380501234508', 0, ['20 delivered phone', '30 delivered desktop', '40 seen phone']],
    ['380501234509', 13, []],
    ['380501234510', 0, ['20 seen phone']],
  ];
  for (const [dest, status, receipts] of official) {
    it(`official ${dest.slice(-2)} → status ${status}, ${receipts.length} receipts`, () => {
      const s = officialScript(dest, 600, t);
      assert.equal(s.status, status);
      assert.deepEqual(s.receipts.map((r) => `${r.afterMs} ${r.event} ${r.device ?? '-'}`), receipts);
    });
  }
  it('official 01 expires after the ttl when it is shorter', () => {
    assert.equal(officialScript('380501234501', 30, { callbackDelayMs: 20, expireAfterMs: 60_000 }).receipts[0]?.afterMs, 30_000);
  });

  const partner: Array<[string, number | null, string[]]> = [
    ['380501234500', null, ['20 1']],
    ['380501234501', null, ['1000 4']],
    ['380501234502', 500, []],
    ['380501234503', null, []],
    ['380501234504', null, ['20 4']],
    ['380501234505', null, ['20 3']],
    ['380501234506', null, ['20 2']],
    ['380501234507', 429, []],
    ['380501234508', null, ['20 1', '30 1']],
    ['380501234509', 402, []],
  ];
  for (const [dest, error, statuses] of partner) {
    it(`partner ${dest.slice(-2)} → ${error ?? 'accepted'}`, () => {
      const s = partnerScript(dest, 600, t);
      assert.equal(s.error?.httpStatus ?? null, error);
      assert.deepEqual(s.statuses.map((x) => `${x.afterMs} ${x.status}`), statuses);
    });
  }
});
