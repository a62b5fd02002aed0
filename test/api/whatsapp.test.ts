/**
 * The WhatsApp connector end to end over real HTTP on 127.0.0.1: the service (SANDBOX off) sends
 * to the Graph simulator (scripts/sim/whatsapp), the simulator's signed webhooks come back to
 * `/callbacks/whatsapp/main`, and SMS fallback steps go over SMPP to the SMSC simulator. The
 * connection and the senders are created through the admin API, as an operator would.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SmscSimulator } from '../../scripts/smsc-simulator.js';
import { startWhatsappSimulator, type SimMessage, type WhatsappSimulator } from '../../scripts/sim/whatsapp/simulator.js';
import { signatureHeader } from '../../shared/carriers/whatsapp/webhook.js';
import { createLogger } from '../../shared/logger.js';
import type { OutboundAttempt } from '../../shared/carriers/types.js';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { metricsRegistry } from '../../shared/metrics.js';
import { parseExposition, total } from '../support/exposition.js';

const T = { timeout: 30_000 };
const PN = '106540352242922';
const PN2 = '106540352242923';
const WABA = '102290129340398';
const TOKEN = 'sim-system-user-token';
/** The simulator's delay between a send and each of its statuses, for every test but one. */
const CALLBACK_DELAY_MS = 10;

let sim: WhatsappSimulator;
let smsc: SmscSimulator;
let svc: TestService;
let accountId: number;
let apiKey: string;
const logLines: string[] = [];
/** Started first, checked last: a send Meta always throttles, retried until its ttl runs out. */
let throttledId = '';
let throttledAt = 0;

type Ev = { message_id: string; gateway: string; result: string; result_info: string; [k: string]: unknown };

async function send(message: Record<string, unknown>, key = apiKey): Promise<string> {
  const res = await svc.request('POST', '/v2/messages', { body: [message], headers: { 'x-api-key': key } });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.rejected.length, 0, JSON.stringify(res.body.rejected));
  return res.body.accepted[0].message_id as string;
}

async function events(publicId: string): Promise<Ev[]> {
  const rows = await svc.sql<{ body: string }>(
    'SELECT e.body FROM events e JOIN recipients r ON r.id = e.recipient_id WHERE r.public_id = $1 ORDER BY e.id', [publicId]);
  return rows.map((r) => JSON.parse(r.body) as Ev);
}

const trail = (evs: Ev[]) => evs.map((e) => `${e.gateway}:${e.result}`);

/**
 * Waits until the recipient has as many events as expected, then compares them all. A trail that
 * ends in an SMS step is compared up to `sms:sent` (the SMSC's receipt may or may not be in yet).
 */
async function waitTrail(publicId: string, expected: string[], timeoutMs = 10_000): Promise<Ev[]> {
  const open = expected[expected.length - 1] === 'sms:sent';
  let last: Ev[] = [];
  try {
    return await waitFor(async () => {
      last = await events(publicId);
      return last.length >= expected.length ? last : null;
    }, timeoutMs, `events of ${publicId}`);
  } finally {
    assert.deepEqual(open ? trail(last).slice(0, expected.length) : trail(last), expected);
  }
}

/** What the Graph simulator received for a number, oldest first. */
const graphSends = (to: string): SimMessage[] => sim.messages({ to, limit: 100 }).reverse();

async function attemptOf(publicId: string, step = 0): Promise<{ id: number; state: string; refunded: boolean; carrier: string }> {
  const [row] = await svc.sql<{ id: string; state: string; refunded: boolean; carrier: string }>(
    `SELECT a.id, a.state, a.refunded, a.carrier FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1 AND a.step = $2`,
    [publicId, step]);
  assert.ok(row, `attempt ${step} of ${publicId}`);
  return { ...row, id: Number(row.id) };
}

/** A signed webhook POST to the connection's callback, as Meta would send it. */
function postWebhook(body: unknown, signature?: string | null): Promise<{ status: number; text: string }> {
  const raw = typeof body === 'string' ? body : JSON.stringify(body);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  const sig = signature === undefined ? signatureHeader(raw, sim.seed.app.secret) : signature;
  if (sig !== null) headers['x-hub-signature-256'] = sig;
  return svc.request('POST', '/callbacks/whatsapp/main', { raw, headers });
}

function statusEnvelope(statuses: Array<Record<string, unknown>>): unknown {
  return {
    object: 'whatsapp_business_account',
    entry: [{ id: WABA, changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '420601000001', phone_number_id: PN }, statuses } }] }],
  };
}

before(async () => {
  smsc = new SmscSimulator({ systemId: 'sb', password: 'pw', receiptDelayMs: 20 });
  const { port } = await smsc.start();
  sim = await startWhatsappSimulator({ callbackDelayMs: CALLBACK_DELAY_MS, webhooks: { retryDelaysMs: [50, 100] } });
  const logger = createLogger('debug', 'switchboard', { write: (line: string) => void logLines.push(line) });
  svc = await startTestService({ logger, env: { SANDBOX: '0', SMPP_URL: `smpp://sb:pw@127.0.0.1:${port}`, WHATSAPP_GRAPH_URL: sim.url } });
  ({ accountId, apiKey } = await svc.createAccount({ credit_czk: 1000 }));
  const prices = await svc.admin('PUT', '/prices', [
    { channel: 'sms', prefix: '', price_czk: 1, price_eur: 0.04 },
    { channel: 'whatsapp_text', prefix: '', price_czk: 2, price_eur: 0.08 },
    { channel: 'whatsapp_template', prefix: '', price_czk: 3, price_eur: 0.12 },
  ]);
  assert.equal(prices.status, 200, prices.text);
  const conn = await svc.admin('POST', '/carriers', {
    name: 'main', kind: 'whatsapp',
    config: { app_id: sim.seed.app.id, app_secret: sim.seed.app.secret, verify_token: sim.seed.app.verify_token },
  });
  assert.equal(conn.status, 201, conn.text);
  for (const sender of [PN, PN2]) {
    const res = await svc.admin('POST', '/senders', {
      account_id: accountId, family: 'whatsapp', sender, connection: 'main', credentials: { access_token: TOKEN }, details: { waba_id: WABA },
    });
    assert.equal(res.status, 201, res.text);
  }
  sim.configure({ callbackUrl: `${svc.url}/callbacks/whatsapp/main` });
  await sim.verify();
  await waitFor(() => smsc.boundSessions === 1, 10_000, 'SMPP bound');
  // Meta always answers 131056 for numbers ending 07: retried within the step's one-minute ttl.
  throttledId = await send({ body: 'Throttled', to: [{ phone_number: '420777100107' }], flow: [{ whatsapp_template: { template_name: 'hello_world', sender: PN2, ttl: 1 } }, { sms: {} }] });
  throttledAt = Date.now();
});

after(async () => {
  await svc?.stop();
  await sim?.stop();
  await smsc?.stop();
});

describe('connection and senders (D12)', () => {
  it('stores the app secret and verify token sealed, never answers them, and names bad fields', T, async () => {
    const list = await svc.admin('GET', '/carriers');
    const main = list.body.carriers.find((c: { name: string }) => c.name === 'main');
    assert.equal(main.kind, 'whatsapp');
    assert.equal(main.config.app_secret, '***');
    assert.equal(main.config.verify_token, '***');
    assert.equal(main.config.per_number_mps, 80, 'default cap');
    assert.equal(main.state, 'ready');
    for (const secret of [sim.seed.app.secret, sim.seed.app.verify_token]) assert.ok(!list.text.includes(secret));
    const [row] = await svc.sql<{ config: Record<string, unknown>; secrets: Buffer }>(`SELECT config, secrets FROM carrier_connections WHERE name = 'main'`);
    assert.equal(row!.config.app_secret, undefined);
    assert.ok(!row!.secrets.includes(Buffer.from(sim.seed.app.secret)), 'sealed');
    const senders = await svc.admin('GET', `/senders?account_id=${accountId}`);
    assert.equal(senders.body.senders.length, 2);
    assert.ok(!senders.text.includes(TOKEN));
    const [sender] = await svc.sql<{ credentials: Buffer }>('SELECT credentials FROM carrier_senders LIMIT 1');
    assert.ok(!sender!.credentials.includes(Buffer.from(TOKEN)), 'the business token is sealed');

    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ app_secret: 's' }, /^config\.verify_token: is required/],
      [{ app_secret: 's', verify_token: 'v', graph_version: '25' }, /^config\.graph_version: must look like v25\.0/],
      [{ app_secret: 's', verify_token: 'v', per_number_mps: 0 }, /^config\.per_number_mps: /],
      [{ app_secret: 's', verify_token: 'v', graph_url: 'ftp://x' }, /^config\.graph_url: /],
      // A password in the URL would be stored and shown in clear, and never sent.
      [{ app_secret: 's', verify_token: 'v', graph_url: 'https://u:GraphPw@graph.example' }, /^config\.graph_url: must not hold a user or password/],
    ];
    for (const [config, message] of cases) {
      const res = await svc.admin('POST', '/carriers', { name: 'bad', kind: 'whatsapp', config });
      assert.equal(res.status, 400, res.text);
      assert.match(res.body.message, message);
    }
    const noToken = await svc.admin('POST', '/senders', { account_id: accountId, family: 'whatsapp', sender: '1', connection: 'main', credentials: {} });
    assert.equal(noToken.status, 400);
    assert.match(noToken.body.message, /^credentials\.access_token: is required/);
    const badWaba = await svc.admin('POST', '/senders', {
      account_id: accountId, family: 'whatsapp', sender: '1', connection: 'main', credentials: { access_token: 'x' }, details: { waba_id: 'abc' },
    });
    assert.equal(badWaba.status, 400);
    assert.match(badWaba.body.message, /^details\.waba_id: /);
  });

  it('answers Meta\'s handshake with the challenge only for the verify token', T, async () => {
    const q = (token: string) => `/callbacks/whatsapp/main?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=${encodeURIComponent(token)}`;
    const ok = await svc.request('GET', q(sim.seed.app.verify_token));
    assert.equal(ok.status, 200);
    assert.equal(ok.text, '1158201444');
    const wrong = await svc.request('GET', q('guess'));
    assert.equal(wrong.status, 403);
    assert.equal((await svc.request('GET', '/callbacks/whatsapp/nope?hub.mode=subscribe')).status, 404, 'an unknown connection');
  });
});

describe('sending', () => {
  it('free text inside the window: our attempt reference goes to Meta, the wamid is registered, statuses come back', T, async () => {
    const phone = '420777100100';
    sim.inject({ phoneNumberId: PN, from: phone, text: 'Hello shop' });
    await waitFor(async () => (await svc.sql(`SELECT 1 FROM whatsapp_windows WHERE phone_number_id = $1 AND user_number = $2`, [PN, phone])).length === 1,
      5000, 'the inbound opened the window');
    const id = await send({ body: 'Your order shipped', to: [{ phone_number: phone }], flow: [{ whatsapp_text: { sender: PN } }] });
    const evs = await waitTrail(`${id}-0`, ['whatsapp_text:sending', 'whatsapp_text:sent', 'whatsapp_text:delivered', 'whatsapp_text:seen']);
    assert.equal(evs[3]!.result_info, '[0] Seen');
    const attempt = await attemptOf(`${id}-0`);
    assert.equal(attempt.carrier, 'whatsapp.main');
    const [sent] = graphSends(phone);
    assert.equal(sent!.text, 'Your order shipped');
    assert.equal(sent!.biz_opaque_callback_data, `a${attempt.id}`);
    const refs = await svc.sql<{ ref: string }>('SELECT ref FROM carrier_refs WHERE attempt_id = $1 AND carrier = $2', [attempt.id, 'whatsapp.main']);
    assert.deepEqual(refs.map((r) => r.ref), [sent!.id]);
    // Its request is timed under the connection's kind and name, as SMPP's are (one in 16, the first included).
    const m = parseExposition(await metricsRegistry().metrics());
    assert.ok(total(m, 'switchboard_carrier_submit_seconds', { kind: 'whatsapp', connection: 'main' }, 'switchboard_carrier_submit_seconds_count') >= 1);
    assert.equal(total(m, 'switchboard_carrier_submit_seconds', { kind: 'http' }, 'switchboard_carrier_submit_seconds_count'), 0);
  });

  it('free text outside the window ends undelivered [131047] without calling Meta, is refunded and falls back to SMS', T, async () => {
    const phone = '420777100200';
    const id = await send({ body: 'Are you there?', to: [{ phone_number: phone }], flow: [{ whatsapp_text: { sender: PN } }, { sms: { sender: 'Shop' } }] });
    const evs = await waitTrail(`${id}-0`, ['whatsapp_text:sending', 'whatsapp_text:undelivered', 'sms:sending', 'sms:sent']);
    assert.equal(evs[1]!.result_info, '[131047] Re-engagement message');
    assert.equal(graphSends(phone).length, 0, 'Meta was not called');
    assert.ok((await attemptOf(`${id}-0`)).refunded);
    assert.equal((await attemptOf(`${id}-0`, 1)).refunded, false, 'the SMS is charged');
    assert.ok(smsc.submitted.some((s) => s.destination_addr === phone));
  });

  it('Meta\'s own 131047 is the backstop when our view of the window is wrong (async, and sync with the switch)', T, async () => {
    const phone = '420777100300';
    // Our table says the person wrote a minute ago; Meta never saw it.
    await svc.sql(`INSERT INTO whatsapp_windows VALUES ($1, $2, now() - interval '1 minute')`, [PN, phone]);
    const id = await send({ body: 'Hi', to: [{ phone_number: phone }], flow: [{ whatsapp_text: { sender: PN } }, { sms: {} }] });
    const evs = await waitTrail(`${id}-0`, ['whatsapp_text:sending', 'whatsapp_text:undelivered', 'sms:sending', 'sms:sent']);
    assert.equal(evs[1]!.result_info, '[131047] Re-engagement message');
    sim.configure({ windowErrorSync: true });
    try {
      const id2 = await send({ body: 'Hi again', to: [{ phone_number: phone }], flow: [{ whatsapp_text: { sender: PN } }, { sms: {} }] });
      const evs2 = await waitTrail(`${id2}-0`, ['whatsapp_text:sending', 'whatsapp_text:undelivered', 'sms:sending', 'sms:sent']);
      assert.match(evs2[1]!.result_info, /^\[131047\] /);
      assert.ok((await attemptOf(`${id2}-0`)).refunded, 'Meta never took it');
    } finally {
      sim.configure({ windowErrorSync: false });
    }
  });

  it('templates with every parameter kind; the language is the registered one unless the step names it', T, async () => {
    const cases: Array<{ phone: string; step: Record<string, unknown>; check(m: SimMessage): void }> = [
      {
        phone: '420777101100',
        step: { template_name: 'order_update', params: ['Jana', 'A-1001'], params_header: ['A-1001'], params_buttons: ['A-1001', 'stop'] },
        check: (m) => {
          assert.equal(m.template!.language, 'en_US', 'the first approved language of the name');
          assert.deepEqual(m.template!.components, [
            { type: 'header', parameters: [{ type: 'text', text: 'A-1001' }] },
            { type: 'body', parameters: [{ type: 'text', text: 'Jana' }, { type: 'text', text: 'A-1001' }] },
            { type: 'button', index: '0', sub_type: 'url', parameters: [{ type: 'text', text: 'A-1001' }] },
            { type: 'button', index: '1', sub_type: 'quick_reply', parameters: [{ type: 'payload', payload: 'stop' }] },
          ]);
        },
      },
      {
        phone: '420777101200',
        step: { template_name: 'order_update', language: 'cs', params: ['Jana', 'A-1'], params_header: ['A-1'], params_buttons: ['A-1'] },
        check: (m) => assert.equal(m.template!.language, 'cs'),
      },
      {
        // An empty string skips a button (here the quick reply, which needs no payload).
        phone: '420777101250',
        step: { template_name: 'order_update', params: ['Jana', 'A-2'], params_header: ['A-2'], params_buttons: ['A-2', ''] },
        check: (m) => assert.deepEqual((m.template!.components as Array<{ type: string }>).filter((c) => c.type === 'button'),
          [{ type: 'button', index: '0', sub_type: 'url', parameters: [{ type: 'text', text: 'A-2' }] }]),
      },
      {
        phone: '420777101300',
        step: { template_name: 'promo_image', params: ['shoes'], params_header: ['https://shop.example/banner.png'] },
        check: (m) => assert.deepEqual((m.template!.components as Array<{ type: string }>)[0],
          { type: 'header', parameters: [{ type: 'image', image: { link: 'https://shop.example/banner.png' } }] }),
      },
      {
        phone: '420777101400',
        step: { template_name: 'invoice_ready', params: ['2026-17'], params_header: ['https://shop.example/invoice-17.pdf'] },
        check: (m) => assert.deepEqual((m.template!.components as Array<{ type: string }>)[0],
          { type: 'header', parameters: [{ type: 'document', document: { link: 'https://shop.example/invoice-17.pdf', filename: 'invoice-17.pdf' } }] }),
      },
      {
        phone: '420777101500',
        step: { template_name: 'verify_code', params: ['482913'], params_buttons: ['482913'] },
        check: (m) => assert.deepEqual((m.template!.components as unknown[])[1],
          { type: 'button', index: '0', sub_type: 'url', parameters: [{ type: 'text', text: '482913' }] }),
      },
      {
        phone: '420777101600',
        step: { template_name: 'coupon_offer', params: ['10 %'], params_buttons: ['SAVE10'] },
        check: (m) => assert.deepEqual((m.template!.components as unknown[])[1],
          { type: 'button', index: '0', sub_type: 'copy_code', parameters: [{ type: 'coupon_code', coupon_code: 'SAVE10' }] }),
      },
      {
        phone: '420777101700',
        step: { template_name: 'named_greeting', params: ['Jana', '4'], params_header: ['Jana'] },
        check: (m) => assert.deepEqual((m.template!.components as unknown[])[1],
          { type: 'body', parameters: [{ type: 'text', text: 'Jana', parameter_name: 'first_name' }, { type: 'text', text: '4', parameter_name: 'guests' }] }),
      },
      {
        phone: '420777101800',
        step: { template_name: 'hello_world' },
        check: (m) => assert.equal(m.template!.components!.length, 0),
      },
    ];
    const ids = await Promise.all(cases.map((c) => send({ to: [{ phone_number: c.phone }], flow: [{ whatsapp_template: { sender: PN, ...c.step } }] })));
    for (const [i, c] of cases.entries()) {
      await waitTrail(`${ids[i]}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:delivered', 'whatsapp_template:seen']);
      const [m] = graphSends(c.phone);
      assert.equal(m!.http_status, 200, `${c.phone}: ${JSON.stringify(m!.error)}`);
      c.check(m!);
    }
  });

  it('a template whose parameters do not fit the cached one fails [132000] without calling Meta, refunded, and falls back', T, async () => {
    const phone = '420777102100';
    const id = await send({ body: 'Order on its way', to: [{ phone_number: phone }], flow: [{ whatsapp_template: { sender: PN, template_name: 'order_update', params: ['Jana'] } }, { sms: {} }] });
    const evs = await waitTrail(`${id}-0`, ['whatsapp_template:sending', 'whatsapp_template:failed', 'sms:sending', 'sms:sent']);
    assert.match(evs[1]!.result_info, /^\[132000\] Template Param Count Mismatch \(body parameters: template expects 2, step gives 1\)$/);
    assert.equal(graphSends(phone).length, 0);
    assert.ok((await attemptOf(`${id}-0`)).refunded);
  });
});

describe('each error class', () => {
  it('unreachable (131026, async, before and after sent): undelivered and SMS at once; refunded only when it never reached sent', T, async () => {
    const never = await send({ body: 'x', to: [{ phone_number: '420777103104' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }, { sms: {} }] });
    const evs = await waitTrail(`${never}-0`, ['whatsapp_template:sending', 'whatsapp_template:undelivered', 'sms:sending', 'sms:sent']);
    assert.equal(evs[1]!.result_info, '[131026] Message Undeliverable');
    assert.ok((await attemptOf(`${never}-0`)).refunded);
    const later = await send({ body: 'x', to: [{ phone_number: '420777103101' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }, { sms: {} }] });
    await waitTrail(`${later}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:undelivered', 'sms:sending', 'sms:sent']);
    assert.equal((await attemptOf(`${later}-0`)).refunded, false, 'Meta had sent it');
  });

  it('retry (130429 twice): the same attempt is sent again and delivered', T, async () => {
    const phone = '420777103206';
    const id = await send({ body: 'x', to: [{ phone_number: phone }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }, { sms: {} }] });
    await waitTrail(`${id}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:delivered', 'whatsapp_template:seen']);
    const tries = graphSends(phone);
    assert.deepEqual(tries.map((m) => m.error?.code ?? m.http_status), [130429, 130429, 200]);
    const attempt = await attemptOf(`${id}-0`);
    assert.ok(tries.every((m) => m.biz_opaque_callback_data === `a${attempt.id}`), 'one attempt, tried three times');
    assert.ok(Date.parse(tries[2]!.at) - Date.parse(tries[0]!.at) >= 1500, 'with backoff');
    // Taken after the hand-over was recorded (the retry waited here meanwhile): its re-hand guard
    // is kept ten minutes, as long as the others are after the record, not the ttl and an hour.
    const guard = await svc.runtime.redis.ttl(`${svc.prefix}:wa:acc:${attempt.id}`);
    assert.ok(guard > 0 && guard <= 600, `${guard} s`);
  });

  it('config (132015 paused template, 190 token) and request (131021): failed, refunded, SMS; warned once per number', T, async () => {
    const paused = await send({ body: 'x', to: [{ phone_number: '420777103300' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'summer_sale', params: ['-20 %'] } }, { sms: {} }] });
    const evs = await waitTrail(`${paused}-0`, ['whatsapp_template:sending', 'whatsapp_template:failed', 'sms:sending', 'sms:sent']);
    assert.equal(evs[1]!.result_info, '[132015] Template is Paused');
    assert.ok((await attemptOf(`${paused}-0`)).refunded);
    const again = await send({ body: 'x', to: [{ phone_number: '420777103400' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'summer_sale', params: ['-20 %'] } }, { sms: {} }] });
    await waitTrail(`${again}-0`, ['whatsapp_template:sending', 'whatsapp_template:failed', 'sms:sending', 'sms:sent']);
    const warnings = logLines.filter((l) => l.includes('"level":40') && l.includes('[132015]'));
    assert.equal(warnings.length, 1, 'one warning per number and error');

    const { accountId: other, apiKey: otherKey } = await svc.createAccount({ credit_czk: 100 });
    const res = await svc.admin('POST', '/senders', { account_id: other, family: 'whatsapp', sender: PN, connection: 'main', credentials: { access_token: 'expired-token' } });
    assert.equal(res.status, 201, res.text);
    // The admin API's change reaches the dispatching connections by a refresh that runs after its
    // answer (at once in this process, within seconds in others): a send may go once it is routed.
    await waitFor(() => svc.runtime.engine.carriers.route('whatsapp_template', '420777103500', other, PN).carrier !== null, 10_000, 'the new sender routed');
    const badToken = await send({ body: 'x', to: [{ phone_number: '420777103500' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }, { sms: {} }] }, otherKey);
    const tokenEvs = await waitTrail(`${badToken}-0`, ['whatsapp_template:sending', 'whatsapp_template:failed', 'sms:sending', 'sms:sent']);
    assert.match(tokenEvs[1]!.result_info, /^\[190\] /);

    const request = await send({ body: 'x', to: [{ phone_number: '420777103605' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }, { sms: {} }] });
    const reqEvs = await waitTrail(`${request}-0`, ['whatsapp_template:sending', 'whatsapp_template:failed', 'sms:sending', 'sms:sent']);
    assert.equal(reqEvs[1]!.result_info, '[131021] Recipient cannot be sender');
  });

  it('a payment problem Meta reports after acceptance (131042) ends the attempt undelivered', T, async () => {
    const id = await send({ body: 'x', to: [{ phone_number: '420777103709' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }, { sms: {} }] });
    const evs = await waitTrail(`${id}-0`, ['whatsapp_template:sending', 'whatsapp_template:undelivered', 'sms:sending', 'sms:sent']);
    assert.equal(evs[1]!.result_info, '[131042] Business eligibility payment issue');
  });

  it('a sender the account does not own never reaches Meta: [303] naming it, and the flow moves on', T, async () => {
    const { apiKey: stranger } = await svc.createAccount({ credit_czk: 100 });
    const phone = '420777103800';
    const id = await send({ body: 'x', to: [{ phone_number: phone }], flow: [{ whatsapp_template: { sender: PN2, template_name: 'hello_world' } }, { sms: {} }] }, stranger);
    const evs = await waitTrail(`${id}-0`, ['whatsapp_template:rejected', 'sms:sending', 'sms:sent']);
    assert.equal(evs[0]!.result_info, `[303] No route: sender "${PN2}" is not registered for whatsapp`);
    assert.equal(graphSends(phone).length, 0);
  });
});

describe('statuses', () => {
  it('read before delivered: delivered is reported first, once', T, async () => {
    const id = await send({ body: 'x', to: [{ phone_number: '420777104108' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }] });
    await waitTrail(`${id}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:delivered', 'whatsapp_template:seen']);
  });

  it('duplicates and out-of-order statuses give each event once, in the state path\'s order', T, async () => {
    sim.configure({ duplicateStatuses: true });
    try {
      const dup = await send({ body: 'x', to: [{ phone_number: '420777104201' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }] });
      await waitTrail(`${dup}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:undelivered']);
      sim.configure({ outOfOrder: true });
      // read, then delivered, then sent (each twice): the first read stands for all three.
      const late = await send({ body: 'x', to: [{ phone_number: '420777104200' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }] });
      await waitTrail(`${late}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:delivered', 'whatsapp_template:seen']);
      await sim.idle(5000);
      await new Promise((r) => setTimeout(r, 200));
      assert.equal((await events(`${dup}-0`)).length, 3, 'the copies changed nothing');
      assert.equal((await events(`${late}-0`)).length, 4);
      assert.equal(graphSends('420777104200')[0]!.statuses.length, 3);
    } finally {
      sim.configure({ duplicateStatuses: false, outOfOrder: false });
    }
  });

  it('a sent that arrives after the failure it preceded is reported once, after it; the state and the refund stay', T, async () => {
    // …01: sent, then failed 131026; out of order, the failure comes first (Meta keeps no order),
    // and each status twice: the late sent is reported once. 400 ms apart, so the failure is
    // applied before the sent arrives: 10 ms apart, a loaded machine's late timer sometimes put
    // both in one webhook, and one batch applies its moves in the state path's order instead.
    sim.configure({ outOfOrder: true, duplicateStatuses: true, callbackDelayMs: 400 });
    try {
      const id = await send({ body: 'x', to: [{ phone_number: '420777104501' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }] });
      await waitTrail(`${id}-0`, ['whatsapp_template:sending', 'whatsapp_template:undelivered', 'whatsapp_template:sent']);
      await sim.idle(5000);
      await new Promise((r) => setTimeout(r, 200));
      const evs = await events(`${id}-0`);
      assert.equal(evs.length, 3, 'the sent once');
      assert.equal(evs[2]!.result_info, 'Sent');
      const attempt = await attemptOf(`${id}-0`);
      assert.equal(attempt.state, 'undelivered');
      assert.equal(attempt.refunded, true, 'refunded when it ended; not charged again');
      const [row] = await svc.sql<{ reached_sent: boolean; sent_at: Date | null; result_info: string }>(
        'SELECT reached_sent, sent_at, result_info FROM attempts WHERE id = $1', [attempt.id]);
      assert.equal(row!.reached_sent, true);
      assert.ok(row!.sent_at, 'sent_at recorded');
      assert.match(row!.result_info, /^\[131026\] /, 'the final result_info kept');
      // updated_at stays the failure's (the lookup reads it as the receipt time): earlier than
      // the late sent's event, which its own statement wrote.
      const [times] = await svc.sql<{ updated_before_late: boolean }>(
        `SELECT a.updated_at < (SELECT max(e.created_at) FROM events e WHERE e.recipient_id = a.recipient_id) AS updated_before_late
           FROM attempts a WHERE a.id = $1`, [attempt.id]);
      assert.equal(times!.updated_before_late, true);
    } finally {
      sim.configure({ outOfOrder: false, duplicateStatuses: false, callbackDelayMs: CALLBACK_DELAY_MS });
    }
  });

  it('refuses a bad or missing signature (401) and a malformed body (400) with nothing applied; unknown wamids are answered 200', T, async () => {
    const id = await send({ body: 'x', to: [{ phone_number: '420777104303' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }] });
    await waitTrail(`${id}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent']);
    const attempt = await attemptOf(`${id}-0`);
    const forged = statusEnvelope([{ id: 'wamid.forged', status: 'delivered', timestamp: String(Math.floor(Date.now() / 1000)), recipient_id: '420777104303', biz_opaque_callback_data: `a${attempt.id}` }]);
    const bad = await postWebhook(forged, signatureHeader(JSON.stringify(forged), 'not-the-app-secret'));
    assert.equal(bad.status, 401);
    assert.equal((await postWebhook(forged, null)).status, 401, 'no signature');
    const malformed = await postWebhook({ object: 'whatsapp_business_account', entry: [{ changes: [{ field: 'messages', value: { statuses: [{ status: 'sent' }] } }] }] });
    assert.equal(malformed.status, 400);
    assert.match(malformed.text, /has no id/);
    assert.equal((await postWebhook('{not json')).status, 400);
    const unknown = await postWebhook(statusEnvelope([{ id: 'wamid.someone-else', status: 'delivered', timestamp: '1767225600', recipient_id: '420777000000' }]));
    assert.equal(unknown.status, 200);
    assert.ok(logLines.some((l) => l.includes('statuses of messages we did not send') && l.includes('wamid.someone-else')));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal((await attemptOf(`${id}-0`)).state, 'sent', 'nothing applied');
    assert.equal((await svc.sql(`SELECT 1 FROM carrier_refs WHERE ref = 'wamid.someone-else'`)).length, 0, 'not parked');

    // Signed by the simulator with a wrong key: refused each time Meta tries.
    sim.configure({ badSignature: true });
    try {
      const id2 = await send({ body: 'x', to: [{ phone_number: '420777104400' }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }] });
      await waitFor(() => graphSends('420777104400').length === 1, 5000, 'the send');
      await sim.idle(5000);
      assert.deepEqual(trail(await events(`${id2}-0`)), ['whatsapp_template:sending']);
      assert.ok(sim.webhooks(5).some((d) => d.status === 401));
    } finally {
      sim.configure({ badSignature: false });
    }
  });

  it('a signed status naming an attempt the connection did not carry (an SMS) by biz_opaque_callback_data changes nothing', T, async () => {
    const id = await send({ body: 'x', to: [{ phone_number: '420777104500' }], flow: [{ sms: { sender: 'Shop' } }] });
    await waitTrail(`${id}-0`, ['sms:sending', 'sms:sent', 'sms:delivered']);
    const sms = await attemptOf(`${id}-0`);
    assert.match(sms.carrier, /^smpp\./);
    // Another system sending from the same number may set the same reference; so may a forger holding the app secret.
    const now = String(Math.floor(Date.now() / 1000));
    const res = await postWebhook(statusEnvelope([
      { id: 'wamid.other-system', status: 'read', timestamp: now, recipient_id: '420777104500', biz_opaque_callback_data: `a${sms.id}` },
      { id: 'wamid.other-system-2', status: 'failed', timestamp: now, recipient_id: '420777104500', biz_opaque_callback_data: `a${sms.id}`, errors: [{ code: 131026, title: 'Message undeliverable' }] },
    ]));
    assert.equal(res.status, 200, res.text);
    await waitFor(() => logLines.some((l) => l.includes('naming attempts their connection did not carry')), 5000, 'the warning');
    assert.equal((await attemptOf(`${id}-0`)).state, 'delivered', 'the SMS is not moved');
    assert.deepEqual(trail(await events(`${id}-0`)), ['sms:sending', 'sms:sent', 'sms:delivered'], 'no event for it');
  });
});

describe('inbound', () => {
  it('a reply names the message it answers (context id); without one the D5 rule picks the latest; both open the window', T, async () => {
    const phone = '420777105100';
    const first = await send({ to: [{ phone_number: phone }], payload: { order: 1 }, flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }] });
    await waitTrail(`${first}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:delivered', 'whatsapp_template:seen']);
    const second = await send({ to: [{ phone_number: phone }], payload: { order: 2 }, flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }] });
    await waitTrail(`${second}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:delivered', 'whatsapp_template:seen']);
    const firstWamid = graphSends(phone)[0]!.id!;

    const replies = async (n: number) => waitFor(async () => {
      const rows = await svc.sql<{ body: string }>(`SELECT body FROM events WHERE kind = 'incomingReplyMessage' AND account_id = $1 ORDER BY id`, [accountId]);
      const mine = rows.map((r) => JSON.parse(r.body) as Record<string, unknown>).filter((b) => b.sender === phone);
      return mine.length >= n ? mine : null;
    }, 5000, `${n} replies`);
    sim.inject({ phoneNumberId: PN, from: phone, text: 'About my first order', contextId: firstWamid });
    const [quoted] = await replies(1);
    assert.equal(quoted!.message_id, `${first}-0`, 'the quoted message, not the latest');
    assert.deepEqual(quoted!.payload, { order: 1 });
    assert.equal(quoted!.gateway, 'whatsapp');
    assert.equal(quoted!.recipient, PN);
    assert.equal(quoted!.body, 'About my first order');
    sim.inject({ phoneNumberId: PN, from: phone, text: 'And another thing' });
    const [, latest] = await replies(2);
    assert.equal(latest!.message_id, `${second}-0`, 'D5: the latest message from that number to that person');
    const [w] = await svc.sql<{ n: number }>(`SELECT count(*)::int AS n FROM whatsapp_windows WHERE phone_number_id = $1 AND user_number = $2 AND last_inbound_at > now() - interval '1 minute'`, [PN, phone]);
    assert.equal(w!.n, 1);
  });

  it('a message Meta delivers again (its webhook retried: the same wamid) is stored and reported once', T, async () => {
    const phone = '420777105300';
    // A message to the person first, so that what they send is a reply with an event.
    const sent = await send({ to: [{ phone_number: phone }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }] });
    await waitTrail(`${sent}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:delivered', 'whatsapp_template:seen']);
    const now = String(Math.floor(Date.now() / 1000));
    const body = {
      object: 'whatsapp_business_account',
      entry: [{ id: WABA, changes: [{ field: 'messages', value: {
        messaging_product: 'whatsapp', metadata: { display_phone_number: '420601000001', phone_number_id: PN },
        contacts: [{ profile: { name: 'Dup' }, wa_id: phone }],
        messages: [{ from: phone, id: 'wamid.DUPTEST1', timestamp: now, type: 'text', text: { body: 'Only once, please' } }],
      } }] }],
    };
    for (let i = 0; i < 3; i++) assert.equal((await postWebhook(body)).status, 200);
    const [stored] = await svc.sql<{ n: number }>(`SELECT count(*)::int AS n FROM inbound_messages WHERE carrier_ref = 'wamid.DUPTEST1'`);
    assert.equal(stored!.n, 1, 'one row');
    const replies = await svc.sql<{ n: number }>(`SELECT count(*)::int AS n FROM events WHERE kind = 'incomingReplyMessage' AND body LIKE '%Only once, please%'`);
    assert.equal(replies[0]!.n, 1, 'one event');
  });

  it('a message from someone we never wrote to goes to the account the number is assigned to', T, async () => {
    const assign = await svc.admin('POST', '/numbers', { account_id: accountId, value: PN, channels: ['whatsapp'] });
    assert.equal(assign.status, 201, assign.text);
    const phone = '420777105200';
    sim.inject({ phoneNumberId: PN, from: phone, text: 'Do you ship to Brno?' });
    const msg = await waitFor(async () => {
      const rows = await svc.sql<{ body: string }>(`SELECT body FROM events WHERE kind = 'incomingMessage' AND account_id = $1`, [accountId]);
      return rows.map((r) => JSON.parse(r.body) as Record<string, unknown>).find((b) => b.sender === phone);
    }, 5000, 'incomingMessage');
    assert.equal(msg.gateway, 'whatsapp');
    assert.equal(msg.body, 'Do you ship to Brno?');
  });
});

describe('handed again after a crash', () => {
  it('an attempt Meta accepted is never sent twice: its wamid is found in Redis, else in carrier_refs', T, async () => {
    const phone = '420777106100';
    const id = await send({ to: [{ phone_number: phone }], flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }] });
    await waitTrail(`${id}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:delivered', 'whatsapp_template:seen']);
    const attempt = await attemptOf(`${id}-0`);
    const wamid = graphSends(phone)[0]!.id!;
    const key = `${svc.prefix}:wa:acc:${attempt.id}`;
    const shortened = await svc.runtime.redis.ttl(key);
    assert.ok(shortened > 0 && shortened <= 600, `kept ten minutes once the engine recorded the hand-over (${shortened} s)`);
    // The dispatch job run again (its first run died after Meta's answer, before the carrier heard
    // of the record or the wamid was registered): the attempt is not handed again, the carrier
    // hears of the record now and registers the wamid it still remembers.
    await svc.runtime.redis.set(key, wamid, 'EX', 4000);
    await svc.sql('DELETE FROM carrier_refs WHERE attempt_id = $1', [attempt.id]);
    const [job] = await svc.sql<{ recipient_id: number; message_id: string }>(
      'SELECT r.id AS recipient_id, r.message_id FROM recipients r WHERE r.public_id = $1', [`${id}-0`]);
    const rerun = await svc.runtime.engine.dispatch({ step: 0, messages: [{ messageId: job!.message_id, recipientIds: [Number(job!.recipient_id)] }] });
    assert.equal(rerun.handed, 0);
    const rerunTtl = await svc.runtime.redis.ttl(key);
    assert.ok(rerunTtl > 0 && rerunTtl <= 600, `shortened by the run again (${rerunTtl} s)`);
    assert.deepEqual(await svc.sql('SELECT ref FROM carrier_refs WHERE attempt_id = $1', [attempt.id]), [{ ref: wamid }], 'registered again');
    assert.equal(graphSends(phone).length, 1);
    await svc.runtime.redis.del(key);
    const carrier = svc.runtime.connections!.connection('main')!.carrier;
    const again: OutboundAttempt = {
      attemptId: attempt.id, recipientPublicId: `${id}-0`, accountId, to: phone, sender: PN, text: 'hello_world', ttlMinutes: 10,
      channel: 'whatsapp_template', template: { templateName: 'hello_world' }, rehand: true,
    };
    // A crash after Meta's answer, before the hand-over was recorded, leaves the key.
    await svc.runtime.redis.set(key, wamid, 'EX', 60);
    await carrier.send([again]);
    assert.equal(graphSends(phone).length, 1, 'found in Redis');
    await carrier.handedOver!([attempt.id]);
    const left = await svc.runtime.redis.ttl(key);
    assert.ok(left > 0 && left <= 600, `${left} s`);
    await svc.runtime.redis.del(key);
    await carrier.send([again]);
    assert.equal(graphSends(phone).length, 1, 'found in carrier_refs');
    // Without either record (a crash between Meta's answer and the Redis write) it would go again:
    // the one window in which a message can repeat.
    await svc.sql('DELETE FROM carrier_refs WHERE attempt_id = $1', [attempt.id]);
    await svc.runtime.redis.del(key);
    await carrier.send([again]);
    assert.equal(graphSends(phone).length, 2);
    assert.equal(graphSends(phone)[1]!.biz_opaque_callback_data, `a${attempt.id}`);
    // That send was not followed by a recorded hand-over (no engine here): its wamid stays in
    // Redis until the step's ttl and an hour have passed, for the re-hand a crash would bring.
    assert.equal(await svc.runtime.redis.get(key), graphSends(phone)[1]!.id, 'remembered as soon as Meta answered');
    const ttl = await svc.runtime.redis.ttl(key);
    assert.ok(ttl > 3600 && ttl <= 10 * 60 + 3600, `expires after the ttl and an hour (${ttl} s)`);
  });
});

describe('retries within the ttl', () => {
  it('a send Meta keeps throttling is retried with growing delays and fails with the last answer before its ttl runs out', { timeout: 90_000 }, async () => {
    await waitTrail(`${throttledId}-0`, ['whatsapp_template:sending', 'whatsapp_template:failed', 'sms:sending', 'sms:sent'], Math.max(5000, throttledAt + 70_000 - Date.now()));
    const evs = await events(`${throttledId}-0`);
    assert.equal(evs[1]!.result_info, '[131056] (Business Account, Consumer Account) pair rate limit hit');
    const tries = graphSends('420777100107');
    assert.ok(tries.length >= 5 && tries.length <= 8, `${tries.length} tries in the minute`);
    const last = Date.parse(tries[tries.length - 1]!.at) - Date.parse(tries[0]!.at);
    assert.ok(last < 60_000, 'none after the ttl');
    assert.ok((await attemptOf(`${throttledId}-0`)).refunded, 'Meta never took it');
  });
});

describe('secrets', () => {
  it('never appear in the logs', () => {
    const all = logLines.join('');
    assert.ok(all.length > 0);
    for (const secret of [sim.seed.app.secret, sim.seed.app.verify_token, TOKEN, 'expired-token']) {
      assert.ok(!all.includes(secret), 'a secret was logged');
    }
  });
});
