/**
 * The dispatch engine end to end: HTTP API → Postgres → BullMQ dispatch → sandbox carrier →
 * status pool → outbox events, with real Postgres and Redis. Timers are exercised for real: a
 * schedule's delayed job promoted, a ttl timer made due now, or dispatch given an explicit clock.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { recipientEvents, sendMessage, trailOf, waitForTrail } from '../support/trails.js';
import { messageJobId } from '../../shared/engine/dispatch-jobs.js';

let svc: TestService;
let key: string;
let accountId: number;

before(async () => {
  svc = await startTestService({ env: { SANDBOX_SLOW_DELIVERY_MS: '400' } });
  ({ apiKey: key, accountId } = await svc.createAccount({ credit_czk: 10000, credit_eur: 1000 }));
});
after(async () => {
  await svc.stop();
});

type Ev = { message_id: string; gateway: string; result: string; result_info: string; sms?: Record<string, unknown>; viber?: Record<string, unknown>; whatsapp_template?: Record<string, unknown>; payload: unknown };

const send = (message: Record<string, unknown>, apiKey = key): Promise<string> => sendMessage(svc, apiKey, message);
const events = (publicId: string): Promise<Ev[]> => recipientEvents<Ev>(svc, publicId);
const trail = trailOf;
const waitTrail = (publicId: string, expected: string[], timeoutMs?: number): Promise<Ev[]> => waitForTrail<Ev>(svc, publicId, expected, timeoutMs);

const SMS_OUTCOMES: Array<[string, string[]]> = [
  ['420777000100', ['sms:sending', 'sms:sent', 'sms:delivered']],
  ['420777000101', ['sms:sending', 'sms:sent', 'sms:undelivered']],
  ['420777000102', ['sms:sending', 'sms:failed']],
  ['420777000103', ['sms:sending', 'sms:sent']],
  ['420777000104', ['sms:sending', 'sms:sent', 'sms:delivered']],
  ['420777000105', ['sms:sending', 'sms:rejected']],
];

test('each sandbox outcome over SMS', async () => {
  const id = await send({ body: 'Hello', to: SMS_OUTCOMES.map(([n]) => ({ phone_number: n })) });
  for (const [i, [, expected]] of SMS_OUTCOMES.entries()) {
    await waitTrail(`${id}-${i}`, expected);
  }
  // 03 gives no receipt: nothing more arrives.
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(trail(await events(`${id}-3`)), ['sms:sending', 'sms:sent']);
});

test('each sandbox outcome over Viber and WhatsApp (single-step flows)', async () => {
  const table: Array<[string, string[]]> = [
    ['420777000200', ['sending', 'sent', 'delivered', 'seen']],
    ['420777000201', ['sending', 'sent', 'undelivered']],
    ['420777000202', ['sending', 'failed']],
    ['420777000204', ['sending', 'undelivered']],
    ['420777000205', ['sending', 'rejected']],
  ];
  for (const channel of ['viber', 'whatsapp_text', 'whatsapp_template'] as const) {
    const step = channel === 'whatsapp_template' ? { template_name: 'otp', sender: '1234' } : { sender: 'Shop' };
    const id = await send({ body: 'Hi', to: table.map(([n]) => ({ phone_number: n })), flow: [{ [channel]: step }] });
    for (const [i, [, expected]] of table.entries()) {
      await waitTrail(`${id}-${i}`, expected.map((s) => `${channel}:${s}`));
    }
    const [first] = await events(`${id}-0`);
    const channelKey = channel === 'whatsapp_text' ? 'whatsapp_body' : channel;
    assert.ok(first && channelKey in first, `event carries the ${channelKey} object`);
  }
});

/** A recipient's state as the APIs see it: its current step's attempt, and the channels of every step taken. */
const RECIPIENT_STATE = `SELECT (SELECT string_agg(a.channel, ',' ORDER BY a.step) FROM attempts a WHERE a.recipient_id = rs.id) AS flow_taken,
                               rs.state, rs.step
                          FROM recipient_states rs WHERE rs.public_id = $1`;

test('viber → sms fallback for a number that is not a Viber user', async () => {
  const id = await send({ body: 'Fallback', to: [{ phone_number: '420777000404' }], flow: [{ viber: { sender: 'Shop' } }, { sms: { sender: 'Shop', gateway: 'direct' } }] });
  const evs = await waitTrail(`${id}-0`, ['viber:sending', 'viber:undelivered', 'sms:sending', 'sms:sent', 'sms:delivered']);
  assert.match(evs[1]!.result_info, /Not a Viber user/);
  // Every event of the second step names that step's SMS gateway (the status path reads it from the flow).
  assert.deepEqual(evs.slice(2).map((e) => e.sms?.gateway), ['direct', 'direct', 'direct']);
  assert.equal(evs[1]!.sms, undefined);
  const [recipient] = await svc.sql<{ flow_taken: string; state: string; step: number }>(RECIPIENT_STATE, [`${id}-0`]);
  assert.deepEqual(recipient, { flow_taken: 'viber,sms', state: 'delivered', step: 1 });
});

test('sms → viber: an SMS the carrier took has succeeded (D3); a later undelivered receipt ends it, sends nothing else and charges once', async () => {
  const { apiKey, accountId: acc } = await svc.createAccount({ credit_czk: 10 });
  const id = await send({ body: 'SMS first', to: [{ phone_number: '420777000701' }], flow: [{ sms: { sender: 'Shop' } }, { viber: { sender: 'Shop' } }] }, apiKey);
  await waitTrail(`${id}-0`, ['sms:sending', 'sms:sent', 'sms:undelivered']);
  // Refused before the carrier took it, the same flow moves on (sandbox 02: sending, failed; on Viber too).
  const refused = await send({ body: 'SMS first', to: [{ phone_number: '420777000702' }], flow: [{ sms: { sender: 'Shop' } }, { viber: { sender: 'Shop' } }] }, apiKey);
  await waitTrail(`${refused}-0`, ['sms:sending', 'sms:failed', 'viber:sending', 'viber:failed']);
  await svc.settle();
  assert.deepEqual(trail(await events(`${id}-0`)), ['sms:sending', 'sms:sent', 'sms:undelivered'], 'no viber step after the SMS succeeded');
  const [recipient] = await svc.sql<{ flow_taken: string; state: string; step: number }>(RECIPIENT_STATE, [`${id}-0`]);
  assert.deepEqual(recipient, { flow_taken: 'sms', state: 'undelivered', step: 0 });
  // The undelivered SMS (0.9) stays charged, once; both failed attempts of the other are refunded.
  const [row] = await svc.sql<{ n: number }>('SELECT count(*)::int AS n FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1', [`${id}-0`]);
  assert.equal(row!.n, 1, 'one attempt');
  const [credit] = await svc.sql<{ credit_czk: number }>('SELECT credit_czk FROM accounts WHERE id = $1', [acc]);
  assert.equal(credit!.credit_czk, 9.1);
});

test('whatsapp_template → sms on undelivered', async () => {
  const id = await send({ body: 'Order shipped', to: [{ phone_number: '420777000501' }], flow: [{ whatsapp_template: { template_name: 'shipped', sender: '111' } }, { sms: {} }] });
  await waitTrail(`${id}-0`, ['whatsapp_template:sending', 'whatsapp_template:sent', 'whatsapp_template:undelivered', 'sms:sending', 'sms:sent', 'sms:undelivered']);
});

test('ttl expiry moves to the next step; a late receipt of the abandoned step is reported but starts nothing', async () => {
  const id = await send({ body: 'TTL', to: [{ phone_number: '420777000603' }], flow: [{ viber: { sender: 'Shop', ttl: 5 } }, { sms: {} }] });
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent']);
  const [attempt] = await svc.sql<{ id: number }>(`SELECT a.id FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1 AND a.step = 0`, [`${id}-0`]);
  const timers = svc.runtime.engine.ttlTimers;
  const deadline = await waitFor(() => timers.deadlineOf(attempt!.id), 5000, 'the ttl timer');
  const left = deadline - Date.now();
  assert.ok(left > 5 * 60_000 - 10_000 && left <= 5 * 60_000, `ttl 5 minutes (${left} ms left)`);
  await timers.set([attempt!.id], Date.now()); // fake time: the timer is due now and fires within a second
  const evs = await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent', 'viber:undelivered', 'sms:sending', 'sms:sent']);
  assert.equal(evs[2]!.result_info, '[1] TTL expired');
  // The Viber receipt arrives late: reported with gateway viber; the recipient stays on its sms step.
  await svc.runtime.engine.sink.report([{ attemptId: attempt!.id, state: 'delivered', resultInfo: '[0] Delivered', at: Date.now() }]);
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent', 'viber:undelivered', 'sms:sending', 'sms:sent', 'viber:delivered']);
  await new Promise((r) => setTimeout(r, 300));
  const [recipient] = await svc.sql<{ step: number; state: string; flow_taken: string }>(RECIPIENT_STATE, [`${id}-0`]);
  assert.deepEqual(recipient, { step: 1, state: 'sent', flow_taken: 'viber,sms' });
  assert.equal((await svc.sql('SELECT 1 FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1', [`${id}-0`])).length, 2, 'no third attempt');
});

test('a ttl that fires after its step succeeded changes nothing', async () => {
  const id = await send({ body: 'ok', to: [{ phone_number: '420777000700' }], flow: [{ viber: { sender: 'Shop' } }, { sms: {} }] });
  await waitTrail(`${id}-0`, ['viber:sending', 'viber:sent', 'viber:delivered', 'viber:seen']);
  const [viber] = await svc.sql<{ id: number }>(`SELECT a.id FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1 AND a.step = 0`, [`${id}-0`]);
  // Delivered: its timer went with the status batch that recorded it (Redis holds only waiting attempts' timers).
  await waitFor(async () => (await svc.runtime.engine.ttlTimers.deadlineOf(viber!.id)) === null, 5000, 'the settled attempt\'s timer removed');
  // A timer that fires anyway (set again by the recovery sweep, or left by a Redis failure): nothing changes.
  await svc.runtime.engine.expire([viber!.id]);
  await new Promise((r) => setTimeout(r, 400));
  assert.deepEqual(trail(await events(`${id}-0`)), ['viber:sending', 'viber:sent', 'viber:delivered', 'viber:seen']);
  await svc.runtime.engine.sink.report([{ attemptId: viber!.id, state: 'failed', resultInfo: '[3] Failed', at: Date.now() }]);
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(trail(await events(`${id}-0`)), ['viber:sending', 'viber:sent', 'viber:delivered', 'viber:seen'], 'a final attempt ignores later reports');
});

test('duplicate carrier reports change nothing twice', async () => {
  const id = await send({ body: 'Dup', to: [{ phone_number: '420777000803' }] });
  await waitTrail(`${id}-0`, ['sms:sending', 'sms:sent']);
  const [a] = await svc.sql<{ id: number }>(`SELECT a.id FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1`, [`${id}-0`]);
  const report = { attemptId: a!.id, state: 'delivered' as const, resultInfo: '[0] Delivered', at: Date.now() };
  await svc.runtime.engine.sink.report([report, report]);
  await svc.runtime.engine.sink.report([report]);
  await waitTrail(`${id}-0`, ['sms:sending', 'sms:sent', 'sms:delivered']);
  await new Promise((r) => setTimeout(r, 200));
  assert.deepEqual(trail(await events(`${id}-0`)), ['sms:sending', 'sms:sent', 'sms:delivered']);
});

test('a scheduled message is not sent before its time, and is when its time comes', async () => {
  const at = new Date(Date.now() + 3600_000);
  const id = await send({ body: 'Later', to: [{ phone_number: '420777000900' }], datetime: at.toISOString() });
  const job = await svc.runtime.queues.dispatchQueue('sms', 'promotional').getJob(messageJobId(id, 0));
  assert.ok(job);
  assert.ok(Math.abs(job.timestamp + (job.opts.delay ?? 0) - at.getTime()) < 2000, 'delayed until the scheduled time');
  assert.equal(await job.getState(), 'delayed');
  // Released early (e.g. promoted by an operator): the engine checks again and does not send.
  const early = await svc.runtime.engine.dispatch(job.data);
  assert.ok(early.delayUntil && Math.abs(early.delayUntil.getTime() - at.getTime()) < 1000);
  assert.equal((await events(`${id}-0`)).length, 0);
  // At its time it goes.
  const due = await svc.runtime.engine.dispatch(job.data, new Date(at.getTime() + 1000));
  assert.equal(due.handed, 1);
  await waitTrail(`${id}-0`, ['sms:sending', 'sms:sent', 'sms:delivered']);
});

test('a message outside its delivery window waits for the next window start in its zone', async () => {
  const now = new Date();
  // A window that closed an hour ago and opens in 23 hours (wraps past midnight when needed).
  const hh = (d: Date) => d.toISOString().slice(11, 13);
  const start = `${hh(new Date(now.getTime() - 2 * 3600_000))}:00`;
  const end = `${hh(new Date(now.getTime() - 3600_000))}:00`;
  const id = await send({ body: 'Window', to: [{ phone_number: '420777001000' }], delivery_time: { start, end, tz: 'UTC' } });
  const job = await svc.runtime.queues.dispatchQueue('sms', 'promotional').getJob(messageJobId(id, 0));
  assert.ok(job);
  const runAt = job.timestamp + (job.opts.delay ?? 0);
  assert.equal(new Date(runAt).toISOString().slice(11, 16), start);
  assert.ok(runAt > now.getTime() + 20 * 3600_000);
  const [r] = await svc.sql<{ due_at: Date }>('SELECT due_at FROM recipients WHERE public_id = $1', [`${id}-0`]);
  assert.ok(Math.abs(r!.due_at.getTime() - runAt) < 1000, 'due_at records the same instant');
});

test('a window in Europe/Prague across the autumn DST change opens at the right instant', async () => {
  // Saturday 2026-10-24 22:00Z is inside no Sunday window; the Sunday 02:30 window start happens twice
  // that night (fold): the first occurrence is 00:30Z.
  const message = { body: 'DST', to: [{ phone_number: '420777001100' }], delivery_time: { days: ['sunday'], start: '02:30', end: '04:00', tz: 'Europe/Prague' } };
  const { dueInstant } = await import('../../shared/engine/dispatch.js');
  const due = dueInstant({ send_at: null, delivery_time: message.delivery_time }, new Date('2026-10-24T22:00:00Z'));
  assert.equal(due.toISOString(), '2026-10-25T00:30:00.000Z');
  const wrap = dueInstant({ send_at: null, delivery_time: { start: '22:00', end: '06:00', tz: 'Europe/Prague' } }, new Date('2026-11-22T04:00:00Z'));
  assert.equal(wrap.toISOString(), '2026-11-22T04:00:00.000Z', '05:00 Prague is inside the wrapped window');
  const closed = dueInstant({ send_at: null, delivery_time: { start: '22:00', end: '06:00', tz: 'Europe/Prague' } }, new Date('2026-11-22T06:00:00Z'));
  assert.equal(closed.toISOString(), '2026-11-22T21:00:00.000Z');
});

test('segment counts and prices for GSM, extension characters and UCS-2', async () => {
  const cases: Array<[string, number]> = [
    ['a'.repeat(160), 1],
    ['a'.repeat(161), 2],
    ['€'.repeat(80), 1], // 160 septets
    ['€'.repeat(81), 2],
    ['č'.repeat(70), 1],
    ['č'.repeat(71), 2],
    ['č'.repeat(135), 3],
  ];
  for (const [i, [text, parts]] of cases.entries()) {
    const mid = await send({ body: text, to: [{ phone_number: `4207770013${i}0` }] });
    const [sending] = await waitFor(async () => { const e = await events(`${mid}-0`); return e.length ? e : null; });
    assert.equal(sending!.sms!.count, parts, `${text.length} × ${text[0]}`);
    assert.equal(sending!.sms!.price_czk, Math.round(0.9 * parts * 10000) / 10000);
    assert.equal(sending!.sms!.price_eur, Math.round(0.036 * parts * 10000) / 10000);
    assert.equal(sending!.sms!.country, 230);
    assert.equal(sending!.sms!.gateway, 'high');
  }
  // sms.type = sms transliterates to GSM-7.
  const mid = await send({ body: 'x', to: [{ phone_number: '420777001499' }], flow: [{ sms: { body: 'č'.repeat(100), type: 'sms' } }] });
  const [first] = await waitFor(async () => { const e = await events(`${mid}-0`); return e.length ? e : null; });
  assert.equal(first!.sms!.count, 1);
  // The `sending` event commits before the hand-over: wait for the carrier's row.
  const [sandbox] = await waitFor(async () => {
    const rows = await svc.sql<{ body: string; encoding: string }>('SELECT body, encoding FROM sandbox_messages WHERE phone_number = $1', ['420777001499']);
    return rows.length ? rows : null;
  });
  assert.deepEqual(sandbox, { body: 'c'.repeat(100), encoding: 'gsm7' });
});

test('an invalid number is rejected [302] and the test number is never sent, charged or reported', async () => {
  const [before] = await svc.sql<{ credit_czk: number }>('SELECT credit_czk FROM accounts WHERE id = $1', [accountId]);
  const res = await svc.request('POST', '/v2/messages', { body: [{ body: 'x', to: [{ phone_number: '12' }, { phone_number: '420777777777' }] }], headers: { 'x-api-key': key } });
  const id = res.body.accepted[0].message_id as string;
  const [rejected] = await waitTrail(`${id}-0`, ['sms:rejected']);
  assert.equal(rejected!.result_info, '[302] Invalid phone number');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await events(`${id}-1`)).length, 0);
  const attempts = await svc.sql('SELECT a.id FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1', [`${id}-1`]);
  assert.equal(attempts.length, 0);
  const [afterRow] = await svc.sql<{ credit_czk: number }>('SELECT credit_czk FROM accounts WHERE id = $1', [accountId]);
  assert.equal(afterRow!.credit_czk, before!.credit_czk);
});

test('a failed attempt is refunded; a delivered one stays charged', async () => {
  const { apiKey, accountId: acc } = await svc.createAccount({ credit_czk: 10 });
  const id = await send({ body: 'x', to: [{ phone_number: '420777002002' }, { phone_number: '420777002000' }] }, apiKey);
  await waitTrail(`${id}-0`, ['sms:sending', 'sms:failed']);
  await waitTrail(`${id}-1`, ['sms:sending', 'sms:sent', 'sms:delivered']);
  const [row] = await svc.sql<{ credit_czk: number }>('SELECT credit_czk FROM accounts WHERE id = $1', [acc]);
  assert.equal(row!.credit_czk, 9.1);
});

test('credit runs out mid-batch under concurrent workers: exact number rejected, never negative', async () => {
  // 0.90 CZK per SMS to +420; 20 fit in 18.00 CZK; 60 recipients in 6 concurrent calls.
  const { apiKey, accountId: acc } = await svc.createAccount({ credit_czk: 18 });
  const calls = Array.from({ length: 6 }, (_, c) => svc.request('POST', '/v2/messages', {
    body: [{ body: 'x', to: Array.from({ length: 10 }, (_, i) => ({ phone_number: `420777030${c}${i}0` })) }],
    headers: { 'x-api-key': apiKey },
  }));
  const results = await Promise.all(calls);
  const ids = results.map((r) => r.body.accepted[0].message_id as string);
  const states = await waitFor(async () => {
    const rows = await svc.sql<{ state: string; n: number }>(
      `SELECT a.state, count(*)::int AS n FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.message_id = ANY($1) GROUP BY a.state`, [ids]);
    const total = rows.reduce((s, r) => s + r.n, 0);
    return total === 60 && !rows.some((r) => r.state === 'sending') ? rows : null;
  }, 15000, 'all 60 attempts settled');
  const byState = Object.fromEntries(states.map((r) => [r.state, r.n]));
  assert.equal(byState.rejected, 40);
  assert.equal((byState.delivered ?? 0) + (byState.sent ?? 0), 20);
  const [row] = await svc.sql<{ credit_czk: number }>('SELECT credit_czk FROM accounts WHERE id = $1', [acc]);
  assert.equal(row!.credit_czk, 0);
  const infos = await svc.sql<{ result_info: string }>(`SELECT DISTINCT a.result_info FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.message_id = ANY($1) AND a.state = 'rejected'`, [ids]);
  assert.deepEqual(infos.map((i) => i.result_info), ['[307] Insufficient credit']);
});

test('lanes: a priority message reaches the carrier before a promotional backlog queued earlier', async () => {
  const { apiKey } = await svc.createAccount({ credit_czk: 100000 });
  // The promotional lane held while the backlog is accepted, so the whole backlog is queued when
  // the priority message comes (else a fast machine carries part of it while the calls go on).
  const promoQueue = svc.runtime.queues.dispatchQueue('sms', 'promotional');
  await promoQueue.pause();
  try {
    const promo = Array.from({ length: 30 }, (_, c) => svc.request('POST', '/v2/messages', {
      body: Array.from({ length: 10 }, (_, m) => ({ body: 'promo', to: Array.from({ length: 10 }, (_, i) => ({ phone_number: `4207771${String(c * 100 + m * 10 + i).padStart(4, '0')}0` })) })),
      headers: { 'x-api-key': apiKey },
    }));
    await Promise.all(promo);
    await send({ body: 'OTP', tag: 'priority', to: [{ phone_number: '420777199999' }] }, apiKey);
    // Its own lane: carried while all 30 promotional jobs wait.
    await waitFor(async () => (await svc.sql(`SELECT 1 FROM sandbox_messages WHERE phone_number = '420777199999'`)).length === 1, 10000, 'priority carried');
    assert.deepEqual(await svc.sql(`SELECT 1 FROM sandbox_messages WHERE phone_number LIKE '4207771%' AND phone_number <> '420777199999'`), [], 'none of the backlog carried yet');
  } finally {
    await promoQueue.resume();
  }
  const order = await waitFor(async () => {
    const rows = await svc.sql<{ id: number; phone_number: string }>(`SELECT id, phone_number FROM sandbox_messages WHERE phone_number LIKE '4207771%' OR phone_number = '420777199999' ORDER BY id`);
    return rows.length === 3001 ? rows : null;
  }, 60000, 'backlog carried');
  assert.equal(order.findIndex((r) => r.phone_number === '420777199999'), 0, 'the priority message was carried first');
});
