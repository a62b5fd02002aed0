/**
 * The pure rules of WhatsApp partner onboarding (D7): the signup body and the list and completion
 * bodies, the signup JWT, the hosted page's origins and Content-Security-Policy, the prefill of
 * Embedded Signup, the partner events and the D7 list mapping.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes, randomUUID, createHmac } from 'node:crypto';
import { AppError } from '../../shared/errors.js';
import { parseListBody, parseSignup, type SignupInput } from '../../shared/whatsapp/onboarding/input.js';
import { parseCompletion, generatePin } from '../../shared/whatsapp/onboarding/complete.js';
import { deriveTokenKey, signSignupToken, verifySignupToken, SignupTokenError, TOKEN_TTL_SECONDS } from '../../shared/whatsapp/onboarding/token.js';
import { isFacebookOrigin, loginOptions, META_SDK_URL, pagePolicy } from '../../shared/whatsapp/onboarding/page.js';
import { partnerEvent } from '../../shared/whatsapp/onboarding/notify.js';
import { accountView, numberView, templateView } from '../../shared/whatsapp/onboarding/lists.js';
import { escapeHtml } from '../../api/routes/whatsapp-page.js';

const DEV = { allowPrivateCallbacks: true, production: false };
const PROD = { allowPrivateCallbacks: false, production: true };

const VALID = {
  partner_name: 'Acme Partners', partner_logo: 'https://acme.example/logo.png', partner_callback_url: 'https://acme.example/hooks/wa',
  partner_client_id: 'client-42', partner_finish_url: 'https://acme.example/done', phone_number: 'manual', wa_name: 'Client Shop',
  wa_email: 'owner@shop.example', wa_website: 'https://shop.example', country: 'CZ',
};

function badRequestOf(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof AppError, String(err));
    assert.equal(err.status, 400);
    return err;
  }
  assert.fail('expected a 400');
}

test('a valid signup body is taken as given (country upper-cased, optional fields may be absent)', () => {
  const parsed: SignupInput = parseSignup({ ...VALID, country: 'cz' }, PROD);
  assert.deepEqual(parsed, { ...VALID, country: 'CZ' });
  const bare = parseSignup({ ...VALID, partner_logo: undefined, wa_website: null }, DEV);
  assert.equal(bare.partner_logo, null);
  assert.equal(bare.wa_website, null);
});

test('signup: every bad, missing or unknown field is named in one 400', () => {
  const cases: Array<[string, Record<string, unknown>, RegExp, SignupInputOpts?]> = [
    ['missing name', { ...VALID, partner_name: undefined }, /^partner_name: is required$/],
    ['empty name', { ...VALID, partner_name: '  ' }, /^partner_name: must not be empty$/],
    ['long name', { ...VALID, partner_name: 'x'.repeat(101) }, /^partner_name: must be at most 100 characters$/],
    ['NUL', { ...VALID, partner_client_id: 'a\u0000b' }, /^partner_client_id: must not contain control characters$/],
    ['number as text', { ...VALID, partner_client_id: 42 }, /^partner_client_id: must be a string$/],
    ['callback scheme', { ...VALID, partner_callback_url: 'ftp://acme.example/x' }, /^partner_callback_url: URL scheme must be http or https$/],
    ['callback private', { ...VALID, partner_callback_url: 'http://10.1.2.3/hook' }, /^partner_callback_url: .*(private|not allowed)/i, PROD],
    ['callback loopback', { ...VALID, partner_callback_url: 'http://localhost:9/hook' }, /^partner_callback_url: /, PROD],
    ['finish javascript', { ...VALID, partner_finish_url: 'javascript:alert(1)' }, /^partner_finish_url: must be an http\(s\) URL$/],
    ['finish http in production', { ...VALID, partner_finish_url: 'http://acme.example/done' }, /^partner_finish_url: must be an https URL$/, PROD],
    ['finish relative', { ...VALID, partner_finish_url: '/done' }, /^partner_finish_url: must be an absolute http\(s\) URL$/],
    ['logo data', { ...VALID, partner_logo: 'data:image/png;base64,AAAA' }, /^partner_logo: must be an http\(s\) URL$/],
    ['phone mode', { ...VALID, phone_number: 'auto' }, /^phone_number: must be "manual" or "automatic"$/],
    ['email', { ...VALID, wa_email: 'not-an-address' }, /^wa_email: must be an e-mail address$/],
    ['country', { ...VALID, country: 'XX' }, /^country: must be an ISO 3166-1 alpha-2 country code/],
    ['country alpha-3', { ...VALID, country: 'CZE' }, /^country: must be an ISO 3166-1 alpha-2/],
    ['unknown', { ...VALID, colour: 'red' }, /^colour: is not an allowed field$/],
  ];
  for (const [what, body, re, opts] of cases) {
    const err = badRequestOf(() => parseSignup(body, opts ?? DEV));
    assert.match(err.message, re, what);
  }
  const all = badRequestOf(() => parseSignup({}, DEV));
  assert.equal(all.message, ['partner_name', 'partner_callback_url', 'partner_client_id', 'partner_finish_url', 'phone_number', 'wa_name', 'wa_email', 'country']
    .map((f) => `${f}: is required`).join('; '));
  assert.deepEqual(all.extra.fields, ['partner_name', 'partner_callback_url', 'partner_client_id', 'partner_finish_url', 'phone_number', 'wa_name', 'wa_email', 'country']);
  assert.match(badRequestOf(() => parseSignup([VALID], DEV)).message, /^body: must be a JSON object$/);
  const two = badRequestOf(() => parseSignup({ ...VALID, wa_email: 'x', country: 1 }, DEV));
  assert.match(two.message, /wa_email: .*; country: /);
});
type SignupInputOpts = { allowPrivateCallbacks: boolean; production: boolean };

test('list bodies: waba_id required where it must be, digits only; refresh a boolean; nothing else', () => {
  assert.deepEqual(parseListBody(undefined, false), { waba_id: null, refresh: false });
  assert.deepEqual(parseListBody({}, false), { waba_id: null, refresh: false });
  assert.deepEqual(parseListBody({ waba_id: '104996122399160', refresh: true }, true), { waba_id: '104996122399160', refresh: true });
  assert.deepEqual(parseListBody({ waba_id: 104996122399160 }, true), { waba_id: '104996122399160', refresh: false });
  const cases: Array<[unknown, boolean, RegExp]> = [
    [{}, true, /^waba_id: is required$/],
    [undefined, true, /^waba_id: is required$/],
    [{ waba_id: '' }, true, /^waba_id: is required$/],
    [{ waba_id: '12ab' }, true, /^waba_id: must be a WABA id/],
    [{ waba_id: '1'.repeat(31) }, false, /^waba_id: must be a WABA id/],
    [{ waba_id: -5 }, true, /^waba_id: must be a WABA id/],
    [{ waba_id: '1', refresh: 'yes' }, true, /^refresh: must be true or false$/],
    [{ waba_id: '1', page: 2 }, true, /^page: is not an allowed field/],
    ['[]', false, /^body: must be a JSON object$/],
  ];
  for (const [body, required, re] of cases) assert.match(badRequestOf(() => parseListBody(body, required)).message, re, JSON.stringify(body));
});

test('the page call: FINISH with ids, CANCEL with its step; malformed fields are 400', () => {
  assert.deepEqual(parseCompletion({ token: 't', event: 'FINISH', code: 'AQx', waba_id: '1', phone_number_id: '2', business_id: '3' }),
    { token: 't', event: 'FINISH', code: 'AQx', wabaId: '1', phoneNumberId: '2', businessId: '3' });
  assert.deepEqual(parseCompletion({ token: 't', event: 'FINISH_ONLY_WABA', code: 'AQx', waba_id: '1' }),
    { token: 't', event: 'FINISH_ONLY_WABA', code: 'AQx', wabaId: '1', phoneNumberId: null, businessId: null });
  assert.deepEqual(parseCompletion({ token: 't', event: 'CANCEL', current_step: 'PHONE_NUMBER_VERIFICATION', error_message: 'boom' }),
    { token: 't', event: 'CANCEL', currentStep: 'PHONE_NUMBER_VERIFICATION', details: { error_message: 'boom' } });
  const cases: Array<[unknown, RegExp]> = [
    [{ event: 'FINISH', code: 'x' }, /^token: is required$/],
    [{ token: 't', event: 'DONE' }, /^event: must be one of FINISH, FINISH_ONLY_WABA, FINISH_WHATSAPP_BUSINESS_APP_ONBOARDING, CANCEL$/],
    [{ token: 't', event: 'FINISH', waba_id: '1; DROP' }, /^waba_id: is not valid$/],
    [{ token: 't', event: 'FINISH', phone_number_id: 5 }, /^phone_number_id: is not valid$/],
    [{ token: 't', event: 'CANCEL', current_step: '<script>' }, /^current_step: is not valid$/],
    [{ token: 'x'.repeat(5000), event: 'CANCEL' }, /^token: is not valid$/],
    [null, /^body: must be a JSON object$/],
  ];
  for (const [body, re] of cases) assert.match(badRequestOf(() => parseCompletion(body)).message, re, JSON.stringify(body)?.slice(0, 80));
});

test('PINs are six digits over the whole range', () => {
  const seen = new Set<string>();
  for (let i = 0; i < 500; i++) {
    const pin = generatePin();
    assert.match(pin, /^\d{6}$/);
    seen.add(pin);
  }
  assert.ok(seen.size > 490);
});

test('signup tokens: one hour, the signup id only; expired, altered, foreign and unsigned tokens are refused', async () => {
  const key = deriveTokenKey(randomBytes(32));
  const id = randomUUID();
  const now = Date.now();
  const token = await signSignupToken(key, id, now);
  const [header, payload] = token.split('.').slice(0, 2).map((p) => JSON.parse(Buffer.from(p, 'base64url').toString('utf8')) as Record<string, unknown>);
  assert.deepEqual(header, { alg: 'HS256', typ: 'JWT' });
  assert.deepEqual(Object.keys(payload!).sort(), ['aud', 'exp', 'iat', 'iss', 'sub']);
  assert.equal(payload!.sub, id);
  assert.equal((payload!.exp as number) - (payload!.iat as number), TOKEN_TTL_SECONDS);
  assert.equal(await verifySignupToken(key, token, now), id);
  assert.equal(await verifySignupToken(key, token, now + (TOKEN_TTL_SECONDS - 5) * 1000), id);

  const refused = async (t: unknown, reason: 'expired' | 'invalid', at = now): Promise<void> => {
    await assert.rejects(verifySignupToken(key, t, at), (e: unknown) => e instanceof SignupTokenError && e.reason === reason);
  };
  await refused(token, 'expired', now + (TOKEN_TTL_SECONDS + 5) * 1000);
  await refused(await signSignupToken(deriveTokenKey(randomBytes(32)), id, now), 'invalid');
  const [h, p, s] = token.split('.');
  const otherPayload = Buffer.from(JSON.stringify({ ...payload, sub: randomUUID() })).toString('base64url');
  await refused(`${h}.${otherPayload}.${s}`, 'invalid');
  await refused(`${h}.${p}.${s!.slice(0, -2)}AA`, 'invalid');
  const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
  await refused(`${none}.${p}.`, 'invalid');
  // A token signed with the right key but for another purpose (no audience) is not a signup token.
  const foreignHeader = Buffer.from(JSON.stringify({ alg: 'HS256', typ: 'JWT' })).toString('base64url');
  const foreignBody = Buffer.from(JSON.stringify({ sub: id, iat: Math.floor(now / 1000), exp: Math.floor(now / 1000) + 60 })).toString('base64url');
  const mac = createHmac('sha256', key).update(`${foreignHeader}.${foreignBody}`).digest('base64url');
  await refused(`${foreignHeader}.${foreignBody}.${mac}`, 'invalid');
  for (const t of [undefined, '', 'abc', ['a', 'b'], 42]) await refused(t, 'invalid');
});

test('only https://facebook.com and its subdomains count as Meta origins', () => {
  const cases: Array<[string, boolean]> = [
    ['https://www.facebook.com', true], ['https://facebook.com', true], ['https://web.facebook.com', true], ['https://business.facebook.com', true],
    ['http://www.facebook.com', false], ['https://www.facebook.com:8443', false], ['https://evilfacebook.com', false],
    ['https://facebook.com.evil.example', false], ['https://www.facebook.co', false], ['null', false], ['', false],
    ['https://connect.facebook.net', false],
  ];
  for (const [origin, ok] of cases) assert.equal(isFacebookOrigin(origin), ok, origin);
});

test('page policy in production: Meta SDK, facebook.com messages, a CSP without unsafe-inline', () => {
  const p = pagePolicy({ sdkUrl: null, logoUrl: 'https://cdn.acme.example/logo.png?x=1' });
  assert.equal(p.sdkUrl, META_SDK_URL);
  assert.equal(p.facebookOrigins, true);
  assert.deepEqual(p.origins, []);
  assert.equal(p.ownWindow, false);
  const csp = p.csp('N0nce');
  const dir = Object.fromEntries(csp.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1)]));
  assert.deepEqual(dir['default-src'], ["'none'"]);
  assert.deepEqual(dir['script-src'], ["'nonce-N0nce'", 'https://connect.facebook.net']);
  assert.deepEqual(dir['style-src'], ["'nonce-N0nce'"]);
  assert.ok(dir['img-src']!.includes('https://cdn.acme.example'), 'the logo origin, not its path');
  assert.ok(dir['frame-src']!.includes('https://*.facebook.com'));
  assert.ok(dir['connect-src']!.includes("'self'"));
  assert.deepEqual(dir['frame-ancestors'], ["'none'"]);
  assert.deepEqual(dir['form-action'], ["'none'"]);
  assert.doesNotMatch(csp, /unsafe-(inline|eval)/);
});

test('page policy with the simulator: its stand-in, its origin and the page window, nothing of Meta', () => {
  const p = pagePolicy({ sdkUrl: 'http://127.0.0.1:4567/_sim/sdk.js', logoUrl: null });
  assert.equal(p.sdkUrl, 'http://127.0.0.1:4567/_sim/sdk.js');
  assert.equal(p.facebookOrigins, false);
  assert.deepEqual(p.origins, ['http://127.0.0.1:4567']);
  assert.equal(p.ownWindow, true);
  const csp = p.csp('abc');
  assert.match(csp, /script-src 'nonce-abc' http:\/\/127\.0\.0\.1:4567;/);
  assert.match(csp, /connect-src 'self' http:\/\/127\.0\.0\.1:4567;/);
  assert.match(csp, /img-src 'self' data:;/);
  assert.doesNotMatch(csp, /facebook|frame-src/);
});

test('FB.login options carry the prefill; "automatic" skips the phone screens', () => {
  const signup = { waName: 'Client Shop', waEmail: 'o@shop.example', waWebsite: 'https://shop.example', country: 'CZ', phoneNumber: 'manual' as const };
  assert.deepEqual(loginOptions(signup, '987'), {
    config_id: '987', response_type: 'code', override_default_response_type: true,
    extras: {
      setup: { business: { name: 'Client Shop', email: 'o@shop.example', address: { country: 'CZ' }, website: 'https://shop.example' }, phone: { displayName: 'Client Shop' } },
      featureType: '', sessionInfoVersion: '3', version: 'v4',
    },
  });
  const auto = loginOptions({ ...signup, phoneNumber: 'automatic', waWebsite: null }, '987') as { extras: { featureType: string; setup: { business: object } } };
  assert.equal(auto.extras.featureType, 'only_waba_sharing');
  assert.ok(!('website' in auto.extras.setup.business));
});

test('partner events: D7 fields, the sequence, and only what is known', () => {
  const s = { partnerClientId: 'client-42' };
  assert.deepEqual(partnerEvent(s, { event: 'signup_started' }, 1, 1_700_000_000_999), {
    event: 'signup_started', partner_client_id: 'client-42', timestamp: 1_700_000_000, sequence: 1,
  });
  assert.deepEqual(partnerEvent(s, { event: 'es_cancelled', currentStep: 'PERMISSIONS', whatsappId: null }, 2, 0), {
    event: 'es_cancelled', partner_client_id: 'client-42', timestamp: 0, sequence: 2, current_step: 'PERMISSIONS',
  });
  assert.deepEqual(partnerEvent(s, { event: 'failed', whatsappId: '104', currentStep: 'register_number', error: '[133005] PIN' }, 3, 0), {
    event: 'failed', partner_client_id: 'client-42', whatsapp_id: '104', timestamp: 0, sequence: 3, current_step: 'register_number', error: '[133005] PIN',
  });
});

test('D7 list mapping', () => {
  assert.deepEqual(accountView({
    wabaId: '104', connection: 'wa', partnerClientId: 'c-1', businessId: '608', name: 'Client Shop', currency: 'CZK', country: 'CZ',
    ownerName: 'Client Shop a.s.', ownerId: '608',
  }), {
    client_id: 'c-1', whatsapp_name: 'Client Shop', whatsapp_id: '104', whatsapp_currency: 'CZK', whatsapp_owner_name: 'Client Shop a.s.',
    whatsapp_owner_id: '608', country: 'CZ',
  });
  assert.deepEqual(numberView({ phoneNumberId: '107', displayPhoneNumber: '+420 777 123 456', verifiedName: 'x', status: 'CONNECTED', registered: true }),
    { phone_number: '420777123456', phone_number_id: '107', status: 'CONNECTED' });
  assert.equal(numberView({ phoneNumberId: '1', displayPhoneNumber: null, verifiedName: null, status: null, registered: false }).phone_number, null);
  assert.deepEqual(templateView({ templateId: '1', name: 'client_welcome', language: 'cs', status: 'APPROVED', category: 'MARKETING' }),
    { template_name: 'client_welcome', language: 'cs', status: 'APPROVED', category: 'MARKETING' });
});

test('HTML escaping covers markup and both quotes', () => {
  assert.equal(escapeHtml(`<a href="x" onclick='y'>&</a>`), '&lt;a href=&quot;x&quot; onclick=&#39;y&#39;&gt;&amp;&lt;/a&gt;');
});
