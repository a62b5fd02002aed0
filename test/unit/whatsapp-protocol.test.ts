/**
 * The WhatsApp connector's pure protocol modules (shared/carriers/whatsapp/): Meta error codes to
 * send outcomes, the send-body builders and the template parameter check, and the webhook side
 * (signature over the raw bytes, the hub handshake, the envelope read into callback events).
 */
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { describe, it } from 'node:test';
import { graphErrorClass, graphErrorOutcome, outcomeForCode, readGraphError } from '../../shared/carriers/whatsapp/errors.js';
import { buildTemplateMessage, buildTextMessage, checkTemplateParams, findTemplate, mediaKindOfUrl, templateShape } from '../../shared/carriers/whatsapp/messages.js';
import type { GraphTemplate } from '../../shared/carriers/whatsapp/types.js';
import { handshake, parseAccountUpdates, parseWebhook, signatureHeader, verifySignature } from '../../shared/carriers/whatsapp/webhook.js';

const graphError = (code: number, message: string): unknown => ({
  error: { message, type: 'OAuthException', code, error_data: { messaging_product: 'whatsapp', details: 'details' }, fbtrace_id: 'Az8or2yhqkZfEZ-_4Qn_Bam' },
});

describe('Meta error codes', () => {
  const classes: [number, string][] = [
    [131026, 'unreachable'], [131047, 'unreachable'], [131049, 'unreachable'], [131050, 'unreachable'], [130472, 'unreachable'],
    [130429, 'retry'], [131048, 'retry'], [131056, 'retry'], [80007, 'retry'], [4, 'retry'], [131000, 'retry'], [1, 'retry'], [2, 'retry'],
    [131016, 'retry'], [132069, 'retry'],
    [131042, 'config'], [132001, 'config'], [132015, 'config'], [132016, 'config'], [132068, 'config'], [0, 'config'], [190, 'config'],
    [10, 'config'], [200, 'config'], [250, 'config'], [299, 'config'], [368, 'config'], [131031, 'config'],
    [100, 'request'], [131008, 'request'], [131009, 'request'], [131051, 'request'], [132000, 'request'], [132005, 'request'],
    [132007, 'request'], [132012, 'request'], [131021, 'request'], [300, 'request'], [199, 'request'], [987654, 'request'],
  ];
  for (const [code, cls] of classes) {
    it(`${code} is ${cls}`, () => assert.equal(graphErrorClass(code), cls));
  }

  it('outcomes carry the class as the SendOutcome kind and config flag', () => {
    assert.deepEqual(outcomeForCode(131026), { kind: 'unreachable', code: 131026, info: '[131026] Message Undeliverable' });
    assert.deepEqual(outcomeForCode(130429), { kind: 'retry', code: 130429, info: '[130429] Rate limit hit' });
    assert.deepEqual(outcomeForCode(131042), { kind: 'failed', code: 131042, info: '[131042] Business eligibility payment issue', config: true });
    assert.deepEqual(outcomeForCode(131021), { kind: 'failed', code: 131021, info: '[131021] Recipient cannot be sender', config: false });
    assert.deepEqual(outcomeForCode(555555), { kind: 'failed', code: 555555, info: '[555555] Unknown error', config: false });
  });

  const answers: [string, number, unknown, unknown][] = [
    ['title from "(#code) Title"', 400, graphError(131056, '(#131056) (Business Account, Consumer Account) pair rate limit hit'),
      { kind: 'retry', code: 131056, info: '[131056] (Business Account, Consumer Account) pair rate limit hit' }],
    ['the code decides, not HTTP 500', 500, graphError(131021, '(#131021) Recipient cannot be sender'),
      { kind: 'failed', code: 131021, info: '[131021] Recipient cannot be sender', config: false }],
    ['throttling as HTTP 400', 400, graphError(130429, '(#130429) Rate limit hit'), { kind: 'retry', code: 130429, info: '[130429] Rate limit hit' }],
    ['a message without (#code) as it is', 401, graphError(190, 'Invalid OAuth access token - Cannot parse access token'),
      { kind: 'failed', code: 190, info: '[190] Invalid OAuth access token - Cannot parse access token', config: true }],
    ['no message: the table title', 400, { error: { code: 131047, type: 'OAuthException' } }, { kind: 'unreachable', code: 131047, info: '[131047] Re-engagement message' }],
    ['an empty message: the table title', 400, { error: { code: 4, message: ' ' } }, { kind: 'retry', code: 4, info: '[4] API Too Many Calls' }],
    ['unknown code, own title', 400, graphError(139999, '(#139999) Something new'), { kind: 'failed', code: 139999, info: '[139999] Something new', config: false }],
    ['unknown code, odd message', 400, graphError(139998, 'Odd   multi\nline'), { kind: 'failed', code: 139998, info: '[139998] Odd multi line', config: false }],
    ['code as a string', 400, { error: { message: '(#131026) Message Undeliverable', code: '131026' } },
      { kind: 'unreachable', code: 131026, info: '[131026] Message Undeliverable' }],
    ['5xx without a code', 503, '<html>Service Unavailable</html>', { kind: 'retry', code: 0, info: 'HTTP 503 from Graph' }],
    ['5xx with a message but no code', 502, { error: { message: 'upstream' } }, { kind: 'retry', code: 0, info: 'HTTP 502: upstream' }],
    ['429 without a code', 429, null, { kind: 'retry', code: 0, info: 'HTTP 429 from Graph' }],
    ['401 without a code', 401, {}, { kind: 'failed', code: 0, info: 'HTTP 401 from Graph', config: true }],
    ['404 without a code', 404, 'Not Found', { kind: 'failed', code: 0, info: 'HTTP 404 from Graph', config: false }],
  ];
  for (const [name, status, body, want] of answers) {
    it(`graphErrorOutcome: ${name}`, () => assert.deepEqual(graphErrorOutcome(status, body), want));
  }

  it('long titles are cut', () => {
    const f = readGraphError(graphError(100, `(#100) ${'x'.repeat(500)}`));
    assert.equal(f?.code, 100);
    assert.equal(f?.title.length, 200);
  });

  it('reads a status webhook error item too', () => {
    assert.deepEqual(readGraphError({ code: 131047, title: 'Re-engagement message', message: 'Re-engagement message' }), { code: 131047, title: 'Re-engagement message' });
    assert.equal(readGraphError('text'), null);
    assert.equal(readGraphError({ messaging_product: 'whatsapp' }), null);
  });
});

// ---------------------------------------------------------------------------

const ORDER: GraphTemplate = {
  name: 'order_update', language: 'en_US', status: 'APPROVED', category: 'UTILITY', parameter_format: 'POSITIONAL',
  components: [
    { type: 'HEADER', format: 'TEXT', text: 'Order {{1}}' },
    { type: 'BODY', text: 'Hi {{1}}, your order {{2}} is on its way. {{1}}!' },
    { type: 'BUTTONS', buttons: [{ type: 'URL', text: 'Track', url: 'https://shop.example/t/{{1}}' }, { type: 'QUICK_REPLY', text: 'Stop' }] },
  ],
};
const NAMED: GraphTemplate = {
  name: 'named_greeting', language: 'cs', parameter_format: 'NAMED',
  components: [
    { type: 'HEADER', format: 'TEXT', text: 'For {{customer}}' },
    { type: 'BODY', text: 'Hello {{first_name}}, table for {{guests}}.' },
  ],
};
const PROMO: GraphTemplate = { name: 'promo', language: 'en_US', components: [{ type: 'HEADER', format: 'IMAGE' }, { type: 'BODY', text: 'New: {{1}}' }] };
const AUTH: GraphTemplate = {
  name: 'verify_code', language: 'en_US', category: 'AUTHENTICATION',
  components: [{ type: 'BODY', text: '*{{1}}* is your code.' }, { type: 'BUTTONS', buttons: [{ type: 'OTP', text: 'Copy code' }] }],
};
const COUPON: GraphTemplate = {
  name: 'coupon', language: 'en_US',
  components: [{ type: 'BODY', text: 'Take it.' }, { type: 'BUTTONS', buttons: [{ type: 'COPY_CODE' }, { type: 'FLOW', text: 'Open' }, { type: 'PHONE_NUMBER', text: 'Call' }] }],
};

describe('send bodies', () => {
  it('text: preview off, our reference, quoting', () => {
    assert.deepEqual(buildTextMessage({ to: '+420777123456', text: 'Hi there', ourRef: 'msg-1-0' }), {
      messaging_product: 'whatsapp', recipient_type: 'individual', to: '420777123456', biz_opaque_callback_data: 'msg-1-0',
      type: 'text', text: { body: 'Hi there', preview_url: false },
    });
    const quoted = buildTextMessage({ to: '420777123456', text: 'x', replyTo: 'wamid.ABC' });
    assert.deepEqual(quoted.context, { message_id: 'wamid.ABC' });
    assert.equal('biz_opaque_callback_data' in quoted, false);
  });

  it('template without a cached template: positional, header URL by extension, url buttons, default language', () => {
    const body = buildTemplateMessage({
      to: '420777123456', name: 'anything', params: ['Jana', 'A-1'], paramsHeader: ['https://cdn.example/docs/Invoice%2042.pdf'],
      paramsButtons: ['', 'A-1'], ourRef: 'r1',
    });
    assert.deepEqual(body.template, {
      name: 'anything', language: { code: 'en_US', policy: 'deterministic' },
      components: [
        { type: 'header', parameters: [{ type: 'document', document: { link: 'https://cdn.example/docs/Invoice%2042.pdf', filename: 'Invoice 42.pdf' } }] },
        { type: 'body', parameters: [{ type: 'text', text: 'Jana' }, { type: 'text', text: 'A-1' }] },
        { type: 'button', index: '1', sub_type: 'url', parameters: [{ type: 'text', text: 'A-1' }] },
      ],
    });
    assert.equal(body.biz_opaque_callback_data, 'r1');
    assert.equal(body.type, 'template');
  });

  const kinds: [string, string][] = [
    ['https://x.example/a.JPG', 'image'], ['https://x.example/clip.mp4?sig=1', 'video'], ['https://x.example/a.docx', 'document'],
    ['https://x.example/banner', 'image'], ['https://x.example/a.unknown', 'image'], ['not a url', 'image'],
  ];
  for (const [url, kind] of kinds) it(`media kind of ${url} is ${kind}`, () => assert.equal(mediaKindOfUrl(url), kind));

  it('a text header that is not a URL stays text; no params means no components', () => {
    const body = buildTemplateMessage({ to: '1', name: 'n', language: 'cs', paramsHeader: ['Hello'] });
    assert.deepEqual(body.template?.components, [{ type: 'header', parameters: [{ type: 'text', text: 'Hello' }] }]);
    assert.equal(body.template?.language.code, 'cs');
    assert.equal(buildTemplateMessage({ to: '1', name: 'hello_world' }).template?.components, undefined);
  });

  it('with the cached template: its language, a URL in a TEXT header stays text, quick reply payload', () => {
    const body = buildTemplateMessage({ to: '1', name: 'order_update', params: ['Jana', 'A-1'], paramsHeader: ['https://a.example/x.png'], paramsButtons: ['A-1', 'stop'] }, ORDER);
    assert.equal(body.template?.language.code, 'en_US');
    assert.deepEqual(body.template?.components, [
      { type: 'header', parameters: [{ type: 'text', text: 'https://a.example/x.png' }] },
      { type: 'body', parameters: [{ type: 'text', text: 'Jana' }, { type: 'text', text: 'A-1' }] },
      { type: 'button', index: '0', sub_type: 'url', parameters: [{ type: 'text', text: 'A-1' }] },
      { type: 'button', index: '1', sub_type: 'quick_reply', parameters: [{ type: 'payload', payload: 'stop' }] },
    ]);
    assert.equal(buildTemplateMessage({ to: '1', name: 'order_update', language: 'de' }, ORDER).template?.language.code, 'de');
  });

  it('named templates carry parameter_name', () => {
    const body = buildTemplateMessage({ to: '1', name: 'named_greeting', params: ['Jana', '4'], paramsHeader: ['Jana N.'] }, NAMED);
    assert.deepEqual(body.template?.components, [
      { type: 'header', parameters: [{ type: 'text', text: 'Jana N.', parameter_name: 'customer' }] },
      { type: 'body', parameters: [{ type: 'text', text: 'Jana', parameter_name: 'first_name' }, { type: 'text', text: '4', parameter_name: 'guests' }] },
    ]);
    assert.equal(body.template?.language.code, 'cs');
  });

  it('a media header follows the template format; a value that is not a URL is a media id', () => {
    const byUrl = buildTemplateMessage({ to: '1', name: 'promo', params: ['x'], paramsHeader: ['https://a.example/clip.mp4'] }, PROMO);
    assert.deepEqual(byUrl.template?.components?.[0], { type: 'header', parameters: [{ type: 'image', image: { link: 'https://a.example/clip.mp4' } }] });
    const byId = buildTemplateMessage({ to: '1', name: 'promo', params: ['x'], paramsHeader: ['1234567890'] }, PROMO);
    assert.deepEqual(byId.template?.components?.[0], { type: 'header', parameters: [{ type: 'image', image: { id: '1234567890' } }] });
  });

  it('button sub types: OTP as url, COPY_CODE coupon, FLOW action', () => {
    assert.deepEqual(buildTemplateMessage({ to: '1', name: 'verify_code', params: ['123456'], paramsButtons: ['123456'] }, AUTH).template?.components?.[1],
      { type: 'button', index: '0', sub_type: 'url', parameters: [{ type: 'text', text: '123456' }] });
    const coupon = buildTemplateMessage({ to: '1', name: 'coupon', paramsButtons: ['SAVE10', 'tok'] }, COUPON).template?.components;
    assert.deepEqual(coupon, [
      { type: 'button', index: '0', sub_type: 'copy_code', parameters: [{ type: 'coupon_code', coupon_code: 'SAVE10' }] },
      { type: 'button', index: '1', sub_type: 'flow', parameters: [{ type: 'action', action: { flow_token: 'tok' } }] },
    ]);
  });

  it('template shapes', () => {
    assert.deepEqual(templateShape(ORDER), {
      named: false, body: ['1', '2'], header: ['1'], headerFormat: 'TEXT',
      buttons: [{ type: 'URL', required: true, takesParam: true }, { type: 'QUICK_REPLY', required: false, takesParam: true }],
    });
    assert.deepEqual(templateShape(NAMED).body, ['first_name', 'guests']);
    assert.deepEqual(templateShape(PROMO).header, ['media']);
    assert.deepEqual(templateShape({ name: 'x', language: 'en' }), { named: false, body: [], header: [], headerFormat: undefined, buttons: [] });
  });

  const checks: [string, GraphTemplate, Parameters<typeof checkTemplateParams>[1], string | null][] = [
    ['exact counts', ORDER, { params: ['a', 'b'], paramsHeader: ['h'], paramsButtons: ['x'] }, null],
    ['optional quick reply given', ORDER, { params: ['a', 'b'], paramsHeader: ['h'], paramsButtons: ['x', 'p'] }, null],
    ['body short', ORDER, { params: ['a'], paramsHeader: ['h'], paramsButtons: ['x'] }, '[132000] Template Param Count Mismatch (body parameters: template expects 2, step gives 1)'],
    ['header missing', ORDER, { params: ['a', 'b'], paramsButtons: ['x'] }, '[132000] Template Param Count Mismatch (header parameters: template expects 1, step gives 0)'],
    ['url button value missing', ORDER, { params: ['a', 'b'], paramsHeader: ['h'] }, '[132000] Template Param Count Mismatch (button 0 parameters: template expects 1, step gives 0)'],
    ['a value for a button that does not exist', ORDER, { params: ['a', 'b'], paramsHeader: ['h'], paramsButtons: ['x', 'p', 'q'] },
      '[132000] Template Param Count Mismatch (button 2 parameters: template expects 1, step gives 3)'],
    ['phone button takes no value', COUPON, { paramsButtons: ['SAVE', '', 'x'] }, '[132000] Template Param Count Mismatch (button 2 parameters: template expects 1, step gives 2)'],
    ['copy code required', COUPON, { paramsButtons: [] }, '[132000] Template Param Count Mismatch (button 0 parameters: template expects 1, step gives 0)'],
    ['media header needs one value', PROMO, { params: ['x'] }, '[132000] Template Param Count Mismatch (header parameters: template expects 1, step gives 0)'],
    ['no variables, none given', { name: 'hello', language: 'en_US', components: [{ type: 'BODY', text: 'Hello' }] }, {}, null],
    ['no variables, one given', { name: 'hello', language: 'en_US', components: [{ type: 'BODY', text: 'Hello' }] }, { params: ['x'] },
      '[132000] Template Param Count Mismatch (body parameters: template expects 0, step gives 1)'],
  ];
  for (const [name, template, input, info] of checks) {
    it(`check: ${name}`, () => {
      const got = checkTemplateParams(template, input);
      if (info === null) assert.equal(got, null);
      else assert.deepEqual(got, { kind: 'failed', code: 132000, config: false, info });
    });
  }

  it('finds the cached template by name and language', () => {
    const list: GraphTemplate[] = [{ ...ORDER, language: 'cs', status: 'PAUSED' }, ORDER, NAMED];
    assert.equal(findTemplate(list, 'order_update', 'en_US'), ORDER);
    assert.equal(findTemplate(list, 'order_update'), ORDER, 'an approved one when no language is given');
    assert.equal(findTemplate(list, 'order_update', 'de'), undefined);
    assert.equal(findTemplate(list, 'nope'), undefined);
  });
});

// ---------------------------------------------------------------------------

const SECRET = 'app-secret-1';
const sign = (raw: Buffer | string, secret = SECRET): string => `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;

describe('webhook signature and handshake', () => {
  // What Meta sends for "Dobrý den 👋": non-ASCII escaped as \u sequences (a surrogate pair for the emoji).
  const raw = Buffer.from('{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{"messages":[{"text":{"body":"Dobr\\u00fd den \\ud83d\\udc4b"}}]}}]}]}', 'utf8');

  it('accepts the signature of the exact bytes sent (escaped non-ASCII)', () => {
    assert.equal(verifySignature(raw, sign(raw), SECRET), true);
    assert.equal(signatureHeader(raw, SECRET), sign(raw));
    assert.equal(verifySignature(raw, sign(raw).toUpperCase().replace('SHA256=', 'sha256='), SECRET), true, 'hex case does not matter');
    assert.equal(JSON.parse(raw.toString()).entry[0].changes[0].value.messages[0].text.body, 'Dobrý den 👋');
  });

  it('refuses a re-serialised body (the same JSON, other bytes)', () => {
    const reserialised = Buffer.from(JSON.stringify(JSON.parse(raw.toString())), 'utf8');
    assert.notDeepEqual(reserialised, raw);
    assert.equal(verifySignature(reserialised, sign(raw), SECRET), false);
  });

  const bad: [string, string | undefined, string][] = [
    ['another secret', sign(raw, 'other'), SECRET],
    ['missing header', undefined, SECRET],
    ['empty header', '', SECRET],
    ['no prefix', sign(raw).slice(7), SECRET],
    ['sha1 prefix', sign(raw).replace('sha256=', 'sha1='), SECRET],
    ['short hex', sign(raw).slice(0, -2), SECRET],
    ['not hex', `sha256=${'z'.repeat(64)}`, SECRET],
    ['two signatures', `${sign(raw)},${sign(raw)}`, SECRET],
    ['empty secret', sign(raw, ''), ''],
  ];
  for (const [name, header, secret] of bad) it(`refuses: ${name}`, () => assert.equal(verifySignature(raw, header, secret), false));

  const hubs: [string, string, number, string][] = [
    ['match', 'hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=tok', 200, '1158201444'],
    ['wrong token', 'hub.mode=subscribe&hub.challenge=1&hub.verify_token=tok2', 403, 'Forbidden'],
    ['token prefix', 'hub.mode=subscribe&hub.challenge=1&hub.verify_token=to', 403, 'Forbidden'],
    ['wrong mode', 'hub.mode=unsubscribe&hub.challenge=1&hub.verify_token=tok', 403, 'Forbidden'],
    ['no challenge', 'hub.mode=subscribe&hub.verify_token=tok', 403, 'Forbidden'],
    ['nothing', '', 403, 'Forbidden'],
  ];
  for (const [name, q, status, body] of hubs) {
    it(`handshake: ${name}`, () => assert.deepEqual(handshake(new URLSearchParams(q), 'tok'), { status, body }));
  }
  it('handshake: an empty configured token matches nothing', () => {
    assert.equal(handshake(new URLSearchParams('hub.mode=subscribe&hub.challenge=1&hub.verify_token='), '').status, 403);
  });
});

function envelopeOf(...changes: { waba?: string; field?: string; value: unknown }[]): unknown {
  return {
    object: 'whatsapp_business_account',
    entry: changes.map((c) => ({ id: c.waba ?? '102290129340398', changes: [{ field: c.field ?? 'messages', value: c.value }] })),
  };
}

const META = { display_phone_number: '420601000001', phone_number_id: '106540352242922' };

describe('webhook envelope', () => {
  it('statuses: sent, delivered, read→seen, failed→undelivered with the first error', () => {
    const body = envelopeOf({
      value: {
        messaging_product: 'whatsapp', metadata: META,
        statuses: [
          { id: 'wamid.A', status: 'sent', timestamp: '1750263773', recipient_id: '420777123456', biz_opaque_callback_data: 'm1-0',
            pricing: { billable: true, pricing_model: 'PMP', type: 'regular', category: 'utility' } },
          { id: 'wamid.A', status: 'delivered', timestamp: '1750263774', recipient_id: '420777123456', biz_opaque_callback_data: 'm1-0' },
          { id: 'wamid.A', status: 'read', timestamp: '1750263775', recipient_id: '420777123456' },
          { id: 'wamid.B', status: 'failed', timestamp: '1750263776', recipient_id: '420777123401', biz_opaque_callback_data: 'm2-0',
            errors: [{ code: 131026, title: 'Message undeliverable', message: 'Message undeliverable', error_data: { details: 'x' } }] },
          { id: 'wamid.C', status: 'failed', timestamp: '1750263777', recipient_id: '420777123402' },
          { id: 'wamid.D', status: 'played', timestamp: '1750263778', recipient_id: '420777123403' },
        ],
      },
    });
    assert.deepEqual(parseWebhook(body, 5), [
      { kind: 'receipt', carrierRef: 'wamid.A', status: 'sent', at: 1750263773000, ourRef: 'm1-0' },
      { kind: 'receipt', carrierRef: 'wamid.A', status: 'delivered', at: 1750263774000, ourRef: 'm1-0' },
      { kind: 'receipt', carrierRef: 'wamid.A', status: 'seen', at: 1750263775000 },
      { kind: 'receipt', carrierRef: 'wamid.B', status: 'undelivered', at: 1750263776000, ourRef: 'm2-0', code: 131026, info: '[131026] Message undeliverable' },
      { kind: 'receipt', carrierRef: 'wamid.C', status: 'undelivered', at: 1750263777000, info: '[0] Failed' },
    ]);
  });

  it('inbound: text with context, BSUID from the message or the contact, buttons and interactive replies; media skipped', () => {
    const body = envelopeOf({
      value: {
        messaging_product: 'whatsapp', metadata: META,
        contacts: [{ profile: { name: 'Jana' }, wa_id: '420777123456', user_id: 'CZ.13491208655302741918' }, { profile: { name: 'U' }, user_id: 'CZ.99' }],
        messages: [
          { from: '420777123456', id: 'wamid.in1', timestamp: '1750263800', type: 'text', text: { body: 'Ano' }, context: { from: '420601000001', id: 'wamid.A' } },
          { from_user_id: 'CZ.99', id: 'wamid.in2', timestamp: '1750263801', type: 'text', text: { body: 'no number' } },
          { from: '420777123456', id: 'wamid.in3', timestamp: '1750263802', type: 'button', button: { payload: 'STOP', text: 'Stop updates' }, context: { id: 'wamid.A' } },
          { from: '420777123456', id: 'wamid.in4', timestamp: '1750263803', type: 'interactive', interactive: { type: 'list_reply', list_reply: { id: 'r1', title: 'Tomorrow' } } },
          { from: '420777123456', id: 'wamid.in5', timestamp: '1750263804', type: 'image', image: { id: 'media1', mime_type: 'image/jpeg' } },
          { from: '420777123456', id: 'wamid.in6', timestamp: '1750263805', type: 'unsupported', errors: [{ code: 131051 }] },
        ],
      },
    });
    assert.deepEqual(parseWebhook(body), [
      { kind: 'inbound', to: '106540352242922', text: 'Ano', at: 1750263800000, carrierRef: 'wamid.in1', from: '420777123456', fromUserId: 'CZ.13491208655302741918', replyToCarrierRef: 'wamid.A' },
      { kind: 'inbound', to: '106540352242922', text: 'no number', at: 1750263801000, carrierRef: 'wamid.in2', fromUserId: 'CZ.99' },
      { kind: 'inbound', to: '106540352242922', text: 'Stop updates', at: 1750263802000, carrierRef: 'wamid.in3', from: '420777123456', fromUserId: 'CZ.13491208655302741918', replyToCarrierRef: 'wamid.A' },
      { kind: 'inbound', to: '106540352242922', text: 'Tomorrow', at: 1750263803000, carrierRef: 'wamid.in4', from: '420777123456', fromUserId: 'CZ.13491208655302741918' },
    ]);
  });

  it('a single contact without wa_id gives its user id to a number-less message; a missing timestamp is now', () => {
    const body = envelopeOf({
      value: { metadata: META, contacts: [{ profile: { name: 'U' }, user_id: 'CZ.7' }], messages: [{ id: 'wamid.x', type: 'text', text: { body: 'hi' } }] },
    });
    assert.deepEqual(parseWebhook(body, 1234), [{ kind: 'inbound', to: '106540352242922', text: 'hi', at: 1234, carrierRef: 'wamid.x', fromUserId: 'CZ.7' }]);
  });

  it('a timestamp out of any real range is now, like an unreadable one (1e300 failed the body with a 500)', () => {
    for (const timestamp of [1e300, 1e13, -5, '9999999999999']) {
      const body = envelopeOf({
        value: { metadata: META, contacts: [{ profile: { name: 'U' }, user_id: 'CZ.7' }], messages: [{ id: 'wamid.t', type: 'text', text: { body: 'hi' }, timestamp }] },
      });
      assert.deepEqual(parseWebhook(body, 1234), [{ kind: 'inbound', to: '106540352242922', text: 'hi', at: 1234, carrierRef: 'wamid.t', fromUserId: 'CZ.7' }], String(timestamp));
    }
  });

  it('several entries and changes in one body, in order; a repeated item once; other fields ignored', () => {
    const s = (id: string, status: string): unknown => ({ id, status, timestamp: '1750000000', recipient_id: '1' });
    const body = envelopeOf(
      { waba: 'W1', value: { metadata: META, statuses: [s('wamid.1', 'sent'), s('wamid.1', 'sent')] } },
      { waba: 'W1', field: 'message_template_status_update', value: { event: 'APPROVED', message_template_name: 't' } },
      { waba: 'W2', value: { metadata: { phone_number_id: '2' }, statuses: [s('wamid.2', 'delivered'), s('wamid.1', 'sent'), s('wamid.1', 'delivered')] } },
    );
    const events = parseWebhook(body);
    assert.ok(Array.isArray(events));
    assert.deepEqual(events.map((e) => (e.kind === 'receipt' ? `${e.carrierRef}/${e.status}` : '')), ['wamid.1/sent', 'wamid.2/delivered', 'wamid.1/delivered']);
  });

  it('the same status in two bodies gives the same event each time (the engine is idempotent on ref + status)', () => {
    const body = envelopeOf({ value: { metadata: META, statuses: [{ id: 'wamid.1', status: 'delivered', timestamp: '1750000000', recipient_id: '1' }] } });
    assert.deepEqual(parseWebhook(body), parseWebhook(JSON.parse(JSON.stringify(body))));
  });

  const malformed: [string, unknown, string][] = [
    ['null', null, 'body is not a JSON object'],
    ['an array', [], 'body is not a JSON object'],
    ['another object kind', { object: 'page', entry: [] }, 'object is "page", not "whatsapp_business_account"'],
    ['no entry', { object: 'whatsapp_business_account' }, 'entry is not an array'],
    ['entry not an object', { object: 'whatsapp_business_account', entry: [3] }, 'entry[0] is not an object'],
    ['changes not an array', { object: 'whatsapp_business_account', entry: [{ id: '1', changes: {} }] }, 'entry[0].changes is not an array'],
    ['value not an object', envelopeOf({ value: 'x' }), 'entry[0].changes[0].value is not an object'],
    ['statuses not an array', envelopeOf({ value: { statuses: {} } }), 'entry[0].changes[0].value.statuses is not an array'],
    ['status without id', envelopeOf({ value: { statuses: [{ status: 'sent' }] } }), 'entry[0].changes[0].value.statuses[0] has no id'],
    ['status item not an object', envelopeOf({ value: { statuses: [null] } }), 'entry[0].changes[0].value.statuses[0] is not an object'],
    ['message without metadata', envelopeOf({ value: { messages: [{ id: 'w', from: '1', type: 'text', text: { body: 'x' } }] } }),
      'entry[0].changes[0].value.messages[0] arrived without metadata.phone_number_id'],
    ['message without sender', envelopeOf({ value: { metadata: META, messages: [{ id: 'w', type: 'text', text: { body: 'x' } }] } }),
      'entry[0].changes[0].value.messages[0] has neither from nor a user id'],
  ];
  for (const [name, body, error] of malformed) {
    it(`malformed: ${name}`, () => assert.deepEqual(parseWebhook(body), { error }));
  }

  it('account_update changes (PARTNER_ADDED) are read separately', () => {
    const body = envelopeOf(
      { waba: '104996122399160', field: 'account_update', value: { event: 'PARTNER_ADDED', waba_info: { waba_id: '104996122399160', owner_business_id: '608114524811503' } } },
      { value: { metadata: META, statuses: [] } },
    );
    assert.deepEqual(parseWebhook(body), []);
    assert.deepEqual(parseAccountUpdates(body), [{ entryId: '104996122399160', event: 'PARTNER_ADDED', wabaId: '104996122399160', ownerBusinessId: '608114524811503' }]);
    assert.deepEqual(parseAccountUpdates(envelopeOf({ field: 'account_update', value: {} })), { error: 'entry[0].changes[0].value has no event' });
  });
});
