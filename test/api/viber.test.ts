/**
 * Viber end to end over real HTTP on loopback: the service (in-process, sandbox on so that SMS
 * fallback steps are carried without SMPP) → the `viber` connector → the Viber simulator (both
 * dialects) → callbacks to the service's `/callbacks/viber/<connection>/<token>` → events.
 * Connections and senders are configured through the admin API, as an operator would.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { Writable } from 'node:stream';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { metricsRegistry } from '../../shared/metrics.js';
import { parseExposition, total } from '../support/exposition.js';
import { recipientEvents, sendMessage, trailOf, waitForTrail } from '../support/trails.js';
import { startViberSimulator, type ViberSimulator } from '../../scripts/sim/viber/simulator.js';
import { createLogger } from '../../shared/logger.js';
import { createPool } from '../../shared/db/pool.js';
import { ParkedReceiptExpiry } from '../../shared/engine/parked-receipts.js';
import { ViberCarrier } from '../../shared/carriers/viber/carrier.js';
import type { StatusReport } from '../../shared/carriers/types.js';
import type { ViberAttempt } from '../../shared/channels/index.js';

const TOKEN_O = 'tok-official-0123456789abcdef';
const TOKEN_P = 'tok-partner-0123456789abcdefgh';
const TOKEN_S = 'tok-secret-0123456789abcdefghij';
const TOKEN_A = 'tok-allow-0123456789abcdefghijk';
const TOKEN_X = 'tok-later-0123456789abcdefghijk';
const SECRET = 'shared-secret-0123456789';
const API_KEY = 'partner-api-key-0123456789';
const SECRETS = [TOKEN_O, TOKEN_P, TOKEN_S, TOKEN_A, TOKEN_X, SECRET, API_KEY, Buffer.from(API_KEY).toString('base64')];

let svc: TestService;
let sim: ViberSimulator;
let key: string;
let accountId: number;
let publicUrl: string;
const logLines: string[] = [];

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function admin(method: string, path: string, body?: unknown, expected = [200, 201]): Promise<any> { // eslint-disable-line @typescript-eslint/no-explicit-any
  const res = await svc.admin(method, path, body);
  assert.ok(expected.includes(res.status), `${method} ${path}: ${res.status} ${res.text}`);
  return res.body;
}

async function routedTo(sender: string, carrier: string): Promise<void> {
  await waitFor(() => svc.runtime.engine.carriers.route('viber', '420777000000', accountId, sender).carrier?.name === carrier, 10_000, `${sender} routed to ${carrier}`);
}

before(async () => {
  const port = await freePort();
  publicUrl = `http://127.0.0.1:${port}`;
  const logs = new Writable({
    write(chunk: Buffer, _enc, done) {
      logLines.push(chunk.toString());
      done();
    },
  });
  svc = await startTestService({ env: { PORT: String(port), PUBLIC_URL: publicUrl, SANDBOX_SLOW_DELIVERY_MS: '300', AT_MOST_ONCE_LANES: 'transactional' }, logger: createLogger('debug', 'switchboard', logs) });
  ({ apiKey: key, accountId } = await svc.createAccount({ credit_czk: 10000 }));
  sim = await startViberSimulator({
    callbackUrl: `${svc.url}/callbacks/viber/vo`, callbackToken: TOKEN_O, apiKeys: [API_KEY], expireAfterMs: 300,
  });
  await admin('POST', '/carriers', { name: 'vo', kind: 'viber', config: { dialect: 'official', base_url: sim.url, callback_token: TOKEN_O } });
  await admin('POST', '/carriers', {
    name: 'vp', kind: 'viber', config: { dialect: 'partner', base_url: sim.url, credentials: API_KEY, callback_token: TOKEN_P },
  });
  await admin('POST', '/senders', { account_id: accountId, family: 'viber', sender: 'Shop', connection: 'vo', details: { service_id: 1001 } });
  await admin('POST', '/senders', { account_id: accountId, family: 'viber', sender: 'ShopP', connection: 'vp', details: { source_name: 'ShopP' } });
  await routedTo('Shop', 'viber.vo');
  await routedTo('ShopP', 'viber.vp');
});

after(async () => {
  await svc?.stop();
  await sim?.stop();
});

type Ev = { message_id: string; gateway: string; result: string; result_info: string; viber?: Record<string, unknown> };

const send = (message: Record<string, unknown>): Promise<string> => sendMessage(svc, key, message);
const events = (publicId: string): Promise<Ev[]> => recipientEvents<Ev>(svc, publicId);
const trail = trailOf;
const waitTrail = (publicId: string, expected: string[], timeoutMs?: number): Promise<Ev[]> => waitForTrail<Ev>(svc, publicId, expected, timeoutMs);

interface AttemptRow { id: number; step: number; state: string; result_info: string; refunded: boolean; charged: string; created_at: Date; updated_at: Date }
async function attempts(publicId: string): Promise<AttemptRow[]> {
  return svc.sql<AttemptRow>(
    `SELECT a.id::int AS id, a.step, a.state, a.result_info, a.refunded, a.charged::text, a.created_at, a.updated_at
       FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1 ORDER BY a.step`, [publicId]);
}

const viberSteps = ['viber:sending', 'viber:sent', 'viber:delivered', 'viber:seen'];

test('text and text + button over the official dialect: every field as Viber expects it', async () => {
  const id = await send({ body: 'Your order shipped', to: [{ phone_number: '420777100200' }, { phone_number: '420777100300' }], tag: 'transactional',
    flow: [{ viber: { sender: 'Shop', ttl: 5 } }] });
  const idButton = await send({ body: 'Spring sale', to: [{ phone_number: '420777100311' }],
    flow: [{ viber: { sender: 'Shop', buttons: [{ title: 'Open the shop', url: 'https://shop.example/sale' }] } }, { sms: {} }] });
  await waitTrail(`${id}-0`, viberSteps);
  await waitTrail(`${id}-1`, viberSteps);
  const [text] = sim.messages({ to: '420777100200' });
  const [a] = await attempts(`${id}-0`);
  assert.deepEqual({ ...text, at: 0 }, {
    dialect: 'official', id: text!.id, sender: '1001', to: '420777100200', type: 206, label: 'transaction', text: 'Your order shipped', button: null,
    trackingData: String(a!.id), ttl: 300, seq: a!.id, callbackUrl: null, result: 0, partnerStatus: null, at: 0,
  });
  // The token is registered against the attempt.
  assert.deepEqual(await svc.sql('SELECT attempt_id::int AS attempt_id FROM carrier_refs WHERE carrier = $1 AND ref = $2', ['viber.vo', text!.id]), [{ attempt_id: a!.id }]);
  // Its request is timed under the connection's kind and name, as SMPP's are (one in 16, the first included).
  const m = parseExposition(await metricsRegistry().metrics());
  assert.ok(total(m, 'switchboard_carrier_submit_seconds', { kind: 'viber', connection: 'vo' }, 'switchboard_carrier_submit_seconds_count') >= 1);
  assert.equal(total(m, 'switchboard_carrier_submit_seconds', { kind: 'http' }, 'switchboard_carrier_submit_seconds_count'), 0);

  // 11 is not a special ending; a button goes as 209 (promotion), default ttl of a step with a next one: 10 minutes.
  await waitTrail(`${idButton}-0`, viberSteps);
  const [withButton] = sim.messages({ to: '420777100311' });
  assert.equal(withButton!.type, 209);
  assert.equal(withButton!.label, 'promotion');
  assert.deepEqual(withButton!.button, { caption: 'Open the shop', action: 'https://shop.example/sale' });
  assert.equal(withButton!.ttl, 600);
  // A promotional text without a button.
  const promo = await send({ body: 'Hi', to: [{ phone_number: '420777100312' }], flow: [{ viber: { sender: 'Shop' } }] });
  await waitTrail(`${promo}-0`, viberSteps);
  assert.deepEqual([sim.messages({ to: '420777100312' })[0]!.type, sim.messages({ to: '420777100312' })[0]!.label], [225, 'promotion']);
});

test('an attempt handed again after a crash is answered 12 by Viber: nothing is sent twice, nothing changes', async () => {
  const id = await send({ body: 'Once', to: [{ phone_number: '420777100320' }], flow: [{ viber: { sender: 'Shop' } }] });
  await waitTrail(`${id}-0`, viberSteps);
  const [a] = await attempts(`${id}-0`);
  const before = sim.stats().official;
  // What dispatch hands again when a job runs a second time after a crash.
  await svc.runtime.connections!.connection('vo')!.carrier.send([{
    attemptId: a!.id, recipientPublicId: `${id}-0`, accountId, to: '420777100320', sender: 'Shop', text: 'Once', ttlMinutes: 1440,
    channel: 'viber', rehand: true,
  }]);
  const after = sim.stats().official;
  // The simulator answers a known seq 12 with the first token and records no second message.
  assert.deepEqual([after.requests - before.requests, after.accepted - before.accepted], [1, 1]);
  assert.equal(sim.messages({ to: '420777100320' }).length, 1, 'one message at Viber');
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(trail(await events(`${id}-0`)), viberSteps);
});

test('unreachable and configuration statuses end the Viber step at once; SMS follows in the same second, Viber is refunded', async () => {
  // The SMS step is the sandbox's (D10, by the same last two digits).
  const delivered = ['sms:sending', 'sms:sent', 'sms:delivered'];
  const table: Array<[string, string, string, string[]]> = [
    ['420777100404', 'undelivered', '[9] SRVC_NOT_VIBER_USER', delivered],
    ['420777100406', 'undelivered', '[10] SRVC_NO_SUITABLE_DEVICE', delivered],
    ['420777100405', 'undelivered', '[8] SRVC_USER_BLOCKED', ['sms:sending', 'sms:rejected']],
    ['420777100407', 'undelivered', '[21] SRVC_WAIT_FOR_USER_RESPONSE', delivered],
    ['420777100409', 'failed', '[13] SRVC_NOT_PERMITTED', delivered],
    ['420777100509', 'failed', '[13] SRVC_NOT_PERMITTED', delivered],
  ];
  const id = await send({ body: 'Fallback', to: table.map(([n]) => ({ phone_number: n })), flow: [{ viber: { sender: 'Shop' } }, { sms: { sender: 'Shop' } }] });
  for (const [i, [, state, info, smsTrail]] of table.entries()) {
    const evs = await waitTrail(`${id}-${i}`, ['viber:sending', `viber:${state}`, ...smsTrail]);
    assert.equal(evs[1]!.result_info, info);
    const [viber, sms] = await attempts(`${id}-${i}`);
    assert.equal(viber!.refunded, true, `${info}: the Viber attempt is refunded`);
    assert.equal(sms!.refunded, smsTrail.includes('sms:rejected'));
    const gap = sms!.created_at.getTime() - viber!.created_at.getTime();
    assert.ok(gap < 1000, `${info}: SMS step started ${gap} ms after the Viber one`);
  }
});

test('a retryable status is sent again with the same seq; the attempt stays sending meanwhile', async () => {
  const id = await send({ body: 'Retry', to: [{ phone_number: '420777100502' }], flow: [{ viber: { sender: 'Shop' } }, { sms: {} }] });
  await waitFor(() => sim.messages({ to: '420777100502' }).length >= 2, 5000, 'a second try');
  const tries = sim.messages({ to: '420777100502' });
  const [a] = await attempts(`${id}-0`);
  assert.deepEqual(tries.map((m) => [m.seq, m.result]), tries.map(() => [a!.id, 1]));
  assert.ok(tries[0]!.at - tries[1]!.at >= 350, `backoff between tries (${tries[0]!.at - tries[1]!.at} ms)`);
  assert.equal(a!.state, 'sending');
  assert.deepEqual(trail(await events(`${id}-0`)), ['viber:sending']);
});

test('no answer at all (connection refused) is retried until Viber is back', async () => {
  const port = await freePort();
  await admin('POST', '/carriers', { name: 'vx', kind: 'viber', config: { dialect: 'official', base_url: `http://127.0.0.1:${port}`, callback_token: TOKEN_X } });
  await admin('POST', '/senders', { account_id: accountId, family: 'viber', sender: 'ShopX', connection: 'vx', details: { service_id: 1001 } });
  await routedTo('ShopX', 'viber.vx');
  const id = await send({ body: 'Later', to: [{ phone_number: '420777100600' }], flow: [{ viber: { sender: 'ShopX' } }] });
  const conn = svc.runtime.connections!.connection('vx')!;
  await waitFor(() => conn.state().state === 'error', 5000, 'the connection reports the failure');
  assert.match(conn.state().detail ?? '', /ECONNREFUSED/);
  const late = await startViberSimulator({ port, callbackUrl: `${svc.url}/callbacks/viber/vx`, callbackToken: TOKEN_X });
  try {
    await waitTrail(`${id}-0`, viberSteps, 10_000);
    assert.equal(late.messages({ to: '420777100600' }).length, 1);
    assert.deepEqual(conn.state(), { state: 'ready' });
  } finally {
    await late.stop();
  }
});

test('Viber expires the message: undelivered, and the SMS step follows', async () => {
  const id = await send({ body: 'Expire', to: [{ phone_number: '420777100701' }], flow: [{ viber: { sender: 'Shop' } }, { sms: {} }] });
  const evs = await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent', 'viber:undelivered', 'sms:sending', 'sms:sent', 'sms:undelivered']);
  assert.equal(evs[2]!.result_info, '[1] Expired');
  const [viber] = await attempts(`${id}-0`);
  assert.equal(viber!.refunded, false, 'Viber took it: charged');
});

test('a delivered receipt after the ttl fallback is reported and starts nothing', async () => {
  const id = await send({ body: 'Late', to: [{ phone_number: '420777100703' }], flow: [{ viber: { sender: 'Shop', ttl: 5 } }, { sms: {} }] });
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent']);
  const [viber] = await attempts(`${id}-0`);
  // The ttl timer is set once the hand-over is recorded (just after the `sent` report).
  const timers = svc.runtime.engine.ttlTimers;
  await waitFor(() => timers.deadlineOf(viber!.id), 5000, 'the ttl timer');
  await timers.set([viber!.id], Date.now()); // fake time: due now, fired within a second
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent', 'viber:undelivered', 'sms:sending', 'sms:sent']);
  // Viber delivers after all: posted as Viber would, naming the message by its token only.
  const token = sim.messages({ to: '420777100703' })[0]!.id;
  const res = await svc.request('POST', `/callbacks/viber/vo/${TOKEN_O}`, {
    body: { event: 'delivered', message_token: Number(token), service_id: 1001, phone_number: '420777100703', timestamp: Date.now() },
  });
  assert.equal(res.status, 200, res.text);
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent', 'viber:undelivered', 'sms:sending', 'sms:sent', 'viber:delivered']);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await attempts(`${id}-0`)).length, 2, 'no third attempt');
  assert.deepEqual(await svc.sql('SELECT step FROM recipients WHERE public_id = $1', [`${id}-0`]), [{ step: 1 }]);
});

test('a failure receipt that overtakes the send\'s own report still passes sent (charged, not refunded)', async () => {
  const port = await freePort(); // nothing listens: the send is retried, its attempt stays `sending`
  await admin('POST', '/carriers', { name: 'vd', kind: 'viber', config: { dialect: 'official', base_url: `http://127.0.0.1:${port}`, callback_token: TOKEN_X } });
  const shopD = await admin('POST', '/senders', { account_id: accountId, family: 'viber', sender: 'ShopD', connection: 'vd', details: { service_id: 1001 } });
  await routedTo('ShopD', 'viber.vd');
  const id = await send({ body: 'Race', to: [{ phone_number: '420777100901' }], flow: [{ viber: { sender: 'ShopD' } }] });
  await waitTrail(`${id}-0`, ['viber:sending']);
  const [a] = await attempts(`${id}-0`);
  const res = await svc.request('POST', `/callbacks/viber/vd/${TOKEN_X}`, {
    body: { event: 'expired', message_token: 77, service_id: 1001, phone_number: '420777100901', tracking_data: String(a!.id), timestamp: Date.now() },
  });
  assert.equal(res.status, 200, res.text);
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent', 'viber:undelivered']);
  assert.equal((await attempts(`${id}-0`))[0]!.refunded, false);
  // A connection its senders use is not deleted under them (they, and their sealed credentials, went with it).
  const inUse = await svc.admin('DELETE', '/carriers/vd');
  assert.equal(inUse.status, 409, inUse.text);
  assert.equal(inUse.body.message, `carrier connection "vd" is used by sender ${shopD.id}; delete it first (DELETE /admin/api/senders/:id)`);
  await admin('DELETE', `/senders/${shopD.id}`);
  await admin('DELETE', '/carriers/vd'); // its retries end with it
});

test('delivered once per device counts once; seen without delivered still delivers first', async () => {
  const id = await send({ body: 'Devices', to: [{ phone_number: '420777100808' }, { phone_number: '420777100810' }], flow: [{ viber: { sender: 'Shop' } }] });
  await waitTrail(`${id}-0`, viberSteps);
  await waitTrail(`${id}-1`, viberSteps);
  await sim.idle();
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(trail(await events(`${id}-0`)), viberSteps, 'the second device changes nothing');
  const token = sim.messages({ to: '420777100808' })[0]!.id;
  const posted = sim.callbacks(1000).flatMap((c) => {
    const body = JSON.parse(c.body) as unknown;
    return (Array.isArray(body) ? body : [body]) as Array<Record<string, unknown>>;
  }).filter((e) => String(e.message_token) === token && e.event === 'delivered');
  assert.equal(posted.length, 2, 'the simulator did post delivered twice');
});

test('replies: tracking data names the exact message; without it the D5 rule takes the latest', async () => {
  const phone = '420777100900';
  const first = await send({ body: 'First', to: [{ phone_number: phone }], payload: { n: 1 }, flow: [{ viber: { sender: 'Shop' } }] });
  await waitTrail(`${first}-0`, viberSteps);
  const second = await send({ body: 'Second', to: [{ phone_number: phone }], payload: { n: 2 }, flow: [{ viber: { sender: 'Shop' } }] });
  await waitTrail(`${second}-0`, viberSteps);
  const [a1] = await attempts(`${first}-0`);
  const replies = async (n: number) => waitFor(async () => {
    const rows = await svc.sql<{ body: string }>(`SELECT body FROM events WHERE kind = 'incomingReplyMessage' AND body::jsonb->>'sender' = $1 ORDER BY id`, [phone]);
    return rows.length >= n ? rows.map((r) => JSON.parse(r.body) as Record<string, unknown>) : null;
  }, 5000, `${n} replies`);

  sim.inject({ service_id: 1001, from: phone, text: 'About the first', tracking_data: String(a1!.id) });
  const [exact] = await replies(1);
  assert.deepEqual({ ...exact, timestamp: 0 }, {
    request_id: exact!.request_id, message_id: `${first}-0`, payload: { n: 1 }, gateway: 'viber', timestamp: 0, type: 'incoming',
    sender: phone, recipient: 'Shop', body: 'About the first',
  });
  sim.inject({ service_id: 1001, from: phone, text: 'No tracking data' });
  const [, byRule] = await replies(2);
  assert.equal(byRule!.message_id, `${second}-0`);
  assert.equal(byRule!.recipient, 'Shop', 'the service id is reported as its registered sender name');
});

test('partner dialect: text + button, delivered; an asynchronous undelivered falls back; replies by reply_to', async () => {
  const id = await send({ body: 'Partner', to: [{ phone_number: '420777101000' }, { phone_number: '420777101004' }], tag: 'transactional',
    flow: [{ viber: { sender: 'ShopP', ttl: 3, buttons: [{ title: 'Track', url: 'https://shop.example/t' }] } }, { sms: {} }] });
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent', 'viber:delivered']);
  const [m] = sim.messages({ to: '420777101000' });
  assert.deepEqual([m!.dialect, m!.sender, m!.type, m!.label, m!.ttl, m!.callbackUrl], ['partner', 'ShopP', 208, 'transaction', 180, `${publicUrl}/callbacks/viber/vp/${TOKEN_P}`]);
  assert.deepEqual(m!.button, { caption: 'Track', action: 'https://shop.example/t' });
  const evs = await waitTrail(`${id}-1`, ['viber:sending', 'viber:sent', 'viber:undelivered', 'sms:sending', 'sms:sent', 'sms:delivered']);
  assert.equal(evs[2]!.result_info, '[4] Undelivered');

  // A second message to the same person: reply_to names the first one exactly.
  const later = await send({ body: 'Again', to: [{ phone_number: '420777101000' }], flow: [{ viber: { sender: 'ShopP' } }] });
  await waitTrail(`${later}-0`, ['viber:sending', 'viber:sent', 'viber:delivered']);
  sim.inject({ source_addr: 'ShopP', from: '420777101000', text: 'Where is it?', reply_to: m!.id });
  const reply = await waitFor(async () => (await svc.sql<{ body: string }>(
    `SELECT body FROM events WHERE kind = 'incomingReplyMessage' AND body::jsonb->>'sender' = '420777101000'`))[0], 5000, 'the reply');
  const body = JSON.parse(reply.body) as Record<string, unknown>;
  assert.equal(body.message_id, `${id}-0`);
  assert.equal(body.recipient, 'ShopP');
});

test('partner dialect, at-most-once lane: an attempt handed again is not sent again', async () => {
  const id = await send({ body: 'Once only', to: [{ phone_number: '420777101020' }], tag: 'transactional', flow: [{ viber: { sender: 'ShopP' } }] });
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent', 'viber:delivered']);
  const [a] = await attempts(`${id}-0`);
  // What dispatch hands again when a job runs a second time after a crash, on that lane.
  await svc.runtime.connections!.connection('vp')!.carrier.send([{
    attemptId: a!.id, recipientPublicId: `${id}-0`, accountId, to: '420777101020', sender: 'ShopP', text: 'Once only', ttlMinutes: 1440,
    channel: 'viber', priority: true, atMostOnce: true, rehand: true,
  }]);
  assert.equal(sim.messages({ to: '420777101020' }).length, 1, 'the partner got it once');
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(trail(await events(`${id}-0`)), ['viber:sending', 'viber:sent', 'viber:delivered']);
});

test('callbacks: token, shared secret and source allowlist are checked first; refusals and malformed bodies apply nothing', async () => {
  await admin('POST', '/carriers', { name: 'vs', kind: 'viber', config: { dialect: 'official', base_url: sim.url, callback_token: TOKEN_S, shared_secret: SECRET } });
  await admin('POST', '/carriers', { name: 'va', kind: 'viber', config: { dialect: 'official', base_url: sim.url, callback_token: TOKEN_A, allowed_sources: ['203.0.113.0/24'] } });
  // A message whose attempt is `sent` and waits for its receipt (03: the simulator sends none).
  const id = await send({ body: 'Auth', to: [{ phone_number: '420777101103' }], flow: [{ viber: { sender: 'Shop' } }] });
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent']);
  const [a] = await attempts(`${id}-0`);
  const delivered = { event: 'delivered', message_token: 1, service_id: 1001, phone_number: '420777101103', tracking_data: String(a!.id) };
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    svc.request('POST', path, typeof body === 'string' ? { raw: body, headers: { 'content-type': 'application/json', ...headers } } : { body, headers });
  const cases: Array<[string, Promise<Awaited<ReturnType<typeof post>>>, number]> = [
    ['no token', post('/callbacks/viber/vo', delivered), 401],
    ['a wrong token', post(`/callbacks/viber/vo/${TOKEN_O}x`, delivered), 401],
    ['a wrong token in the header', post('/callbacks/viber/vo', delivered, { 'x-callback-token': TOKEN_P }), 401],
    ['another connection\'s token', post(`/callbacks/viber/vo/${TOKEN_P}`, delivered), 401],
    ['unknown connection', post(`/callbacks/viber/nope/${TOKEN_O}`, delivered), 404],
    ['shared secret missing', post(`/callbacks/viber/vs/${TOKEN_S}`, delivered), 401],
    ['shared secret wrong', post(`/callbacks/viber/vs/${TOKEN_S}`, delivered, { 'x-callback-secret': `${SECRET}x` }), 401],
    ['source not allowed (even with the token)', post(`/callbacks/viber/va/${TOKEN_A}`, delivered), 403],
    ['not JSON', post(`/callbacks/viber/vo/${TOKEN_O}`, '{"event": "deliv'), 400],
    ['a bad second event: nothing of the body applies', post(`/callbacks/viber/vo/${TOKEN_O}`, [delivered, { event: 'delivered', service_id: 1001 }]), 400],
    ['an unknown event', post(`/callbacks/viber/vo/${TOKEN_O}`, { ...delivered, event: 'read' }), 400],
    ['a GET', svc.request('GET', `/callbacks/viber/vo/${TOKEN_O}`), 405],
  ];
  for (const [name, res, status] of cases) {
    const r = await res;
    assert.equal(r.status, status, `${name}: ${r.text}`);
    for (const s of SECRETS) assert.ok(!r.text.includes(s), `${name}: the answer holds no secret`);
  }
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(trail(await events(`${id}-0`)), ['viber:sending', 'viber:sent'], 'nothing was applied');
  const bad = await post(`/callbacks/viber/vo/${TOKEN_O}`, [delivered, { event: 'delivered', service_id: 1001 }]);
  assert.equal(bad.body.message, '[1].message_token: missing or not an id');

  // Authenticated, but naming an attempt the connection did not carry: another Viber connection's
  // (its tracking data), or an SMS. Answered (Viber would only send it again) and applied to nothing.
  const smsId = await send({ body: 'SMS', to: [{ phone_number: '420777101110' }] });
  await waitTrail(`${smsId}-0`, ['sms:sending', 'sms:sent', 'sms:delivered']);
  const [sms] = await attempts(`${smsId}-0`);
  const foreign = await post('/callbacks/viber/vs', { ...delivered, message_token: 3 }, { 'x-callback-token': TOKEN_S, 'x-callback-secret': SECRET });
  assert.equal(foreign.status, 200, foreign.text);
  const seenSms = await post(`/callbacks/viber/vo/${TOKEN_O}`, { event: 'seen', message_token: 4, service_id: 1001, phone_number: '420777101110', tracking_data: String(sms!.id), timestamp: Date.now() });
  assert.equal(seenSms.status, 200, seenSms.text);
  await waitFor(() => logLines.filter((l) => l.includes('naming attempts their connection did not carry')).length >= 2, 5000, 'both ignored, with a warning');
  assert.deepEqual(trail(await events(`${id}-0`)), ['viber:sending', 'viber:sent'], 'not moved by another connection');
  assert.deepEqual(trail(await events(`${smsId}-0`)), ['sms:sending', 'sms:sent', 'sms:delivered'], 'an SMS is never seen');

  // The right secret (token in the header this time) passes.
  const ok = await post('/callbacks/viber/vs', { ...delivered, message_token: 2, tracking_data: undefined }, { 'x-callback-token': TOKEN_S, 'x-callback-secret': SECRET });
  assert.equal(ok.status, 200, ok.text);
  const good = await post(`/callbacks/viber/vo/${TOKEN_O}`, delivered);
  assert.equal(good.status, 200, good.text);
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent', 'viber:delivered']);
});

test('a receipt parked for a token never registered is deleted by the sweep after RECEIPT_WAIT_HOURS, not before (it was kept forever)', async () => {
  // The callbacks test parked one for message_token 2 of connection vs (just now); one parked 73 hours ago:
  await svc.sql(`INSERT INTO carrier_refs (carrier, ref, attempt_id, state, result_info, reported_at, created_at)
                 VALUES ('viber.vs', 'parked-long-ago', NULL, 'delivered', '[0] Delivered', now() - interval '73 hours', now() - interval '73 hours')`);
  const parked = async () => (await svc.sql<{ ref: string }>(`SELECT ref FROM carrier_refs WHERE attempt_id IS NULL ORDER BY ref`)).map((r) => r.ref);
  assert.ok((await parked()).includes('2') && (await parked()).includes('parked-long-ago'));
  const registered = await svc.sql<{ n: number }>('SELECT count(*)::int AS n FROM carrier_refs WHERE attempt_id IS NOT NULL');
  const db = createPool(svc.databaseUrl, 1);
  try {
    assert.equal(await new ParkedReceiptExpiry(db, createLogger('silent'), 72).once(), 1);
  } finally {
    await db.end();
  }
  assert.ok(!(await parked()).includes('parked-long-ago'), 'the old one deleted');
  assert.ok((await parked()).includes('2'), 'a recent one kept: its id may still be registered');
  assert.deepEqual(await svc.sql('SELECT count(*)::int AS n FROM carrier_refs WHERE attempt_id IS NOT NULL'), registered, 'registered refs untouched');
});

test('admin: a connection\'s config and a sender\'s details are checked per dialect', async () => {
  const bad = async (path: string, body: unknown, message: RegExp) => {
    const res = await svc.admin('POST', path, body);
    assert.equal(res.status, 400, res.text);
    assert.match(res.body.message, message);
  };
  await bad('/carriers', { name: 'v1', kind: 'viber', config: { dialect: 'partner', callback_token: TOKEN_P } }, /^config\.credentials: is required for the partner dialect/);
  await bad('/carriers', { name: 'v1', kind: 'viber', config: { dialect: 'official', callback_token: 'guessable' } }, /^config\.callback_token: must be 24/);
  await bad('/carriers', { name: 'v1', kind: 'viber', config: { dialect: 'partner', base_url: 'https://u:ViberUrlPw@viber.example', credentials: 'k', callback_token: TOKEN_P } },
    /^config\.base_url: must not hold a user or password/);
  await bad('/carriers', { name: 'v1', kind: 'viber', config: { dialect: 'official', callback_token: TOKEN_O, allowed_sources: ['viber'] } },
    /^config\.allowed_sources: "viber" is not an address or CIDR range$/);
  await bad('/senders', { account_id: accountId, family: 'viber', sender: 'Shop2', connection: 'vo', details: { source_name: 'Shop2' } },
    /^details\.service_id: is required for the official dialect of connection "vo"$/);
  await bad('/senders', { account_id: accountId, family: 'viber', sender: 'Shop2', connection: 'vo', details: {} },
    /^details: must have service_id \(official dialect\) or source_name \(partner dialect\)$/);
  await bad('/senders', { account_id: accountId, family: 'viber', sender: 'Shop2', connection: 'vo', details: { service_id: '1001' } },
    /^details\.service_id: must be a number$/);
});

test('secrets are never in answers or logs', async () => {
  const list = await svc.admin('GET', '/carriers');
  const vp = list.body.carriers.find((c: { name: string }) => c.name === 'vp');
  assert.deepEqual(vp.config, { dialect: 'partner', base_url: sim.url, credentials: '***', callback_token: '***' });
  const vs = list.body.carriers.find((c: { name: string }) => c.name === 'vs');
  assert.equal(vs.config.shared_secret, '***');
  const senders = await svc.admin('GET', `/senders?account_id=${accountId}`);
  const replaced = await svc.admin('POST', '/carriers', { name: 'vs', kind: 'viber', config: { dialect: 'official', base_url: sim.url, callback_token: TOKEN_S, shared_secret: SECRET } });
  assert.equal(replaced.status, 200);
  for (const text of [list.text, senders.text, replaced.text]) {
    for (const s of SECRETS) assert.ok(!text.includes(s), 'an admin answer holds no secret');
  }
  const logged = logLines.join('');
  assert.ok(logged.includes('/callbacks/viber/vo/***'), 'callback requests are logged, token masked');
  assert.ok(logged.includes('Viber callback refused'));
  assert.ok(logged.includes('[13] SRVC_NOT_PERMITTED'), 'a configuration fault is warned about');
  assert.equal(logged.split('\n').filter((l) => l.includes('[13] SRVC_NOT_PERMITTED') && l.includes('"level":40')).length, 1, 'once');
  for (const s of SECRETS) assert.ok(!logged.includes(s), `no secret in ${logLines.length} log lines`);
});

test('an attempt whose dispatch run no longer holds its job is not sent: the call fails and the run that took the job over hands it again', async () => {
  const reports: StatusReport[] = [];
  const carrier = new ViberCarrier({
    connection: 'hold', dialect: 'partner', baseUrl: sim.url, apiKey: API_KEY, mps: 1,
    redis: svc.runtime.redis, redisPrefix: `${svc.prefix}:hold`, logger: createLogger('silent'),
    sink: {
      report: async (r: StatusReport[]) => {
        reports.push(...r);
        return true;
      },
    } as never,
  });
  carrier.setSenders([{ accountId: 1, sender: 'HoldP', credentials: {}, details: { source_name: 'HoldP' } }] as never);
  const attempt = (attemptId: number, to: string, hold: { held(): boolean }): ViberAttempt => ({
    attemptId, recipientPublicId: `h-${attemptId}`, accountId: 1, to, sender: 'HoldP', text: 'Hold', ttlMinutes: 10, channel: 'viber', hold,
  });
  try {
    // Held throughout: both go (one a second, the cap).
    const kept = { held: () => true };
    await carrier.send([attempt(9001, '420777109001', kept), attempt(9002, '420777109002', kept)]);
    assert.deepEqual([sim.messages({ to: '420777109001' }).length, sim.messages({ to: '420777109002' }).length], [1, 1]);
    // The hold lapses while the second waits for its token (the process was paused past the job's
    // lock): the first went, the second is not sent and the call fails.
    // The second's hold is read before its token (held) and after it (lapsed), whatever the timing.
    let reads = 0;
    const lapsing = { held: () => reads++ === 0 };
    const call = carrier.send([attempt(9003, '420777109003', kept), attempt(9004, '420777109004', lapsing)]);
    // Its rejection is awaited from the start: it may come before the poll below sees the first send.
    const refused = assert.rejects(call, /no longer holds its job: 1 Viber attempts not sent/);
    await waitFor(() => sim.messages({ to: '420777109003' }).length === 1, 5_000, 'the first send');
    await refused;
    assert.equal(sim.messages({ to: '420777109004' }).length, 0, 'not sent');
    assert.deepEqual(reports.filter((r) => r.attemptId === 9004), [], 'nothing reported of it');
    // Not held from the start: nothing goes, not even a token is taken.
    await assert.rejects(carrier.send([attempt(9005, '420777109005', { held: () => false })]), /1 Viber attempts not sent/);
    assert.equal(sim.messages({ to: '420777109005' }).length, 0);
  } finally {
    await carrier.close();
  }
});
