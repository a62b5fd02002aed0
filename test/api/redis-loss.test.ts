/**
 * Redis restarted empty (no persistence) while Viber steps wait for their ttl: the recovery sweep
 * sees the ttl timers' mark gone and sets every waiting step's timer again from Postgres, due
 * when it was due, so a step whose ttl ran out meanwhile ends at once (`[1] TTL expired`) and its
 * flow moves on to SMS, and one whose ttl runs on keeps its deadline. Before, those steps waited
 * for the waiting walk's bound, RECEIPT_WAIT_HOURS (72 h).
 *
 * The Redis is this file's own (test/support/own-redis.ts), so it can be emptied without touching
 * the shared one.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { startOwnRedis, type OwnRedis } from '../support/own-redis.js';

let redis: OwnRedis;
let svc: TestService;
let apiKey: string;
before(async () => {
  redis = await startOwnRedis();
  svc = await startTestService({ env: { REDIS_URL: redis.url, RECOVERY_SWEEP_MS: '500' } });
  // BullMQ prints every reconnect failure of a queue without an error listener: not this file's subject.
  for (const queue of svc.runtime.queues.all()) queue.on('error', () => undefined);
  ({ apiKey } = await svc.createAccount());
  await svc.admin('PUT', '/prices', [{ channel: 'sms', prefix: '', price_czk: 1, price_eur: 0.04 }, { channel: 'viber', prefix: '', price_czk: 0.5, price_eur: 0.02 }]);
});
after(async () => {
  await svc?.stop();
  await redis?.stop();
});

const attemptOf = async (id: string, step = 0) => (await svc.sql<{ id: number; state: string; result_info: string; handed_ms: number }>(
  `SELECT a.id, a.state, a.result_info, (extract(epoch FROM a.handed_at) * 1000)::float8 AS handed_ms
     FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1 AND a.step = $2`, [id, step]))[0];

test('ttl timers lost with Redis are set again from Postgres at the next sweep', { timeout: 90_000 }, async () => {
  const timers = svc.runtime.engine.ttlTimers;
  const send = async (ttl: number) => {
    const body = { body: 'V', to: [{ phone_number: '420777502003' }], flow: [{ viber: { sender: 'Shop', ttl } }, { sms: {} }] };
    const res = await svc.request('POST', '/v2/message', { headers: { 'x-api-key': apiKey }, body });
    assert.equal(res.status, 200, res.text);
    return res.body.accepted[0].message_id as string;
  };
  // Sandbox: ...03 is sent with no receipt, so each Viber step waits for its ttl.
  const ranOut = await send(1);
  const runsOn = await send(60);
  await waitFor(async () => (await attemptOf(ranOut))?.state === 'sent' && (await attemptOf(runsOn))?.state === 'sent', 10_000, 'both sent');
  const short = (await attemptOf(ranOut))!;
  const long = (await attemptOf(runsOn))!;
  await waitFor(async () => (await timers.deadlineOf(short.id)) !== null && (await timers.deadlineOf(long.id)) !== null, 5000, 'their timers');
  // The first sweep ran at start: the mark is there and no walk is under way.
  await waitFor(async () => !(await timers.lossState()).lost, 5000, 'the mark');
  // The first step's ttl (1 minute) ran out while Redis was away: its hand-over two minutes ago.
  await svc.sql(`UPDATE attempts SET handed_at = handed_at - interval '2 minutes' WHERE id = $1`, [short.id]);

  await redis.stop();
  await redis.start(); // empty: the sweep (every 500 ms) may already be setting the timers again

  await waitFor(async () => (await attemptOf(ranOut))?.state === 'undelivered', 20_000, 'the step whose ttl ran out expired');
  assert.equal((await attemptOf(ranOut))!.result_info, '[1] TTL expired');
  await waitFor(async () => (await attemptOf(ranOut, 1))?.state === 'sent', 10_000, 'its flow moved on to SMS');
  // The other keeps its deadline: its hand-over plus its ttl.
  const deadline = await timers.deadlineOf(long.id);
  assert.ok(deadline !== null && Math.abs(deadline - (long.handed_ms + 60 * 60_000)) < 1, `deadline ${deadline}, handed ${long.handed_ms}`);
  assert.equal((await attemptOf(runsOn))!.state, 'sent');
  await waitFor(async () => { const state = await timers.lossState(); return !state.lost && state.rearm === null; }, 5000, 'marked again, and the walk done');
});
