/**
 * The Viber connector's rules as tables: what a send answer reports (or retries), the backoff
 * inside the step's ttl, what callback events become, the connection's configuration checks.
 */
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { attemptIdOfRef, callbackReports, decideSend, retryDelayMs, type SendContext } from '../../shared/carriers/viber/reports.js';
import { officialOutcome, httpErrorOutcome } from '../../shared/carriers/viber/status-codes.js';
import { parseOfficialCallback } from '../../shared/carriers/viber/official.js';
import { parsePartnerCallback } from '../../shared/carriers/viber/partner.js';
import { viberCallbackUrl, viberProvider, type ViberConfig } from '../../shared/carriers/viber/provider.js';
import { viber } from '../../shared/channels/viber.js';
import { mayHaveBeenTaken } from '../../shared/carriers/viber/carrier.js';
import type { ConnectionSpec } from '../../shared/carriers/provider.js';
import type { SendOutcome } from '../../shared/carriers/http-carrier.js';

const NOW = 1_767_225_600_000;
const ctx = (patch: Partial<SendContext> = {}): SendContext => ({
  attemptId: 42, carrier: 'viber.main', tries: 0, now: NOW, deadline: NOW + 600_000, policy: { baseMs: 500, maxMs: 30_000 }, random: 0.5, ...patch,
});

describe('decideSend', () => {
  const table: Array<[string, SendOutcome, unknown]> = [
    ['0 accepted: sent, the token registered', officialOutcome(0, '4000000000000001'),
      { kind: 'report', report: { attemptId: 42, carrier: 'viber.main', ref: '4000000000000001', state: 'sent', resultInfo: 'Sent', at: NOW } }],
    ['12 with the first token: sent (a re-hand)', officialOutcome(12, '4000000000000001'),
      { kind: 'report', report: { attemptId: 42, carrier: 'viber.main', ref: '4000000000000001', state: 'sent', resultInfo: 'Sent', at: NOW } }],
    ['12 without a token: sent, nothing registered', officialOutcome(12, undefined),
      { kind: 'report', report: { attemptId: 42, state: 'sent', resultInfo: 'Sent', at: NOW } }],
    ['9 not a Viber user: undelivered at once', officialOutcome(9, undefined),
      { kind: 'report', report: { attemptId: 42, state: 'undelivered', resultInfo: '[9] SRVC_NOT_VIBER_USER', at: NOW } }],
    ['10 no suitable device: undelivered', officialOutcome(10, undefined),
      { kind: 'report', report: { attemptId: 42, state: 'undelivered', resultInfo: '[10] SRVC_NO_SUITABLE_DEVICE', at: NOW } }],
    ['8 user blocked: undelivered', officialOutcome(8, undefined),
      { kind: 'report', report: { attemptId: 42, state: 'undelivered', resultInfo: '[8] SRVC_USER_BLOCKED', at: NOW } }],
    ['21 session limit: undelivered', officialOutcome(21, undefined),
      { kind: 'report', report: { attemptId: 42, state: 'undelivered', resultInfo: '[21] SRVC_WAIT_FOR_USER_RESPONSE', at: NOW } }],
    ['11 unauthorized IP: failed, a configuration warning', officialOutcome(11, undefined),
      { kind: 'report', report: { attemptId: 42, state: 'failed', resultInfo: '[11] SRVC_UNAUTHORIZED_IP', at: NOW }, warn: 'config' }],
    ['13 not permitted: failed, configuration', officialOutcome(13, undefined),
      { kind: 'report', report: { attemptId: 42, state: 'failed', resultInfo: '[13] SRVC_NOT_PERMITTED', at: NOW }, warn: 'config' }],
    ['3 bad data: failed, a request fault', officialOutcome(3, undefined),
      { kind: 'report', report: { attemptId: 42, state: 'failed', resultInfo: '[3] SRVC_BAD_DATA', at: NOW }, warn: 'request' }],
    ['1 internal failure: retried after 500 ms', officialOutcome(1, undefined),
      { kind: 'retry', delayMs: 500, info: '[1] SRVC_INTERNAL_FAILURE', throttled: false }],
    ['7 timeout: retried', officialOutcome(7, undefined), { kind: 'retry', delayMs: 500, info: '[7] SRVC_TIMEOUT', throttled: false }],
    ['HTTP 503: retried', httpErrorOutcome(503, undefined), { kind: 'retry', delayMs: 500, info: '[503] Service Unavailable', throttled: false }],
    ['HTTP 429 with Retry-After 2 s: retried after it, throttled', httpErrorOutcome(429, 'Too Many Requests', 2000),
      { kind: 'retry', delayMs: 2000, info: '[429] Too Many Requests', throttled: true }],
    ['partner 402: failed, configuration', httpErrorOutcome(402, 'Topup balance is required'),
      { kind: 'report', report: { attemptId: 42, state: 'failed', resultInfo: '[402] Topup balance is required', at: NOW }, warn: 'config' }],
    ['no answer: retried', { kind: 'retry', code: 0, info: '[0] ECONNREFUSED: connect ECONNREFUSED' },
      { kind: 'retry', delayMs: 500, info: '[0] ECONNREFUSED: connect ECONNREFUSED', throttled: false }],
  ];
  for (const [name, outcome, expected] of table) {
    it(name, () => assert.deepEqual(decideSend(outcome, ctx()), expected));
  }

  it('a retry that would end after the step\'s ttl ends the attempt failed with the last fault', () => {
    const outcome = officialOutcome(1, undefined);
    // 4th retry: 500 × 2^4 = 8 s; 9 s left (with the 1 s margin) is enough, 8.9 s is not.
    assert.equal(decideSend(outcome, ctx({ tries: 4, deadline: NOW + 9_000 })).kind, 'retry');
    assert.deepEqual(decideSend(outcome, ctx({ tries: 4, deadline: NOW + 8_900 })),
      { kind: 'report', report: { attemptId: 42, state: 'failed', resultInfo: '[1] SRVC_INTERNAL_FAILURE', at: NOW } });
  });
});

describe('retryDelayMs', () => {
  const policy = { baseMs: 500, maxMs: 30_000 };
  const table: Array<[number, number, number | undefined, number]> = [
    [0, 0.5, undefined, 500],
    [1, 0.5, undefined, 1000],
    [3, 0.5, undefined, 4000],
    [6, 0.5, undefined, 30_000], // 32 s capped
    [60, 0.5, undefined, 30_000],
    [0, 0, undefined, 400], // jitter -20 %
    [0, 0.999_999, undefined, 600], // +20 %
    [2, 0, 5000, 5000], // the carrier's Retry-After wins
  ];
  for (const [tries, random, afterMs, expected] of table) {
    it(`try ${tries}, random ${random}, afterMs ${afterMs} → ${expected}`, () => assert.equal(retryDelayMs(tries, policy, random, afterMs), expected));
  }
});

describe('callbackReports', () => {
  const names = new Map([['1001', 'Shop'], ['ShopP', 'ShopP']]);
  const cctx = { carrier: 'viber.main', recipientOf: (to: string) => names.get(to) ?? to };

  it('official receipts name the attempt by tracking data; expired is undelivered', () => {
    const events = parseOfficialCallback([
      { event: 'delivered', message_token: 4000000000000001, service_id: 1001, phone_number: '420777000200', tracking_data: '17', device: 'phone', timestamp: NOW },
      { event: 'delivered', message_token: 4000000000000001, service_id: 1001, phone_number: '420777000200', tracking_data: '17', device: 'desktop', timestamp: NOW },
      { event: 'seen', message_token: 4000000000000001, service_id: 1001, phone_number: '420777000200', tracking_data: '17', timestamp: NOW + 1 },
      { event: 'expired', message_token: 4000000000000002, service_id: 1001, phone_number: '420777000201', tracking_data: '18', timestamp: NOW + 2 },
      { event: 'delivered', message_token: 4000000000000003, service_id: 1001, phone_number: '420777000202', timestamp: NOW + 3 },
      { event: 'subscribed', service_id: 1001, phone_number: '420777000203' },
    ], NOW);
    assert.ok(Array.isArray(events));
    assert.deepEqual(callbackReports(events, cctx), {
      reports: [
        // By tracking data, for an attempt of this connection only (the status path checks it).
        { attemptId: 17, carrier: 'viber.main', state: 'delivered', resultInfo: '[0] Delivered', at: NOW },
        { attemptId: 17, carrier: 'viber.main', state: 'seen', resultInfo: '[0] Seen', at: NOW + 1 },
        // An expired message was taken first: `sent` even when this receipt overtakes the send's report.
        { attemptId: 18, carrier: 'viber.main', state: 'sent', resultInfo: 'Sent', at: NOW + 2 },
        { attemptId: 18, carrier: 'viber.main', state: 'undelivered', resultInfo: '[1] Expired', at: NOW + 2 },
        // No tracking data: by the token registered at acceptance.
        { carrier: 'viber.main', ref: '4000000000000003', state: 'delivered', resultInfo: '[0] Delivered', at: NOW + 3 },
      ],
      inbound: [],
    });
  });

  it('official replies: the service id becomes its sender name; tracking data names the message answered', () => {
    const events = parseOfficialCallback([
      { event: 'message', message_token: 5, service_id: 1001, phone_number: '420777000300', message: { text: 'Yes', tracking_data: '99' }, timestamp: NOW },
      { event: 'message', message_token: 6, service_id: 1001, phone_number: '420777000300', message: { text: 'Hi' }, timestamp: NOW },
      { event: 'message', message_token: 7, service_id: 2002, phone_number: '420777000300', message: { text: 'Who?', tracking_data: 'not-ours' }, timestamp: NOW },
    ], NOW);
    assert.ok(Array.isArray(events));
    assert.deepEqual(callbackReports(events, cctx).inbound, [
      { gateway: 'viber', sender: '420777000300', recipient: 'Shop', body: 'Yes', at: NOW, replyTo: { attemptId: 99 } },
      { gateway: 'viber', sender: '420777000300', recipient: 'Shop', body: 'Hi', at: NOW },
      { gateway: 'viber', sender: '420777000300', recipient: '2002', body: 'Who?', at: NOW },
    ]);
  });

  it('partner statuses by message_id; replies by reply_to', () => {
    const events = parsePartnerCallback([
      { message_id: 100001, status: 1, timestamp: NOW },
      { message_id: 100002, status: 4, timestamp: NOW },
      { message_id: 100003, status: 3, timestamp: NOW },
      { message_id: 100004, status: 5, timestamp: NOW },
      { message_id: 200001, source_addr: '420777000300', destination_addr: 'ShopP', text: 'Yes', reply_to: 100001, timestamp: NOW },
    ], NOW);
    assert.ok(Array.isArray(events));
    assert.deepEqual(callbackReports(events, cctx), {
      reports: [
        { carrier: 'viber.main', ref: '100001', state: 'delivered', resultInfo: '[0] Delivered', at: NOW },
        { carrier: 'viber.main', ref: '100002', state: 'undelivered', resultInfo: '[4] Undelivered', at: NOW },
        { carrier: 'viber.main', ref: '100003', state: 'failed', resultInfo: '[3] Rejected', at: NOW },
      ],
      inbound: [{ gateway: 'viber', sender: '420777000300', recipient: 'ShopP', body: 'Yes', at: NOW, replyTo: { carrier: 'viber.main', ref: '100001' } }],
    });
  });

  it('our tracking data is a positive attempt id', () => {
    const table: Array<[string | undefined, number | null]> = [
      ['17', 17], ['9007199254740991', 9007199254740991], ['9007199254740993', null], ['0', null], ['017', null], ['-1', null],
      ['1e3', null], ['', null], [undefined, null], ['20260101-aaaa-1', null],
    ];
    for (const [ref, expected] of table) assert.equal(attemptIdOfRef(ref), expected, String(ref));
  });
});

describe('the viber connection configuration', () => {
  const TOKEN = 'tok_0123456789abcdefghijklmn';
  const check = (config: Record<string, unknown>) => {
    const { error } = viberProvider.configSchema.validate(config, { abortEarly: true, convert: true });
    return error ? `${error.details[0]!.path.join('.')}: ${error.details[0]!.message.replace(/^"[^"]*" /, '')}` : 'ok';
  };
  const table: Array<[string, Record<string, unknown>, string | RegExp]> = [
    ['official, minimal', { dialect: 'official', callback_token: TOKEN }, 'ok'],
    ['partner with its key', { dialect: 'partner', credentials: 'key', callback_token: TOKEN, base_url: 'https://p.example/', mps: 50 }, 'ok'],
    ['partner without a key', { dialect: 'partner', callback_token: TOKEN }, 'credentials: is required for the partner dialect (its API key)'],
    ['official with a key', { dialect: 'official', credentials: 'key', callback_token: TOKEN }, /^credentials: is not used by the official dialect/],
    ['unknown dialect', { dialect: 'infobip', callback_token: TOKEN }, 'dialect: must be one of [official, partner]'],
    ['no token', { dialect: 'official' }, 'callback_token: is required'],
    ['a guessable token', { dialect: 'official', callback_token: 'short' }, /^callback_token: must be 24 to 256 URL-safe characters/],
    ['a token with a slash', { dialect: 'official', callback_token: `${TOKEN}/x` }, /^callback_token: must be 24/],
    ['a short shared secret', { dialect: 'official', callback_token: TOKEN, shared_secret: 'abc' }, /^shared_secret: must be 16 to 256/],
    ['mps 0', { dialect: 'official', callback_token: TOKEN, mps: 0 }, 'mps: must be a positive number'],
    ['base_url ftp', { dialect: 'official', callback_token: TOKEN, base_url: 'ftp://x' }, /^base_url: must be a valid uri/],
    ['unknown field', { dialect: 'official', callback_token: TOKEN, secret: 'x' }, 'secret: is not allowed'],
  ];
  for (const [name, config, expected] of table) {
    it(name, () => (typeof expected === 'string' ? assert.equal(check(config), expected) : assert.match(check(config), expected)));
  }

  const spec = (config: Partial<ViberConfig>): ConnectionSpec<ViberConfig> =>
    ({ name: 'main', kind: 'viber', config: { dialect: 'official', callback_token: TOKEN, ...config }, routes: [], enabled: true, source: 'admin' });

  it('names allowlist entries that are not addresses', () => {
    assert.equal(viberProvider.check!(spec({ allowed_sources: ['10.0.0.0/8', '::1'] })), null);
    assert.equal(viberProvider.check!(spec({ allowed_sources: ['10.0.0.0/8', 'viber.com', '1.2.3.4/33'] })),
      'config.allowed_sources: "viber.com", "1.2.3.4/33" are not an address or CIDR range');
  });

  it('a sender needs the detail its connection\'s dialect sends', () => {
    assert.equal(viberProvider.checkSender!(spec({}), { credentials: {}, details: { service_id: 1001 } }), null);
    assert.equal(viberProvider.checkSender!(spec({}), { credentials: {}, details: { source_name: 'Shop' } }),
      'details.service_id: is required for the official dialect of connection "main"');
    assert.equal(viberProvider.checkSender!(spec({ dialect: 'partner', credentials: 'k' }), { credentials: {}, details: { source_name: 'Shop' } }), null);
  });

  it('secrets are split off, sealed apart and masked', () => {
    const config: ViberConfig = { dialect: 'partner', credentials: 'api-key', callback_token: TOKEN, shared_secret: 'shared-secret-0123', mps: 5 };
    const { config: plain, secrets } = viberProvider.splitSecrets(config);
    assert.deepEqual(plain, { dialect: 'partner', mps: 5 });
    assert.deepEqual(secrets, { credentials: 'api-key', callback_token: TOKEN, shared_secret: 'shared-secret-0123' });
    assert.deepEqual(viberProvider.joinSecrets(plain, secrets), config);
    assert.deepEqual(viberProvider.mask(config), { dialect: 'partner', credentials: '***', callback_token: '***', shared_secret: '***', mps: 5 });
  });

  it('the callback URL ends in the token', () => {
    assert.equal(viberCallbackUrl('https://sb.example/', 'dt', TOKEN), `https://sb.example/callbacks/viber/dt/${TOKEN}`);
  });
});

describe('the viber step schema', () => {
  const validate = (title: string) => {
    const { error } = viber.schema.validate({ sender: 'Shop', buttons: [{ title, url: 'https://example.com' }] });
    return error ? `${error.details[0]!.path.join('.')}: ${error.details[0]!.message}` : 'ok';
  };
  it('a button title of 30 characters is fine; 31 is refused naming the field', () => {
    assert.equal(validate('x'.repeat(30)), 'ok');
    assert.equal(validate('😀'.repeat(30)), 'ok', 'counted as characters, not UTF-16 units');
    assert.equal(validate('x'.repeat(31)), 'buttons.0.title: must be at most 30 characters for Viber (has 31)');
  });
});


describe('mayHaveBeenTaken (at-most-once lanes, partner dialect)', () => {
  const table: Array<[string, SendOutcome, boolean]> = [
    ['accepted', { kind: 'accepted', carrierRef: '100001' }, true],
    ['no answer within the deadline', { kind: 'retry', code: 0, info: '[0] TIMEOUT: no answer within 10000 ms' }, true],
    ['the connection reset', { kind: 'retry', code: 0, info: '[0] ECONNRESET: socket hang up' }, true],
    ['the connection refused: nothing was written', { kind: 'retry', code: 0, info: '[0] ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9' }, false],
    ['an HTTP 500 answer', httpErrorOutcome(500, undefined), false],
    ['a 429 answer', httpErrorOutcome(429, undefined, 1000), false],
    ['refused for good', httpErrorOutcome(402, 'Topup balance is required'), false],
  ];
  for (const [name, outcome, expected] of table) it(name, () => assert.equal(mayHaveBeenTaken(outcome), expected));
});
