/**
 * WhatsApp partner onboarding (D7) at the API: the service in-process (Postgres, Redis, every
 * pool) and the Graph simulator in-process on loopback, its signup codes taken from
 * `GET /_sim/codes` in place of the browser. Signup validation and errors, the hosted page and its
 * error pages, the backend completion with its failures at each step, the partner callbacks
 * (observed at a local receiver, Standard Webhooks signatures verified, retried), and the three
 * lists with their errors and refresh.
 *
 * The whatsapp connection is stored through the admin API (test/support/whatsapp-onboarding.ts).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { startTestService, startReceiver, waitFor, type Receiver, type TestService, type TestResponse } from '../support/harness.js';
import { startWhatsappSimulator, type WhatsappSimulator } from '../../scripts/sim/whatsapp/simulator.js';
import { DEFAULT_SEED } from '../../scripts/sim/whatsapp/seed.js';
import { loadSenders } from '../../shared/carriers/store.js';
import { SecretBox } from '../../shared/secrets/sealed.js';
import { GraphClient, GraphError } from '../../shared/carriers/whatsapp/graph.js';
import { signSignupToken, tokenKey } from '../../shared/whatsapp/onboarding/token.js';
import { SIGNUP_CONFIG_ID, partnerEvents as events, simConnectionConfig, storeWhatsappConnection } from '../support/whatsapp-onboarding.js';

const CLIENT_WABA = DEFAULT_SEED.signup.waba_id;
const CLIENT_PN = DEFAULT_SEED.signup.phone_number_id;
const CLIENT_BUSINESS = DEFAULT_SEED.signup.business_id;
const OWN_WABA = '102290129340398';

let svc: TestService;
let sim: WhatsappSimulator;
let rx: Receiver;
let box: SecretBox;
const SECRET = `whsec_${Buffer.alloc(32, 9).toString('base64')}`;
let a: { accountId: number; apiKey: string };
let b: { accountId: number; apiKey: string };
let c: { accountId: number; apiKey: string };

const storeConnection = (name: string, config: Record<string, unknown>, enabled = true): Promise<void> => storeWhatsappConnection(svc, name, config, enabled);
const simConfig = (): Record<string, unknown> => simConnectionConfig(sim.url);

before(async () => {
  sim = await startWhatsappSimulator();
  rx = await startReceiver();
  svc = await startTestService({
    env: { ALLOW_PRIVATE_CALLBACKS: 'true', WHATSAPP_SDK_URL: `${sim.url}/_sim/sdk.js`, WEBHOOK_RETRY_SCHEDULE_MS: '300,600,1200' },
  });
  box = new SecretBox(svc.config.credentialsKey);
  a = await svc.createAccount();
  b = await svc.createAccount();
  c = await svc.createAccount();
  const res = await post(a.apiKey, '/v1/apikey/update', { webhook_secret: SECRET });
  assert.equal(res.status, 200, res.text);
});
after(async () => {
  await svc?.stop();
  await sim?.stop();
  await rx?.close();
});

function post(key: string | null, path: string, body?: unknown): Promise<TestResponse> {
  return svc.request('POST', path, { ...(body !== undefined && { body }), ...(key !== null && { headers: { 'x-api-key': key } }) });
}

const signupBody = (name: string, extra: Record<string, unknown> = {}) => ({
  partner_name: 'Acme Partners', partner_logo: 'https://acme.example/logo.png', partner_callback_url: `${rx.url}/partner/${name}`,
  partner_client_id: `client-${name}`, partner_finish_url: `${rx.url}/finish/${name}`, phone_number: 'manual', wa_name: 'Client Shop',
  wa_email: 'owner@shop.example', wa_website: 'https://shop.example', country: 'CZ', ...extra,
});

async function signup(key: string, name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await post(key, '/v1/whatsapp/signup', signupBody(name, extra));
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(Object.keys(res.body).sort(), ['redirect_url', 'success', 'token']);
  return res.body.token as string;
}

const page = (token: string) => svc.request('GET', `/whatsapp/onboarding?token=${encodeURIComponent(token)}`);
const complete = (body: Record<string, unknown>) => svc.request('POST', '/whatsapp/onboarding/complete', { body });
const code = async (wabaId?: string): Promise<{ code: string; waba_id: string; phone_number_id: string; business_id: string }> =>
  (await fetch(`${sim.url}/_sim/codes${wabaId ? `?waba_id=${wabaId}` : ''}`)).json() as Promise<{ code: string; waba_id: string; phone_number_id: string; business_id: string }>;

const partnerEvents = (name: string, last: string): Promise<any[]> => events(rx, name, last);

async function signupRow(token: string): Promise<Record<string, any>> {
  const sub = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')).sub as string;
  const [row] = await svc.sql('SELECT * FROM whatsapp_signups WHERE public_id = $1', [sub]);
  assert.ok(row, 'the signup row');
  return row;
}

test('signup without a configured whatsapp connection: 503 saying what to configure', async () => {
  const res = await post(a.apiKey, '/v1/whatsapp/signup', signupBody('none'));
  assert.equal(res.status, 503, res.text);
  assert.deepEqual(res.body, { success: false, message: 'WhatsApp onboarding is not configured: there is no enabled whatsapp carrier connection' });
  assert.equal((await svc.sql('SELECT count(*)::int AS n FROM whatsapp_signups'))[0]!.n, 0);
});

test('with two enabled connections the operator must name one in WHATSAPP_ONBOARDING_CONNECTION', async () => {
  await storeConnection('wa-main', simConfig());
  await storeConnection('wa-other', { ...simConfig(), app_id: '999' });
  const res = await post(a.apiKey, '/v1/whatsapp/signup', signupBody('two'));
  assert.equal(res.status, 503, res.text);
  assert.match(res.body.message, /2 whatsapp connections are enabled \(wa-main, wa-other\); name one in WHATSAPP_ONBOARDING_CONNECTION/);
  await storeConnection('wa-other', { ...simConfig(), app_id: '999' }, false);
  const [stored] = await svc.sql<{ config: Record<string, unknown>; secrets: Buffer }>('SELECT config, secrets FROM carrier_connections WHERE name = $1', ['wa-main']);
  assert.ok(!('app_secret' in stored!.config) && !('verify_token' in stored!.config), 'secrets are not in the clear config');
  assert.ok(!stored!.secrets.toString('latin1').includes(DEFAULT_SEED.app.secret), 'and sealed');
});

test('POST /v1/whatsapp/signup: 401 for a missing or bad key, 403 for a sub-key, 400 naming every bad field', async () => {
  const noKey = await post(null, '/v1/whatsapp/signup', signupBody('x'));
  assert.equal(noKey.status, 401);
  assert.deepEqual(noKey.body, { success: false, message: 'Missing API key (header x-api-key)' });
  const badKey = await post('sb_not-a-key', '/v1/whatsapp/signup', signupBody('x'));
  assert.equal(badKey.status, 401);
  assert.deepEqual(badKey.body, { success: false, message: 'Invalid or disabled API key' });

  const sub = await post(a.apiKey, '/v1/apikey/add', { shared: true, currency: 'CZK' });
  assert.equal(sub.status, 200, sub.text);
  const forbidden = await post(sub.body.apikey, '/v1/whatsapp/signup', signupBody('x'));
  assert.equal(forbidden.status, 403);
  assert.deepEqual(forbidden.body, { success: false, message: 'Only the primary API key of the account can start a WhatsApp signup' });

  const cases: Array<[unknown, string]> = [
    [{}, 'partner_name: is required; partner_callback_url: is required; partner_client_id: is required; partner_finish_url: is required; phone_number: is required; wa_name: is required; wa_email: is required; country: is required'],
    [{ ...signupBody('x'), country: 'Czechia', phone_number: 'both' }, 'phone_number: must be "manual" or "automatic"; country: must be an ISO 3166-1 alpha-2 country code (e.g. "CZ")'],
    [{ ...signupBody('x'), partner_callback_url: 'ftp://acme.example/h' }, 'partner_callback_url: URL scheme must be http or https'],
    [{ ...signupBody('x'), partner_finish_url: 'javascript:alert(1)' }, 'partner_finish_url: must be an http(s) URL'],
    [{ ...signupBody('x'), wa_email: 'nobody' }, 'wa_email: must be an e-mail address'],
    [{ ...signupBody('x'), extra: 1 }, 'extra: is not an allowed field'],
    [[], 'body: must be a JSON object'],
  ];
  for (const [body, message] of cases) {
    const res = await post(a.apiKey, '/v1/whatsapp/signup', body);
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(res.body, { success: false, message });
  }
  const badJson = await svc.request('POST', '/v1/whatsapp/signup', { raw: '{"partner_name":', headers: { 'x-api-key': a.apiKey, 'content-type': 'application/json' } });
  assert.equal(badJson.status, 400);
  assert.equal(badJson.body.success, false);
  const get = await svc.request('GET', '/v1/whatsapp/signup', { headers: { 'x-api-key': a.apiKey } });
  assert.equal(get.status, 405);
  assert.equal((await svc.sql('SELECT count(*)::int AS n FROM whatsapp_signups'))[0]!.n, 0, 'nothing stored by refused calls');
});

test('a signup: a one-hour JWT naming it, our hosted page as redirect_url, the partner fields stored', async () => {
  const token = await signup(a.apiKey, 'first');
  const res = await post(a.apiKey, '/v1/whatsapp/signup', signupBody('first-b'));
  assert.equal(res.body.redirect_url, `${svc.config.publicUrl}/whatsapp/onboarding`);
  const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8'));
  assert.equal(claims.exp - claims.iat, 3600);
  const row = await signupRow(token);
  assert.equal(row.status, 'created');
  assert.equal(row.account_id, a.accountId);
  assert.equal(row.connection, 'wa-main');
  assert.equal(row.partner_client_id, 'client-first');
  assert.equal(row.partner_callback_url, `${rx.url}/partner/first`);
  assert.equal(row.country, 'CZ');
  assert.deepEqual(row.log.map((e: { event: string }) => e.event), ['created']);
  assert.ok(Math.abs(new Date(row.expires_at).getTime() - claims.exp * 1000) < 5000);

  // wa_website is optional (a prefill): left out, or null, the signup is made without it.
  for (const website of [undefined, null]) {
    const { wa_website: _left, ...rest } = signupBody(`no-site-${String(website)}`);
    const body = website === undefined ? rest : { ...rest, wa_website: website };
    const without = await post(a.apiKey, '/v1/whatsapp/signup', body);
    assert.equal(without.status, 200, without.text);
    assert.equal((await signupRow(without.body.token)).wa_website, null);
  }
});

test('the hosted page: server-rendered, escaped, the stand-in SDK with the connection\'s app, a strict CSP; opening it notifies signup_started once', async () => {
  const token = await signup(a.apiKey, 'page', { partner_name: 'Acme <b>&</b> "Co"' });
  const res = await page(token);
  assert.equal(res.status, 200, res.text);
  assert.match(res.headers['content-type'] as string, /^text\/html; charset=utf-8/);
  const csp = res.headers['content-security-policy'] as string;
  const nonce = /'nonce-([^']+)'/.exec(csp)?.[1];
  assert.ok(nonce, csp);
  assert.equal(csp, `default-src 'none'; script-src 'nonce-${nonce}' ${sim.url}; style-src 'nonce-${nonce}'; img-src 'self' data: https://acme.example; `
    + `connect-src 'self' ${sim.url}; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`);
  assert.equal(res.headers['referrer-policy'], 'no-referrer');
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.equal(res.headers['x-frame-options'], 'DENY');
  assert.ok(res.text.includes(`<script nonce="${nonce}" async defer crossorigin="anonymous" src="${sim.url}/_sim/sdk.js"></script>`));
  assert.ok(res.text.includes('Connect WhatsApp for Acme &lt;b&gt;&amp;&lt;/b&gt; &quot;Co&quot;'));
  assert.ok(!res.text.includes('<b>&</b>'), 'the partner name is never markup');
  assert.equal((res.text.match(/<script\b/g) ?? []).length, 3, 'the data block, our script, the SDK');
  assert.equal(res.text.split(`<script nonce="${nonce}"`).length - 1, 2, 'every executed script carries the nonce');
  const config = JSON.parse(/<script type="application\/json" id="onboarding-config">(.*?)<\/script>/s.exec(res.text)![1]!);
  assert.equal(config.appId, DEFAULT_SEED.app.id);
  assert.equal(config.graphVersion, 'v25.0');
  assert.equal(config.token, token);
  assert.equal(config.completeUrl, '/whatsapp/onboarding/complete');
  assert.deepEqual(config.origins, [sim.url]);
  assert.equal(config.facebookOrigins, false);
  assert.deepEqual(config.loginOptions, {
    config_id: SIGNUP_CONFIG_ID, response_type: 'code', override_default_response_type: true,
    extras: {
      setup: { business: { name: 'Client Shop', email: 'owner@shop.example', address: { country: 'CZ' }, website: 'https://shop.example' }, phone: { displayName: 'Client Shop' } },
      featureType: '', sessionInfoVersion: '3', version: 'v4',
    },
  });

  const events = await partnerEvents('page', 'signup_started');
  assert.equal(events.length, 1);
  const [started] = events;
  assert.deepEqual(Object.keys(started).sort(), ['event', 'partner_client_id', 'sequence', 'timestamp']);
  assert.equal(started.partner_client_id, 'client-page');
  assert.ok(Math.abs(started.timestamp - Date.now() / 1000) < 30);
  const request = rx.requests.find((r) => r.path === '/partner/page')!;
  assert.ok(request.body.startsWith('['), 'the body is a JSON array, like every webhook');
  new Webhook(SECRET).verify(request.body, request.headers as Record<string, string>);

  assert.equal((await page(token)).status, 200);
  const row = await signupRow(token);
  assert.equal(row.status, 'started');
  assert.deepEqual(row.log.map((e: { event: string }) => e.event), ['created', 'page_opened', 'partner_notified', 'page_opened']);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(rx.requests.filter((r) => r.path === '/partner/page').length, 1, 'signup_started only once');
});

test('the page refuses a missing, forged, foreign or expired token with a clear HTML page and no stack trace', async () => {
  const token = await signup(a.apiKey, 'bad-tokens');
  const row = await signupRow(token);
  const [h, p, s] = token.split('.');
  const key = await tokenKey(svc.runtime.db, new SecretBox(svc.config.credentialsKey));
  const cases: Array<[string, number, RegExp]> = [
    ['/whatsapp/onboarding', 401, /This link is not valid/],
    ['/whatsapp/onboarding?token=', 401, /This link is not valid/],
    [`/whatsapp/onboarding?token=${h}.${p}.${s!.slice(0, -3)}abc`, 401, /This link is not valid/],
    [`/whatsapp/onboarding?token=${h}.${Buffer.from(JSON.stringify({ sub: randomUUID() })).toString('base64url')}.${s}`, 401, /This link is not valid/],
    [`/whatsapp/onboarding?token=${await signSignupToken(key, randomUUID())}`, 401, /This link is not valid/],
    [`/whatsapp/onboarding?token=${await signSignupToken(key, row.public_id, Date.now() - 2 * 3600_000)}`, 410, /This link has expired/],
    [`/whatsapp/onboarding?token=${token}&token=${token}`, 401, /This link is not valid/],
  ];
  for (const [path, status, re] of cases) {
    const res = await svc.request('GET', path);
    assert.equal(res.status, status, path);
    assert.match(res.headers['content-type'] as string, /^text\/html/);
    assert.match(res.text, re);
    assert.doesNotMatch(res.text, /Error|\.ts:\d|node_modules|at [A-Za-z]+ \(/, 'no stack trace');
    assert.doesNotMatch(res.text, /<script/, 'error pages run no script');
    assert.match(res.headers['content-security-policy'] as string, /^default-src 'none'; style-src 'nonce-[^']+'; /);
  }
  assert.equal((await signupRow(token)).status, 'created', 'refused openings change nothing');
});

test('the backend completion: code exchanged, app subscribed, number registered, WABA, numbers and templates stored, the sender created, the partner notified', async () => {
  const token = await signup(a.apiKey, 'done');
  await page(token);
  const es = await code();
  const res = await complete({ token, event: 'FINISH', code: es.code, waba_id: es.waba_id, phone_number_id: es.phone_number_id, business_id: es.business_id });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.body, { success: true, redirect_url: `${rx.url}/finish/done`, whatsapp_id: CLIENT_WABA });

  const events = await partnerEvents('done', 'completed');
  assert.deepEqual(events.map((e) => e.event), ['signup_started', 'es_finished', 'waba_subscribed', 'number_registered', 'completed']);
  assert.deepEqual(events.map((e) => e.sequence), [1, 2, 3, 4, 5]);
  for (const e of events) {
    assert.equal(e.partner_client_id, 'client-done');
    assert.equal(typeof e.timestamp, 'number');
    if (e.event !== 'signup_started') assert.equal(e.whatsapp_id, CLIENT_WABA, e.event);
  }
  assert.equal(events[3].phone_number_id, CLIENT_PN);
  assert.equal(events[4].phone_number_id, CLIENT_PN);
  for (const r of rx.requests.filter((x) => x.path === '/partner/done')) {
    const verified = new Webhook(SECRET).verify(r.body, r.headers as Record<string, string>) as unknown[];
    assert.equal(verified.length, 1);
    assert.match(r.headers['webhook-id'] as string, /^msg_[0-9a-f]{32}$/);
  }

  const row = await signupRow(token);
  assert.equal(row.status, 'completed');
  assert.equal(row.waba_id, CLIENT_WABA);
  assert.equal(row.business_id, CLIENT_BUSINESS);
  assert.deepEqual(row.phone_number_ids, [CLIENT_PN]);
  assert.ok(row.completed_at);
  assert.deepEqual(row.log.map((e: { event: string }) => e.event).filter((e: string) => e !== 'partner_notified'),
    ['created', 'page_opened', 'es_finished', 'code_exchanged', 'waba_subscribed', 'number_registered', 'completed']);
  assert.ok(!JSON.stringify(row.log).includes(es.code), 'the code is not logged');

  const [waba] = await svc.sql('SELECT * FROM whatsapp_wabas WHERE account_id = $1', [a.accountId]);
  assert.equal(waba!.waba_id, CLIENT_WABA);
  assert.equal(waba!.name, 'Client Shop');
  assert.equal(waba!.currency, 'CZK');
  assert.equal(waba!.owner_name, 'Client Shop a.s.');
  assert.equal(waba!.connection, 'wa-main');
  assert.ok(Buffer.isBuffer(waba!.credentials) && !waba!.credentials.toString('latin1').includes('EAAsim'), 'the business token is sealed');
  const numbers = await svc.sql('SELECT phone_number_id, display_phone_number, status, registered, pin FROM whatsapp_waba_numbers WHERE account_id = $1', [a.accountId]);
  assert.equal(numbers.length, 1);
  assert.deepEqual({ ...numbers[0], pin: undefined }, { phone_number_id: CLIENT_PN, display_phone_number: '+420 777 123 456', status: 'CONNECTED', registered: true, pin: undefined });
  const templates = await svc.sql('SELECT name, language, status, category FROM whatsapp_waba_templates WHERE account_id = $1', [a.accountId]);
  assert.deepEqual(templates, [{ name: 'client_welcome', language: 'cs', status: 'APPROVED', category: 'MARKETING' }]);

  // The sender row (D12): the phone number id, on the onboarding connection, with the business token.
  const senders = await svc.admin('GET', `/senders?account_id=${a.accountId}`);
  assert.deepEqual(senders.body.senders.map((s: Record<string, unknown>) => ({ ...s, id: undefined })), [
    { id: undefined, account_id: a.accountId, family: 'whatsapp', sender: CLIENT_PN, connection: 'wa-main', details: { waba_id: CLIENT_WABA } },
  ]);
  const [opened] = await loadSenders(svc.runtime.db, box, { accountId: a.accountId });
  const graph = new GraphClient({ baseUrl: sim.url });
  try {
    assert.equal((await graph.getWaba(CLIENT_WABA, opened!.credentials.access_token!)).id, CLIENT_WABA, 'the stored token is the one Graph minted');
    // The PIN we keep is the one the number was registered with: registering again with it is accepted.
    const pin = box.open(numbers[0]!.pin as Buffer, `whatsapp-pin:${a.accountId}:${CLIENT_PN}`).pin!;
    assert.match(pin, /^\d{6}$/);
    await graph.registerNumber(CLIENT_PN, opened!.credentials.access_token!, pin);
    const other = pin === '123456' ? '654321' : '123456';
    await assert.rejects(graph.registerNumber(CLIENT_PN, opened!.credentials.access_token!, other), (e: unknown) => e instanceof GraphError && e.code === 133005);
  } finally {
    await graph.close();
  }

  // Delivered by the webhook pool: one batch per event, each delivered.
  const batches = await waitFor(async () => {
    const rows = await svc.sql(`SELECT status, cardinality(event_ids) AS n FROM webhook_batches WHERE url = $1`, [`${rx.url}/partner/done`]);
    return rows.every((x) => x.status === 'delivered') ? rows : null;
  }, 10_000, 'the batches recorded as delivered');
  assert.equal(batches.length, 5);
  assert.ok(batches.every((x) => x.n === 1));

  // Done is done: the page says so, and the token cannot complete or cancel it again.
  const again = await page(token);
  assert.equal(again.status, 200);
  assert.match(again.text, /WhatsApp is already connected/);
  assert.ok(again.text.includes(`href="${rx.url}/finish/done"`));
  const twice = await complete({ token, event: 'FINISH', code: (await code()).code, waba_id: CLIENT_WABA, phone_number_id: CLIENT_PN });
  assert.equal(twice.status, 409);
  assert.deepEqual(twice.body, { success: false, message: 'This signup is already completed' });
  assert.equal((await complete({ token, event: 'CANCEL', current_step: 'PERMISSIONS' })).status, 409);
});

test('a failure at a step fails the signup with that step, notifies `failed`, and a new try with a new code completes it (same PIN)', async () => {
  const token = await signup(a.apiKey, 'retry');
  const used = sim.codes().find((x) => x.used)!;
  const res = await complete({ token, event: 'FINISH', code: used.code, waba_id: CLIENT_WABA, phone_number_id: CLIENT_PN, business_id: CLIENT_BUSINESS });
  assert.equal(res.status, 502, res.text);
  assert.equal(res.body.success, false);
  assert.equal(res.body.step, 'exchange_code');
  assert.match(res.body.message, /^The WhatsApp setup failed at step exchange_code: \[100\] /);
  const failed = await partnerEvents('retry', 'failed');
  assert.deepEqual(failed.map((e) => e.event), ['es_finished', 'failed']);
  assert.equal(failed[1].current_step, 'exchange_code');
  assert.match(failed[1].error, /^\[100\] /);
  assert.equal(failed[1].whatsapp_id, CLIENT_WABA);
  let row = await signupRow(token);
  assert.equal(row.status, 'failed');
  assert.equal(row.current_step, 'exchange_code');
  assert.match(row.error, /^\[100\] /);
  assert.deepEqual(row.log.at(-2), { ...row.log.at(-2), event: 'failed', step: 'exchange_code' });

  const ok = await complete({ token, event: 'FINISH', code: (await code()).code, waba_id: CLIENT_WABA, phone_number_id: CLIENT_PN });
  assert.equal(ok.status, 200, ok.text);
  await partnerEvents('retry', 'completed');
  row = await signupRow(token);
  assert.equal(row.status, 'completed');
  assert.equal(row.current_step, null);
});

test('failures at the other steps: no WABA from Embedded Signup, a WABA the client did not share, Graph unreachable, another account\'s PIN', async () => {
  const noWaba = await signup(a.apiKey, 'no-waba');
  const r1 = await complete({ token: noWaba, event: 'FINISH', code: (await code()).code });
  assert.equal(r1.status, 400, r1.text);
  assert.deepEqual(r1.body, { success: false, step: 'embedded_signup', message: 'The WhatsApp setup failed at step embedded_signup: Embedded Signup reported no WhatsApp Business Account' });
  assert.equal((await partnerEvents('no-waba', 'failed')).at(-1).current_step, 'embedded_signup');

  const foreign = await signup(a.apiKey, 'foreign-waba');
  const r2 = await complete({ token: foreign, event: 'FINISH', code: (await code()).code, waba_id: OWN_WABA, phone_number_id: '106540352242922' });
  assert.equal(r2.status, 502, r2.text);
  assert.equal(r2.body.step, 'subscribe_app');
  assert.match(r2.body.message, /\[100\] /);
  assert.equal((await partnerEvents('foreign-waba', 'failed')).at(-1).whatsapp_id, OWN_WABA);

  await storeConnection('wa-main', { ...simConfig(), graph_url: 'http://127.0.0.1:9' });
  try {
    const down = await signup(a.apiKey, 'graph-down');
    const r3 = await complete({ token: down, event: 'FINISH', code: (await code()).code, waba_id: CLIENT_WABA, phone_number_id: CLIENT_PN });
    assert.equal(r3.status, 502, r3.text);
    assert.equal(r3.body.step, 'exchange_code');
    assert.match(r3.body.message, /\[0\] /);
  } finally {
    await storeConnection('wa-main', simConfig());
  }

  // Account B onboards the number account A registered: Graph refuses B's new PIN.
  const other = await signup(b.apiKey, 'other-account');
  const r4 = await complete({ token: other, event: 'FINISH', code: (await code()).code, waba_id: CLIENT_WABA, phone_number_id: CLIENT_PN });
  assert.equal(r4.status, 502, r4.text);
  assert.equal(r4.body.step, 'register_number');
  assert.match(r4.body.message, /\[133005\] /);
  const events = await partnerEvents('other-account', 'failed');
  assert.deepEqual(events.map((e) => e.event), ['es_finished', 'waba_subscribed', 'failed']);
  assert.deepEqual((await svc.admin('GET', `/senders?account_id=${b.accountId}`)).body.senders, [], 'no sender for a number that was not registered');
});

test('a cancelled Embedded Signup is logged with its step, notified, and may be started again', async () => {
  const token = await signup(a.apiKey, 'cancel');
  await page(token);
  const res = await complete({ token, event: 'CANCEL', current_step: 'PHONE_NUMBER_VERIFICATION', error_message: 'closed' });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.body, { success: true });
  const events = await partnerEvents('cancel', 'es_cancelled');
  assert.deepEqual(events.at(-1), { ...events.at(-1), event: 'es_cancelled', current_step: 'PHONE_NUMBER_VERIFICATION', partner_client_id: 'client-cancel' });
  assert.equal(events.at(-1).whatsapp_id, undefined);
  const row = await signupRow(token);
  assert.equal(row.status, 'cancelled');
  assert.equal(row.current_step, 'PHONE_NUMBER_VERIFICATION');
  assert.deepEqual(row.log.find((e: { event: string }) => e.event === 'es_cancelled'),
    { ...row.log.find((e: { event: string }) => e.event === 'es_cancelled'), current_step: 'PHONE_NUMBER_VERIFICATION', error_message: 'closed' });

  const bad = await complete({ token: `${token}x`, event: 'CANCEL' });
  assert.equal(bad.status, 401);
  assert.deepEqual(bad.body, { success: false, message: 'The onboarding token is not valid' });
  const malformed = await complete({ token, event: 'FINISH', waba_id: 'abc' });
  assert.equal(malformed.status, 400);
  assert.deepEqual(malformed.body, { success: false, message: 'waba_id: is not valid' });
  assert.equal((await svc.request('GET', '/whatsapp/onboarding/complete')).status, 405);
});

test('a signup being completed is not claimed twice; one left completing by a dead process is open again after five minutes', async () => {
  const token = await signup(a.apiKey, 'stuck');
  const row = await signupRow(token);
  await svc.sql(`UPDATE whatsapp_signups SET status = 'completing' WHERE id = $1`, [row.id]);
  const busy = await complete({ token, event: 'FINISH', code: (await code()).code, waba_id: CLIENT_WABA, phone_number_id: CLIENT_PN });
  assert.equal(busy.status, 409);
  assert.deepEqual(busy.body, { success: false, message: 'This signup is being completed' });
  await svc.sql(`UPDATE whatsapp_signups SET updated_at = now() - interval '6 minutes' WHERE id = $1`, [row.id]);
  const ok = await complete({ token, event: 'FINISH', code: (await code()).code, waba_id: CLIENT_WABA, phone_number_id: CLIENT_PN });
  assert.equal(ok.status, 200, ok.text);
  assert.equal((await signupRow(token)).status, 'completed');
});

test('partner callbacks are retried like webhooks until the partner takes them', async () => {
  let refused = 0;
  rx.respond = (req) => (req.url === '/partner/flaky' && refused++ < 2 ? { status: 503 } : { status: 200 });
  try {
    const token = await signup(a.apiKey, 'flaky');
    await page(token);
    const [started] = await partnerEvents('flaky', 'signup_started');
    assert.equal(started.event, 'signup_started');
    // The pool records the outcome once the partner's answer is read (after the receiver saw the POST).
    const batch = await waitFor(async () => {
      const [row] = await svc.sql('SELECT status, attempts, last_status FROM webhook_batches WHERE url = $1', [`${rx.url}/partner/flaky`]);
      return row?.status === 'delivered' ? row : null;
    }, 10_000, 'the batch recorded as delivered');
    assert.deepEqual(batch, { status: 'delivered', attempts: 3, last_status: 200 });
  } finally {
    rx.respond = () => ({ status: 200 });
  }
});

test('the lists: accounts, phone numbers and templates of the calling account, D7 fields, 400/401/404', async () => {
  // Account A's WABA, last onboarded by the signup 'stuck' (its partner_client_id is the client_id).
  const accounts = await post(a.apiKey, '/v1/whatsapp/accounts/list');
  assert.equal(accounts.status, 200, accounts.text);
  assert.deepEqual(accounts.body, {
    success: true,
    accounts: [{
      client_id: 'client-stuck', whatsapp_name: 'Client Shop', whatsapp_id: CLIENT_WABA, whatsapp_currency: 'CZK',
      whatsapp_owner_name: 'Client Shop a.s.', whatsapp_owner_id: CLIENT_BUSINESS, country: 'CZ',
    }],
  });
  assert.deepEqual((await post(a.apiKey, '/v1/whatsapp/accounts/list', { waba_id: CLIENT_WABA })).body, accounts.body);
  const numbers = await post(a.apiKey, '/v1/whatsapp/phone_numbers/list', { waba_id: CLIENT_WABA });
  assert.deepEqual(numbers.body, { success: true, phone_numbers: [{ phone_number: '420777123456', phone_number_id: CLIENT_PN, status: 'CONNECTED' }] });
  const templates = await post(a.apiKey, '/v1/whatsapp/templates/list', { waba_id: CLIENT_WABA });
  assert.deepEqual(templates.body, { success: true, templates: [{ template_name: 'client_welcome', language: 'cs', status: 'APPROVED', category: 'MARKETING' }] });
  const sub = await post(a.apiKey, '/v1/apikey/add', { shared: true, currency: 'CZK' });
  assert.deepEqual((await post(sub.body.apikey, '/v1/whatsapp/templates/list', { waba_id: CLIENT_WABA })).body, templates.body, 'a sub-key reads its account\'s lists');

  // Account C holds no WABA: another account's WABA is not found, its own list is empty.
  assert.deepEqual((await post(c.apiKey, '/v1/whatsapp/accounts/list', {})).body, { success: true, accounts: [] });
  for (const path of ['/v1/whatsapp/accounts/list', '/v1/whatsapp/phone_numbers/list', '/v1/whatsapp/templates/list']) {
    const res = await post(c.apiKey, path, { waba_id: CLIENT_WABA });
    assert.equal(res.status, 404, path);
    assert.deepEqual(res.body, { success: false, message: `waba_id: ${CLIENT_WABA} is not a WhatsApp Business Account of this account` });
    assert.equal((await post(null, path, { waba_id: CLIENT_WABA })).status, 401);
    assert.equal((await post('sb_wrong', path, { waba_id: CLIENT_WABA })).status, 401);
  }
  for (const path of ['/v1/whatsapp/phone_numbers/list', '/v1/whatsapp/templates/list']) {
    const cases: Array<[unknown, string]> = [
      [undefined, 'waba_id: is required'],
      [{}, 'waba_id: is required'],
      [{ waba_id: 'x1' }, 'waba_id: must be a WABA id (a string of digits)'],
      [{ waba_id: CLIENT_WABA, refresh: 1 }, 'refresh: must be true or false'],
      [{ waba_id: CLIENT_WABA, limit: 5 }, 'limit: is not an allowed field (allowed: waba_id, refresh)'],
    ];
    for (const [body, message] of cases) {
      const res = await post(a.apiKey, path, body);
      assert.equal(res.status, 400, `${path} ${JSON.stringify(body)}`);
      assert.deepEqual(res.body, { success: false, message });
    }
  }
});

test('refresh: true reads Graph again with the stored token; a token Graph no longer takes is a 502 naming its code', async () => {
  await svc.sql('DELETE FROM whatsapp_waba_templates WHERE account_id = $1', [a.accountId]);
  await svc.sql(`UPDATE whatsapp_waba_numbers SET status = 'PENDING' WHERE account_id = $1`, [a.accountId]);
  await svc.sql(`UPDATE whatsapp_wabas SET name = 'old name' WHERE account_id = $1`, [a.accountId]);
  assert.deepEqual((await post(a.apiKey, '/v1/whatsapp/templates/list', { waba_id: CLIENT_WABA })).body.templates, [], 'the stored list');
  const templates = await post(a.apiKey, '/v1/whatsapp/templates/list', { waba_id: CLIENT_WABA, refresh: true });
  assert.deepEqual(templates.body.templates, [{ template_name: 'client_welcome', language: 'cs', status: 'APPROVED', category: 'MARKETING' }]);
  const numbers = await post(a.apiKey, '/v1/whatsapp/phone_numbers/list', { waba_id: CLIENT_WABA, refresh: true });
  assert.equal(numbers.body.phone_numbers[0].status, 'CONNECTED');
  const accounts = await post(a.apiKey, '/v1/whatsapp/accounts/list', { refresh: true });
  assert.equal(accounts.body.accounts[0].whatsapp_name, 'Client Shop');
  assert.equal((await post(a.apiKey, '/v1/whatsapp/templates/list', { waba_id: CLIENT_WABA })).body.templates.length, 1, 'and stored');

  sim.reset(); // forgets the tokens it minted
  const refused = await post(a.apiKey, '/v1/whatsapp/templates/list', { waba_id: CLIENT_WABA, refresh: true });
  assert.equal(refused.status, 502, refused.text);
  assert.match(refused.body.message, new RegExp(`^waba_id ${CLIENT_WABA}: Graph refused the refresh: \\[190\\] `));
  assert.equal((await post(a.apiKey, '/v1/whatsapp/templates/list', { waba_id: CLIENT_WABA })).body.templates.length, 1, 'the stored list stays');
});
