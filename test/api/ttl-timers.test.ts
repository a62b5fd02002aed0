/**
 * Ttl timers (shared/engine/ttl-timers.ts): Redis holds a timer only while its attempt waits. A
 * Viber or WhatsApp step's timer is set at hand-over and goes with the status batch that settles
 * the attempt; one still waiting at its deadline is fired (the step expires, the flow moves on)
 * and goes then. Firing is at least once: a round whose expiry fails keeps its timers.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { needsTtlTimer, mayHoldTtlTimer, TtlExpiry, TtlTimers } from '../../shared/engine/ttl-timers.js';
import { createLogger } from '../../shared/logger.js';
import type { Channel } from '../../shared/channels/index.js';

let svc: TestService;
let apiKey: string;
before(async () => {
  svc = await startTestService();
  ({ apiKey } = await svc.createAccount());
  await svc.admin('PUT', '/prices', [
    { channel: 'sms', prefix: '', price_czk: 1, price_eur: 0.04 }, { channel: 'viber', prefix: '', price_czk: 0.5, price_eur: 0.02 },
    { channel: 'whatsapp_template', prefix: '', price_czk: 0.5, price_eur: 0.02 },
  ]);
});
after(async () => {
  await svc.stop();
});

const attemptOf = async (id: string, step = 0) => (await svc.sql<{ id: number; state: string; result_info: string }>(
  'SELECT a.id, a.state, a.result_info FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1 AND a.step = $2', [id, step]))[0];

async function send(body: unknown): Promise<string> {
  const res = await svc.request('POST', '/v2/message', { headers: { 'x-api-key': apiKey }, body });
  assert.equal(res.status, 200, res.text);
  return res.body.accepted[0].message_id as string;
}

test('who gets a timer, and whose a status batch removes', () => {
  const table: Array<[Channel, boolean, boolean, boolean]> = [
    // channel, carrier settles on send, needs a timer, may hold one when settled
    ['sms', true, false, false], // SMPP: the submit response settles the step
    ['sms', false, true, false], // a carrier that does not settle on send: fired as a no-op later
    ['viber', false, true, true],
    ['whatsapp_template', false, true, true],
    ['whatsapp_text', false, true, true],
  ];
  for (const [channel, settles, needs, mayHold] of table) {
    assert.equal(needsTtlTimer(channel, settles), needs, `${channel} needs (settles ${settles})`);
    assert.equal(mayHoldTtlTimer(channel), mayHold, `${channel} may hold`);
  }
});

test('settled attempts leave no timer; a waiting one keeps its own until it fires, then it goes too', { timeout: 60_000 }, async () => {
  const timers = svc.runtime.engine.ttlTimers;
  // Sandbox: a number ending in 00 is delivered (and seen); one ending in 03 is sent with no receipt.
  const delivered = await Promise.all([0, 1, 2].map((i) => send({ body: 'D', to: [{ phone_number: `42077760${i}100` }], flow: [{ viber: { sender: 'Shop' } }, { sms: {} }] })));
  const template = await send({ body: 'T', to: [{ phone_number: '420777603100' }], flow: [{ whatsapp_template: { template_name: 'hi', sender: '111' } }] });
  const waiting = await send({ body: 'W', to: [{ phone_number: '420777604103' }], flow: [{ viber: { sender: 'Shop', ttl: 5 } }, { sms: {} }] });
  await waitFor(async () => {
    const states = await Promise.all([...delivered, template].map(async (id) => (await attemptOf(id))?.state));
    return states.every((s) => s === 'delivered' || s === 'seen') && (await attemptOf(waiting))?.state === 'sent';
  }, 15_000, 'delivered and sent');
  const w = (await attemptOf(waiting))!;
  const deadline = await waitFor(() => timers.deadlineOf(w.id), 5000, 'the waiting attempt\'s timer');
  assert.ok(deadline - Date.now() > 4 * 60_000, 'due when its 5 minutes end');
  for (const id of [...delivered, template]) {
    const a = (await attemptOf(id))!;
    await waitFor(async () => (await timers.deadlineOf(a.id)) === null, 5000, `the timer of ${id} removed`);
  }
  assert.equal(await timers.size(), 1, 'only the waiting attempt holds a timer');

  await timers.set([w.id], Date.now()); // fake time: due now
  await waitFor(async () => (await attemptOf(waiting))?.state === 'undelivered', 10_000, 'the step expired');
  assert.equal((await attemptOf(waiting))!.result_info, '[1] TTL expired');
  await waitFor(async () => (await attemptOf(waiting, 1))?.state === 'sent', 10_000, 'the flow moved on to SMS');
  await waitFor(async () => (await timers.deadlineOf(w.id)) === null, 5000, 'the fired timer removed');
  // The SMS step went to the sandbox, a carrier that does not settle on send: its timer stays until
  // it fires (as a no-op, its step succeeded at `sent`), not removed by a status batch (mayHoldTtlTimer).
  const sms = (await attemptOf(waiting, 1))!;
  await waitFor(() => timers.deadlineOf(sms.id), 5000, 'the SMS step\'s timer');
  assert.equal(await timers.size(), 1);
});

test('set again: kept or replaced; rounds claim, fire at least once, and one bad attempt holds up no other', async () => {
  const timers = new TtlTimers(svc.runtime.redis, `${svc.prefix}:own`);
  await timers.set([11, 12], 1_000);
  await timers.set([11, 13], 5_000, 'keep');
  assert.equal(await timers.deadlineOf(11), 1_000, 'kept');
  assert.equal(await timers.deadlineOf(13), 5_000, 'set');
  await timers.set([12], 9_000);
  assert.equal(await timers.deadlineOf(12), 9_000, 'replaced');

  const expired: number[][] = [];
  let failure: (ids: number[]) => Error | null = (ids) => (ids.includes(13) ? new Error('a row this code cannot handle') : null);
  const expiry = new TtlExpiry(timers, async (ids) => {
    const err = failure(ids);
    if (err) throw err;
    expired.push(ids);
  }, createLogger('silent'));
  // 11 and 13 are due at 6 s; 13 fails alone: 11 fires all the same, 13 waits out its claim's minute.
  const before = Date.now();
  assert.equal(await expiry.fireDue(6_000), 1);
  assert.deepEqual(expired, [[11]]);
  assert.equal(await timers.deadlineOf(11), null);
  assert.equal(await timers.deadlineOf(12), 9_000);
  const claimedUntil = (await timers.deadlineOf(13))!;
  assert.ok(claimedUntil >= before + 60_000 && claimedUntil <= Date.now() + 60_000, 'claimed for a minute from the round\'s start');

  // Postgres down: the round stops at once, nothing is removed, and the claimed timers are not due
  // for another round meanwhile. A statement timeout stops it the same way.
  const later = Date.now() + 120_000;
  let calls = 0;
  failure = () => (calls++, Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }));
  await assert.rejects(expiry.fireDue(later), /ECONNREFUSED/);
  assert.equal(calls, 1, 'not tried one by one');
  assert.deepEqual(await timers.claimDue(Date.now(), 10, 1), [], 'claimed by the failed round for a minute');
  assert.equal(await timers.size(), 2);
  failure = () => Object.assign(new Error('canceling statement due to statement timeout'), { code: '57014' });
  await assert.rejects(expiry.fireDue(later + 120_000), /statement timeout/);
  failure = () => null;
  assert.equal(await expiry.fireDue(later + 240_000), 2, 'fired once their claim ran out');
  assert.deepEqual(expired, [[11], [12, 13]]);
  assert.equal(await timers.size(), 0);
});

test('a dispatch job run again sets the timer its crashed run never set, due when it would have been, and sends nothing again', { timeout: 30_000 }, async () => {
  const timers = svc.runtime.engine.ttlTimers;
  // Sent with no receipt (sandbox 03): it waits for `delivered` until its 5 minutes end.
  const phone = '420777605103';
  const id = await send({ body: 'R', to: [{ phone_number: phone }], flow: [{ viber: { sender: 'Shop', ttl: 5 } }, { sms: {} }] });
  await waitFor(async () => (await attemptOf(id))?.state === 'sent', 10_000, 'sent');
  const a = (await attemptOf(id))!;
  await waitFor(() => timers.deadlineOf(a.id), 5000, 'its timer');
  // The run that handed it died before its timers; the carrier's report recorded the hand-over.
  await timers.clear([a.id]);
  const [row] = await svc.sql<{ recipient_id: number; message_id: string; handed_ms: number }>(
    `SELECT r.id AS recipient_id, r.message_id, (extract(epoch FROM a.handed_at) * 1000)::float8 AS handed_ms
       FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE a.id = $1`, [a.id]);
  const outcome = await svc.runtime.engine.dispatch({ step: 0, messages: [{ messageId: row!.message_id, recipientIds: [Number(row!.recipient_id)] }] });
  assert.equal(outcome.handed, 0, 'not handed again');
  assert.equal(await timers.deadlineOf(a.id), Math.ceil((row!.handed_ms + 5 * 60_000) / 1000) * 1000, 'due 5 minutes after the hand-over (to the next second)');
  const [sends] = await svc.sql<{ n: number }>('SELECT count(*)::int AS n FROM sandbox_messages WHERE phone_number = $1', [phone]);
  assert.equal(sends!.n, 1);
  await timers.clear([a.id]);
});
