/**
 * WhatsApp partner onboarding (D7) end to end in a real browser: Debian's Chromium (headless,
 * driven by playwright-core) opens the hosted page of a signup, runs the simulator's Embedded Signup
 * stand-in, and ends at the partner's finish URL, while the partner's callbacks arrive signed at a
 * local receiver. Also: a cancelled signup started again, messages from untrusted origins ignored,
 * and the page's error for a forged link, with no Content-Security-Policy violation on any page.
 *
 * Chromium must be installed (`apt-get install -y chromium`; `.ci/run` does it): without it these
 * tests fail saying so, they never pass silently.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { startTestService, startReceiver, type Receiver, type TestService } from '../support/harness.js';
import { startWhatsappSimulator, type WhatsappSimulator } from '../../scripts/sim/whatsapp/simulator.js';
import { DEFAULT_SEED } from '../../scripts/sim/whatsapp/seed.js';
import { partnerEvents as events, simConnectionConfig, storeWhatsappConnection } from '../support/whatsapp-onboarding.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];
const CLIENT_WABA = DEFAULT_SEED.signup.waba_id;
const CLIENT_PN = DEFAULT_SEED.signup.phone_number_id;
const SECRET = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;

let svc: TestService;
let sim: WhatsappSimulator;
let rx: Receiver;
let browser: BrowserContext;
let userDataDir: string;
let account: { accountId: number; apiKey: string };

before(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium is not installed at ${CHROMIUM}: the onboarding browser tests need it (apt-get install -y chromium; .ci/run installs it)`);
  }
  sim = await startWhatsappSimulator();
  rx = await startReceiver();
  svc = await startTestService({ env: { ALLOW_PRIVATE_CALLBACKS: 'true', WHATSAPP_SDK_URL: `${sim.url}/_sim/sdk.js` } });
  await storeWhatsappConnection(svc, 'wa-main', simConnectionConfig(sim.url));
  account = await svc.createAccount();
  const res = await svc.request('POST', '/v1/apikey/update', { body: { webhook_secret: SECRET }, headers: { 'x-api-key': account.apiKey } });
  assert.equal(res.status, 200, res.text);
  userDataDir = mkdtempSync(path.join(tmpdir(), 'sb-chromium-'));
  browser = await chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, timeout: 60_000 });
});
after(async () => {
  await browser?.close();
  if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
  await svc?.stop();
  await sim?.stop();
  await rx?.close();
});

/** Starts a signup; answers the page URL on the test service (redirect_url's path, `?token=`). */
async function signup(name: string): Promise<string> {
  const res = await svc.request('POST', '/v1/whatsapp/signup', {
    headers: { 'x-api-key': account.apiKey },
    body: {
      partner_name: 'Acme Partners', partner_callback_url: `${rx.url}/partner/${name}`, partner_client_id: `client-${name}`,
      partner_finish_url: `${rx.url}/finish/${name}`, phone_number: 'manual', wa_name: 'Client Shop', wa_email: 'owner@shop.example',
      wa_website: 'https://shop.example', country: 'CZ',
    },
  });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.redirect_url, `${svc.config.publicUrl}/whatsapp/onboarding`);
  return `${svc.url}${new URL(res.body.redirect_url).pathname}?token=${encodeURIComponent(res.body.token)}`;
}

/** A page that records console errors (CSP violations among them) and uncaught errors. */
async function openPage(): Promise<{ page: Page; problems: string[] }> {
  const page = await browser.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' || /Content Security Policy/i.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  return { page, problems };
}

const partnerEvents = (name: string, last: string): Promise<any[]> => events(rx, name, last, SECRET);

async function clickStart(page: Page): Promise<void> {
  await page.locator('#start:not([disabled])').waitFor({ timeout: 15_000 });
  await page.click('#start');
}

test('the whole flow in Chromium: the page, the stand-in signup, the partner callbacks, the redirect to partner_finish_url', { timeout: 60_000 }, async () => {
  const url = await signup('browser');
  const { page, problems } = await openPage();
  try {
    await page.goto(url);
    assert.equal(await page.title(), 'Connect WhatsApp for Acme Partners');
    await clickStart(page);
    await page.waitForURL(`${rx.url}/finish/browser`, { timeout: 20_000 });
    assert.deepEqual(problems, [], 'no console error and no CSP violation');
  } finally {
    await page.close();
  }
  const events = await partnerEvents('browser', 'completed');
  assert.deepEqual(events.map((e) => e.event), ['signup_started', 'es_finished', 'waba_subscribed', 'number_registered', 'completed']);
  assert.ok(events.every((e) => e.partner_client_id === 'client-browser'));
  assert.equal(events.at(-1).whatsapp_id, CLIENT_WABA);
  assert.equal(events.at(-1).phone_number_id, CLIENT_PN);
  const finish = rx.requests.find((r) => r.path === '/finish/browser');
  assert.ok(finish, 'the browser requested the finish URL');
  assert.equal(finish.headers.referer, undefined, 'no Referer carried the token to the partner');
  const senders = await svc.admin('GET', `/senders?account_id=${account.accountId}`);
  assert.deepEqual(senders.body.senders.map((s: { sender: string; connection: string; details: unknown }) => [s.sender, s.connection, s.details]),
    [[CLIENT_PN, 'wa-main', { waba_id: CLIENT_WABA }]]);
  const accounts = await svc.request('POST', '/v1/whatsapp/accounts/list', { headers: { 'x-api-key': account.apiKey } });
  assert.equal(accounts.body.accounts[0].whatsapp_id, CLIENT_WABA);
  assert.equal(accounts.body.accounts[0].client_id, 'client-browser');
});

test('a cancelled signup says where it stopped, notifies es_cancelled, and can be started again on the same page', { timeout: 60_000 }, async () => {
  const url = await signup('cancel');
  const { page, problems } = await openPage();
  const sdk = `${sim.url}/_sim/sdk.js`;
  try {
    await page.route(sdk, (route) => route.continue({ url: `${sdk}?cancel=PHONE_NUMBER_VERIFICATION` }));
    await page.goto(url);
    await clickStart(page);
    await page.locator('#status', { hasText: 'left at PHONE_NUMBER_VERIFICATION' }).waitFor({ timeout: 15_000 });
    assert.equal(await page.locator('#back').isVisible(), true, 'a way back to the partner');
    const cancelled = await partnerEvents('cancel', 'es_cancelled');
    assert.equal(cancelled.at(-1).current_step, 'PHONE_NUMBER_VERIFICATION');

    await page.unroute(sdk);
    await page.reload();
    await clickStart(page);
    await page.waitForURL(`${rx.url}/finish/cancel`, { timeout: 20_000 });
    assert.deepEqual(problems, []);
  } finally {
    await page.close();
  }
  const events = await partnerEvents('cancel', 'completed');
  assert.deepEqual(events.map((e) => e.event), ['signup_started', 'es_cancelled', 'es_finished', 'waba_subscribed', 'number_registered', 'completed']);
});

test('the page believes WA_EMBEDDED_SIGNUP messages only from the allowed origin and window', { timeout: 60_000 }, async () => {
  const url = await signup('origins');
  const { page } = await openPage();
  const sdk = `${sim.url}/_sim/sdk.js`;
  // An SDK whose login gives a code, then forged FINISH messages (another origin; our origin but
  // another window), then a genuine CANCEL: the page must report the CANCEL, never a FINISH.
  const forged = (origin: string, source: string) => `window.dispatchEvent(new MessageEvent('message', { origin: ${origin}, source: ${source},
    data: JSON.stringify({ type: 'WA_EMBEDDED_SIGNUP', event: 'FINISH', data: { waba_id: '${CLIENT_WABA}', phone_number_id: '${CLIENT_PN}' } }) }));`;
  const script = `window.FB = { init: function () {}, login: function (cb) {
      cb({ authResponse: { code: 'code-from-forged-sdk' }, status: 'connected' });
      ${forged("'https://evil.example'", 'window')}
      ${forged("'https://www.facebook.com.evil.example'", 'window')}
      ${forged('window.location.origin', 'null')}
      setTimeout(function () {
        window.postMessage(JSON.stringify({ type: 'WA_EMBEDDED_SIGNUP', event: 'CANCEL', data: { current_step: 'PERMISSIONS' } }), '*');
      }, 300);
    } };
    if (typeof window.fbAsyncInit === 'function') window.fbAsyncInit();`;
  try {
    await page.route(sdk, (route) => route.fulfill({ status: 200, contentType: 'application/javascript', headers: { 'access-control-allow-origin': '*' }, body: script }));
    await page.goto(url);
    await clickStart(page);
    await page.locator('#status', { hasText: 'left at PERMISSIONS' }).waitFor({ timeout: 15_000 });
  } finally {
    await page.close();
  }
  const events = await partnerEvents('origins', 'es_cancelled');
  assert.deepEqual(events.map((e) => e.event), ['signup_started', 'es_cancelled']);
});

test('a forged link gets the error page in the browser, with no script and no CSP violation', { timeout: 60_000 }, async () => {
  const url = await signup('forged');
  const { page, problems } = await openPage();
  try {
    const res = await page.goto(`${url.slice(0, -4)}AAAA`);
    assert.equal(res?.status(), 401);
    assert.equal(await page.locator('h1').textContent(), 'This link is not valid');
    assert.deepEqual(problems.filter((p) => !/401/.test(p)), []);
  } finally {
    await page.close();
  }
});
