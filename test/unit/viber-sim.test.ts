/**
 * The Viber client of each dialect against the simulator over real HTTP on loopback, and the
 * simulator's callbacks received by a loopback server that authorizes and parses them the way
 * the connector's callback route will.
 */
import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { CallbackEvent, SendOutcome } from '../../shared/carriers/http-carrier.js';
import { authorizeCallback, type CallbackAuthResult } from '../../shared/carriers/viber/callback-auth.js';
import { ViberClient } from '../../shared/carriers/viber/client.js';
import { parseOfficialCallback } from '../../shared/carriers/viber/official.js';
import { parsePartnerCallback } from '../../shared/carriers/viber/partner.js';
import { viberButtonTitleProblem, type ViberSendInput } from '../../shared/carriers/viber/types.js';
import { startViberSimulator, type ViberSimulator } from '../../scripts/sim/viber/simulator.js';

const TOKEN = 'cbtok_6d1f0a9e2b7c4e58';
const SECRET = 'sim-shared-secret';
const API_KEY = 'dt-test-key';

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  raw: string;
  /** When it arrived (ms). */
  at: number;
  auth: CallbackAuthResult;
  events: CallbackEvent[] | { error: string };
}

interface Receiver {
  base: string;
  received: Received[];
  /** Answer status for the next POSTs (consumed in order), then 200. */
  failNext: number[];
  alwaysFail: boolean;
  close(): Promise<void>;
}

/** The connector's callback route in miniature: `/callbacks/viber/<connection>/<subpath>`, auth before parsing. */
async function startReceiver(): Promise<Receiver> {
  const state: Receiver = { base: '', received: [], failNext: [], alwaysFail: false, close: async () => undefined };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const url = new URL(req.url ?? '/', 'http://x');
      const m = /^\/callbacks\/viber\/([^/]+)(\/.*)?$/.exec(url.pathname);
      const connection = m?.[1] ?? '';
      const headers: Record<string, string | undefined> = {};
      for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v[0] : v;
      const auth = authorizeCallback(
        { subpath: m?.[2] ?? '', headers, remoteAddress: req.socket.remoteAddress ?? '' },
        { callbackToken: TOKEN, sharedSecret: SECRET, allowedSources: ['127.0.0.1', '::1'] },
      );
      const parse = connection === 'dt' ? parsePartnerCallback : parseOfficialCallback;
      const events = auth.ok ? parse(JSON.parse(raw)) : { error: 'unauthorized' };
      state.received.push({ path: url.pathname, headers: req.headers, raw, at: Date.now(), auth, events });
      const status = state.alwaysFail ? 500 : state.failNext.shift() ?? (auth.ok ? 200 : auth.status);
      res.writeHead(status).end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  state.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
  return state;
}

function eventsOf(receiver: Receiver, carrierRef: string): CallbackEvent[] {
  const out: CallbackEvent[] = [];
  for (const r of receiver.received) {
    if (Array.isArray(r.events)) out.push(...r.events.filter((e) => e.carrierRef === carrierRef));
  }
  return out;
}

/**
 * Statuses in the order of their event times: callback POSTs run in parallel, so their arrival
 * order is not guaranteed (nor is it with Viber); the times in the bodies are.
 */
function receiptStatuses(receiver: Receiver, carrierRef: string): string[] {
  return eventsOf(receiver, carrierRef).sort((a, b) => a.at - b.at).map((e) => (e.kind === 'receipt' ? e.status : 'inbound'));
}

let n = 0;
function msg(to: string, patch: Partial<ViberSendInput> = {}): ViberSendInput {
  n++;
  return { to, text: `Hello ${n}`, ttlSeconds: 600, promotional: false, ourRef: `ref-${n}`, sender: 1001, ...patch };
}

async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

let receiver: Receiver;
let sim: ViberSimulator;
let official: ViberClient;
let partner: ViberClient;

before(async () => {
  receiver = await startReceiver();
  sim = await startViberSimulator({
    callbackUrl: `${receiver.base}/callbacks/viber/vb`,
    callbackToken: TOKEN,
    sharedSecret: SECRET,
    apiKeys: [API_KEY],
    sources: ['Shop'],
    serviceIds: [1001, 1002],
    expireAfterMs: 150,
    callbackRetryDelayMs: 20,
  });
  official = new ViberClient({ dialect: 'official', baseUrl: sim.url, timeoutMs: 5000 });
  partner = new ViberClient({ dialect: 'partner', baseUrl: sim.url, apiKey: API_KEY, callbackUrl: `${receiver.base}/callbacks/viber/dt/${TOKEN}`, timeoutMs: 5000 });
});

after(async () => {
  await official.close();
  await partner.close();
  await sim.stop();
  await receiver.close();
});

beforeEach(async () => {
  await sim.idle(); // the last test's callbacks land before this one looks
  receiver.failNext = [];
  receiver.alwaysFail = false;
  sim.configure({ duplicateCallbacks: false, reorderCallbacks: false });
});

// ---------------------------------------------------------------------------------------------
describe('official dialect: client against the simulator', () => {
  const sync: Array<[string, SendOutcome]> = [
    ['02', { kind: 'retry', code: 1, info: '[1] SRVC_INTERNAL_FAILURE' }],
    ['04', { kind: 'unreachable', code: 9, info: '[9] SRVC_NOT_VIBER_USER' }],
    ['05', { kind: 'unreachable', code: 8, info: '[8] SRVC_USER_BLOCKED' }],
    ['06', { kind: 'unreachable', code: 10, info: '[10] SRVC_NO_SUITABLE_DEVICE' }],
    ['07', { kind: 'unreachable', code: 21, info: '[21] SRVC_WAIT_FOR_USER_RESPONSE' }],
    ['09', { kind: 'failed', code: 13, info: '[13] SRVC_NOT_PERMITTED', config: true }],
  ];
  for (const [suffix, expected] of sync) {
    it(`suffix ${suffix} → ${expected.kind} ${'info' in expected ? expected.info : ''}`, async () => {
      assert.deepEqual(await official.send(msg(`3805011100${suffix}`)), expected);
      assert.equal(sim.messages({ to: `3805011100${suffix}` })[0]?.result, (expected as { code: number }).code);
    });
  }

  it('other suffixes: accepted, then delivered and seen, authorized and parsed with our reference', async () => {
    const input = msg('380501110000');
    const out = await official.send(input);
    assert.equal(out.kind, 'accepted');
    const ref = (out as { carrierRef: string }).carrierRef;
    assert.match(ref, /^\d+$/);
    await sim.idle();
    const events = eventsOf(receiver, ref);
    assert.deepEqual(events.map((e) => [e.kind, e.kind === 'receipt' ? e.status : '', e.kind === 'receipt' ? e.ourRef : '']), [
      ['receipt', 'delivered', input.ourRef], ['receipt', 'seen', input.ourRef],
    ]);
    for (const r of receiver.received) {
      assert.deepEqual(r.auth, { ok: true });
      assert.equal(r.path, `/callbacks/viber/vb/${TOKEN}`);
      assert.equal(r.headers['x-callback-secret'], SECRET);
      assert.equal(r.headers['content-type'], 'application/json');
    }
    const rec = sim.messages({ to: '380501110000' })[0];
    assert.equal(rec?.id, ref);
    assert.equal(rec?.type, 206);
    assert.equal(rec?.label, 'transaction');
    assert.equal(rec?.trackingData, input.ourRef);
  });

  it('01: accepted, then expired after the short expiry', async () => {
    const sent = Date.now();
    const out = await official.send(msg('380501110001'));
    assert.equal(out.kind, 'accepted');
    const ref = (out as { carrierRef: string }).carrierRef;
    await sim.idle();
    assert.deepEqual(receiptStatuses(receiver, ref), ['expired']);
    const post = receiver.received.find((r) => r.raw.includes(`"message_token":${ref}`));
    assert.ok(post && post.at - sent >= 150, `expired after ${post ? post.at - sent : '?'} ms`);
  });

  it('03: accepted, no callbacks', async () => {
    const out = await official.send(msg('380501110003'));
    assert.equal(out.kind, 'accepted');
    // Callbacks are counted as pending from the moment they are scheduled: idle() covers them.
    await sim.idle();
    assert.deepEqual(receiptStatuses(receiver, (out as { carrierRef: string }).carrierRef), []);
  });

  it('08: delivered on two devices, then seen; 10: seen without delivered', async () => {
    const two = await official.send(msg('380501110008'));
    const seenOnly = await official.send(msg('380501110010'));
    await sim.idle();
    const twoRef = (two as { carrierRef: string }).carrierRef;
    assert.deepEqual(receiptStatuses(receiver, twoRef), ['delivered', 'delivered', 'seen']);
    const devices = receiver.received.flatMap((r) => JSON.parse(r.raw) as Array<{ message_token?: number; device?: string; timestamp: number }>)
      .filter((e) => String(e.message_token) === twoRef).sort((a, b) => a.timestamp - b.timestamp).map((e) => e.device);
    assert.deepEqual(devices, ['phone', 'desktop', 'phone']);
    assert.deepEqual(receiptStatuses(receiver, (seenOnly as { carrierRef: string }).carrierRef), ['seen']);
  });

  it('a repeated seq answers 12 SRVC_ALREADY_SENT with the first token: accepted', async () => {
    const input = msg('380501110011', { seq: 987_654_321 });
    const first = await official.send(input);
    const again = await official.send(input);
    assert.equal(first.kind, 'accepted');
    assert.deepEqual(again, first);
    assert.equal(sim.messages({ to: '380501110011' }).length, 1);
  });

  it('a button goes as type 209 with tracking data; ttl is clamped into 30..1,209,600', async () => {
    const withButton = msg('380501110012', { button: { title: 'Track order', url: 'https://example.com/t/1' }, ttlSeconds: 5 });
    assert.equal((await official.send(withButton)).kind, 'accepted');
    const rec = sim.messages({ to: '380501110012' })[0];
    assert.deepEqual(
      [rec?.type, rec?.label, rec?.button, rec?.trackingData, rec?.ttl],
      [209, 'promotion', { caption: 'Track order', action: 'https://example.com/t/1' }, withButton.ourRef, 30],
    );
    assert.equal((await official.send(msg('380501110013', { ttlSeconds: 10_000_000, promotional: true }))).kind, 'accepted');
    const promo = sim.messages({ to: '380501110013' })[0];
    assert.deepEqual([promo?.type, promo?.label, promo?.ttl], [225, 'promotion', 1_209_600]);
  });

  it('the button-title check agrees with Viber: what it passes is taken, what it refuses is status 3', async () => {
    const good = 'x'.repeat(30);
    const long = 'x'.repeat(31);
    assert.equal(viberButtonTitleProblem(good), null);
    assert.notEqual(viberButtonTitleProblem(long), null);
    assert.equal((await official.send(msg('380501110014', { button: { title: good, url: 'https://example.com' } }))).kind, 'accepted');
    assert.deepEqual(await official.send(msg('380501110015', { button: { title: long, url: 'https://example.com' } })),
      { kind: 'failed', code: 3, info: '[3] SRVC_BAD_DATA', config: false });
  });

  it('an unknown service id is a configuration failure; a sender that is no service id too', async () => {
    assert.deepEqual(await official.send(msg('380501110016', { sender: 4242 })), { kind: 'failed', code: 2, info: '[2] SRVC_BAD_SERVICE_ID', config: true });
    const bad = await official.send(msg('380501110016', { sender: 'Shop' }));
    assert.equal(bad.kind, 'failed');
    assert.equal((bad as { config: boolean }).config, true);
    // Text alone: Viber gives no code for it, and `[0]` reads as success.
    assert.match((bad as { info: string }).info, /^official dialect: sender must be a service id/);
  });

  const base = { service_id: 1001, dest: '380501110017', seq: 1, type: 206, label: 'transaction', ttl: 600, message: { '#txt': 'hi', '#tracking_data': 'r' } };
  const checks: Array<[string, unknown, number]> = [
    ['valid', base, 0],
    ['not JSON', '{"service_id":', 3],
    ['no seq', { ...base, seq: undefined }, 6],
    ['unknown service', { ...base, service_id: 9 }, 2],
    ['dest with +', { ...base, dest: '+380501110017' }, 27],
    ['dest letters', { ...base, dest: '38050111001a' }, 27],
    ['bad label', { ...base, label: 'marketing' }, 18],
    ['ttl below range', { ...base, ttl: 29 }, 20],
    ['ttl above range', { ...base, ttl: 1_209_601 }, 20],
    ['ttl not integer', { ...base, ttl: 60.5 }, 20],
    ['unknown type', { ...base, type: 999 }, 5],
    ['text over 1000', { ...base, message: { '#txt': 'x'.repeat(1001), '#tracking_data': 'r' } }, 3],
    ['text 1000', { ...base, seq: 2, message: { '#txt': 'x'.repeat(1000), '#tracking_data': 'r' } }, 0],
    ['no tracking data on 206', { ...base, message: { '#txt': 'hi' } }, 6],
    ['tracking data on 109', { ...base, type: 109, message: { '#txt': 'hi', '#caption': 'Go', '#action': 'https://e.x', '#tracking_data': 'r' } }, 6],
    ['209 without action', { ...base, type: 209, message: { '#txt': 'hi', '#caption': 'Go', '#tracking_data': 'r' } }, 6],
    ['no message', { ...base, message: undefined }, 6],
  ];
  for (const [name, body, status] of checks) {
    it(`checks: ${name} → HTTP 200, status ${status}`, async () => {
      const res = await postJson(`${sim.url}/vibersrvc/1/send_message`, body);
      assert.equal(res.status, 200);
      assert.equal((res.body as { status: number }).status, status);
      if (status === 0) assert.equal(typeof (res.body as { message_token: unknown }).message_token, 'number');
    });
  }

  it('a caller outside the allowlist gets status 11 (configuration)', async () => {
    const strict = await startViberSimulator({ allowedCallers: ['10.0.0.0/8'] });
    const client = new ViberClient({ dialect: 'official', baseUrl: strict.url });
    try {
      assert.deepEqual(await client.send(msg('380501110018')), { kind: 'failed', code: 11, info: '[11] SRVC_UNAUTHORIZED_IP', config: true });
    } finally {
      await client.close();
      await strict.stop();
    }
  });

  it('no answer (connection refused) is retryable', async () => {
    const gone = await startViberSimulator();
    const url = gone.url;
    await gone.stop();
    const client = new ViberClient({ dialect: 'official', baseUrl: url, timeoutMs: 2000 });
    try {
      const out = await client.send(msg('380501110019'));
      assert.equal(out.kind, 'retry');
      assert.match((out as { info: string }).info, /^ECONNREFUSED/);
    } finally {
      await client.close();
    }
  });

  it('a reply carries our tracking data; subscribe events make no event', async () => {
    const before = receiver.received.length;
    const { id } = sim.inject({ service_id: 1001, from: '380501110020', text: 'Yes please', tracking_data: 'ref-original' });
    const viaHttp = await postJson(`${sim.url}/_sim/inbound`, { service_id: 1002, from: '380501110021', text: 'Stop' });
    assert.equal(viaHttp.status, 200);
    const sub = await postJson(`${sim.url}/_sim/subscription`, { service_id: 1001, from: '380501110020', subscribed: false });
    assert.equal(sub.status, 200);
    await sim.idle();
    const news = receiver.received.slice(before);
    assert.ok(news.every((r) => r.auth.ok));
    const events = news.flatMap((r) => (Array.isArray(r.events) ? r.events : []));
    assert.deepEqual(events.map((e) => (e.kind === 'inbound' ? [e.from, e.to, e.text, e.replyToOurRef ?? null, e.carrierRef] : e.kind)), [
      ['380501110020', '1001', 'Yes please', 'ref-original', id],
      ['380501110021', '1002', 'Stop', null, (viaHttp.body as { id: string }).id],
    ]);
    assert.ok(news.some((r) => r.raw.includes('"unsubscribed"')));
    const badInbound = await postJson(`${sim.url}/_sim/inbound`, { service_id: 7, from: '380501110020', text: 'x' });
    assert.deepEqual([badInbound.status, badInbound.body], [400, { error: 'service_id: unknown service 7' }]);
  });

  it('callbacks due together share POSTs (JSON arrays); duplicates and reordering on request', async () => {
    const s0 = sim.stats().callbacks;
    const outs = await Promise.all(Array.from({ length: 20 }, (_, i) => official.send(msg(`3805011200${String(i + 20).padStart(2, '0')}`))));
    await sim.idle();
    const s1 = sim.stats().callbacks;
    assert.equal(s1.events - s0.events, 40);
    assert.ok(s1.posts - s0.posts < 40, `posts ${s1.posts - s0.posts}`);
    for (const o of outs) assert.deepEqual(receiptStatuses(receiver, (o as { carrierRef: string }).carrierRef), ['delivered', 'seen']);

    sim.configure({ duplicateCallbacks: true, reorderCallbacks: true });
    const dup = await official.send(msg('380501120050'));
    await sim.idle();
    assert.deepEqual(receiptStatuses(receiver, (dup as { carrierRef: string }).carrierRef), ['seen', 'seen', 'delivered', 'delivered']);
  });

  it('a callback answered non-2xx is retried a bounded number of times', async () => {
    receiver.failNext = [500, 503];
    const s0 = sim.stats().callbacks;
    const out = await official.send(msg('380501130010'));
    await sim.idle();
    assert.deepEqual(receiptStatuses(receiver, (out as { carrierRef: string }).carrierRef), ['seen', 'seen', 'seen']);
    const s1 = sim.stats().callbacks;
    assert.equal(s1.retries - s0.retries, 2);
    assert.equal(s1.failures - s0.failures, 0);

    receiver.alwaysFail = true;
    await official.send(msg('380501130110'));
    await sim.idle();
    const s2 = sim.stats().callbacks;
    assert.equal(s2.retries - s1.retries, 3);
    assert.equal(s2.failures - s1.failures, 1);
    const tries = sim.callbacks(10).filter((c) => c.body.includes('380501130110')).map((c) => [c.status, c.tries]);
    assert.deepEqual(tries, [[500, 4], [500, 3], [500, 2], [500, 1]]);
  });
});

// ---------------------------------------------------------------------------------------------
describe('partner dialect: client against the simulator', () => {
  const sync: Array<[string, SendOutcome]> = [
    ['02', { kind: 'retry', code: 500, info: '[500] Internal server error' }],
    ['07', { kind: 'retry', code: 429, info: '[429] Too Many Requests' }],
    ['09', { kind: 'failed', code: 402, info: '[402] Topup balance is required', config: true }],
  ];
  for (const [suffix, expected] of sync) {
    it(`suffix ${suffix} → ${expected.kind} ${'info' in expected ? expected.info : ''}`, async () => {
      assert.deepEqual(await partner.send(msg(`3805021100${suffix}`, { sender: 'Shop' })), expected);
    });
  }

  const async: Array<[string, string[]]> = [
    ['00', ['delivered']],
    ['01', ['undelivered']],
    ['03', []],
    ['04', ['undelivered']],
    ['05', ['failed']],
    ['06', ['failed']],
    ['08', ['delivered', 'delivered']],
  ];
  for (const [suffix, statuses] of async) {
    it(`suffix ${suffix} → accepted, then ${statuses.join(', ') || 'no callbacks'}`, async () => {
      const out = await partner.send(msg(`3805021100${suffix}`, { sender: 'Shop' }));
      assert.equal(out.kind, 'accepted');
      const ref = (out as { carrierRef: string }).carrierRef;
      await sim.idle();
      assert.deepEqual(receiptStatuses(receiver, ref), statuses);
      for (const r of receiver.received.filter((x) => x.path.startsWith('/callbacks/viber/dt/'))) assert.deepEqual(r.auth, { ok: true });
    });
  }

  it('statuses are posted one object per POST to the callback_url sent with the message, and can be polled', async () => {
    const out = await partner.send(msg('380502110030', { sender: 'Shop' }));
    const ref = (out as { carrierRef: string }).carrierRef;
    await sim.idle();
    const posts = receiver.received.filter((r) => r.raw.includes(`"message_id":${ref}`));
    assert.equal(posts.length, 1);
    assert.equal(posts[0]?.path, `/callbacks/viber/dt/${TOKEN}`);
    assert.deepEqual(Object.keys(JSON.parse(posts[0]!.raw) as object), ['message_id', 'status', 'timestamp']);
    const polled = await partner.pollStatus(ref);
    assert.equal(polled?.kind, 'receipt');
    assert.equal(polled?.kind === 'receipt' ? polled.status : null, 'delivered');
    assert.equal(await partner.pollStatus('999999999'), null);
  });

  it('without any callback URL the status still changes on time, and can be polled', async () => {
    const quiet = await startViberSimulator({ dialects: ['partner'], apiKeys: [API_KEY], expireAfterMs: 1000 });
    const client = new ViberClient({ dialect: 'partner', baseUrl: quiet.url, apiKey: API_KEY });
    const status = async (ref: string) => {
      const e = await client.pollStatus(ref);
      return e?.kind === 'receipt' ? e.status : null;
    };
    try {
      const okRef = (await client.send(msg('380502110040', { sender: 'Shop' })) as { carrierRef: string }).carrierRef;
      const expRef = (await client.send(msg('380502110001', { sender: 'Shop' })) as { carrierRef: string }).carrierRef;
      assert.equal(await status(expRef), 'sent');
      await quiet.idle();
      assert.equal(await status(okRef), 'delivered');
      assert.equal(await status(expRef), 'undelivered');
      assert.deepEqual([quiet.stats().callbacks.dropped, quiet.stats().callbacks.posts], [2, 0]);
    } finally {
      await client.close();
      await quiet.stop();
    }
  });

  it('the request carries the partner fields; validity_period is clamped into 40..21,600', async () => {
    await partner.send(msg('380502110031', { sender: 'Shop', ttlSeconds: 5, button: { title: 'Open', url: 'https://example.com/o' } }));
    await partner.send(msg('380502110032', { sender: 'Shop', ttlSeconds: 86_400, promotional: true }));
    const [a] = sim.messages({ to: '380502110031' });
    const [b] = sim.messages({ to: '380502110032' });
    assert.deepEqual([a?.type, a?.label, a?.ttl, a?.button, a?.callbackUrl], [208, 'transaction', 40, { caption: 'Open', action: 'https://example.com/o' }, `${receiver.base}/callbacks/viber/dt/${TOKEN}`]);
    assert.deepEqual([b?.type, b?.label, b?.ttl], [206, 'promotion', 21_600]);
  });

  it('a wrong API key is 401 (configuration); an unknown source 400 naming it; a long caption 400', async () => {
    const wrong = new ViberClient({ dialect: 'partner', baseUrl: sim.url, apiKey: 'nope' });
    try {
      assert.deepEqual(await wrong.send(msg('380502110033', { sender: 'Shop' })), { kind: 'failed', code: 401, info: '[401] Unauthorized', config: true });
    } finally {
      await wrong.close();
    }
    assert.deepEqual(await partner.send(msg('380502110034', { sender: 'Other' })),
      { kind: 'failed', code: 400, info: '[400] Invalid Parameter: source_addr', config: false });
    assert.deepEqual(await partner.send(msg('380502110035', { sender: 'Shop', button: { title: 'x'.repeat(31), url: 'https://e.x' } })),
      { kind: 'failed', code: 400, info: '[400] Invalid Parameter: button_caption', config: false });
    const raw = await postJson(`${sim.url}/v1/api/send-viber`, { source_addr: 'Shop', destination_addr: '380502110036', message_type: 206, text: 'hi', source_type: 2, validity_period: 39 },
      { authorization: `Basic ${Buffer.from(API_KEY).toString('base64')}` });
    assert.deepEqual(raw, { status: 400, body: { name: 'Invalid Parameter: validity_period', message: 'Empty parameter or parameter validation error', code: 1, status: 400 } });
    const noAuth = await postJson(`${sim.url}/v1/api/send-viber`, {});
    assert.deepEqual(noAuth, { status: 401, body: { name: 'Unauthorized', status: 401 } });
  });

  it('a reply goes to the source\'s callback URL and names our message', async () => {
    const out = await partner.send(msg('380502110037', { sender: 'Shop' }));
    const ref = (out as { carrierRef: string }).carrierRef;
    const { id } = sim.inject({ source_addr: 'Shop', from: '380502110037', text: 'Thanks', reply_to: ref });
    await sim.idle();
    const inbound = eventsOf(receiver, id);
    assert.deepEqual(inbound, [{
      kind: 'inbound', from: '380502110037', to: 'Shop', text: 'Thanks', carrierRef: id, replyToCarrierRef: ref, at: (inbound[0] as { at: number }).at,
    }]);
  });
});

// ---------------------------------------------------------------------------------------------
describe('simulator control endpoints', () => {
  it('GET /_sim/messages?to= is newest first; POST /_sim/reset forgets', async () => {
    const to = '380503110000';
    const first = msg(to);
    const second = msg(to, { promotional: true });
    await official.send(first);
    await official.send(second);
    const res = await fetch(`${sim.url}/_sim/messages?to=${to}`);
    const { messages } = (await res.json()) as { messages: Array<{ text: string; to: string }> };
    assert.deepEqual(messages.map((m) => m.text), [second.text, first.text]);
    const stats = (await (await fetch(`${sim.url}/_sim/stats`)).json()) as { official: { requests: number } };
    assert.ok(stats.official.requests > 0);
    assert.equal((await fetch(`${sim.url}/_sim/messages?limit=0`)).status, 400);
    assert.equal((await postJson(`${sim.url}/_sim/config`, { callbackBatch: 0 })).status, 400);

    await sim.idle();
    assert.deepEqual((await postJson(`${sim.url}/_sim/reset`, {})).body, { ok: true });
    assert.deepEqual(sim.messages({ to }), []);
    assert.equal(sim.stats().official.requests, 0);
  });
});

describe('simulator CLI', () => {
  const run = (args: string[]) => spawn(process.execPath, ['--import', 'tsx', 'scripts/sim/viber/cli.ts', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });

  it('--help prints usage; a bad option exits 2', async () => {
    const help = run(['--help']);
    let out = '';
    help.stdout.on('data', (c: Buffer) => (out += c.toString()));
    const [code] = (await once(help, 'exit')) as [number];
    assert.equal(code, 0);
    assert.match(out, /--callback-url URL/);
    const bad = run(['--dialect', 'smoke']);
    assert.equal(((await once(bad, 'exit')) as [number])[0], 2);
  });

  it('listens, answers, and stops on SIGTERM', async () => {
    const child = run(['--port', '0', '--dialect', 'partner', '--api-key', 'k1']);
    try {
      const line = await new Promise<string>((resolve, reject) => {
        createInterface({ input: child.stdout }).once('line', resolve);
        child.once('exit', (c) => reject(new Error(`exited ${c}`)));
      });
      const ready = JSON.parse(line) as { event: string; url: string; dialects: string[] };
      assert.deepEqual([ready.event, ready.dialects], ['listening', ['partner']]);
      const client = new ViberClient({ dialect: 'partner', baseUrl: ready.url, apiKey: 'k1' });
      try {
        assert.equal((await client.send(msg('380504110000', { sender: 'Shop' }))).kind, 'accepted');
      } finally {
        await client.close();
      }
      const official404 = await postJson(`${ready.url}/vibersrvc/1/send_message`, {});
      assert.equal(official404.status, 404);
    } finally {
      child.kill('SIGTERM');
      const [code] = (await once(child, 'exit')) as [number | null];
      assert.equal(code, 0);
    }
  });
});
