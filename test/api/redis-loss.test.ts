/**
 * Redis loses ttl timers while Viber steps wait for them, and the recovery sweep sets them again
 * from Postgres, due when they were due, so a step whose ttl ran out meanwhile ends at once
 * (`[1] TTL expired`) and its flow moves on to SMS, and one whose ttl runs on keeps its deadline.
 * Before, those steps waited for the waiting walk's bound, RECEIPT_WAIT_HOURS (72 h).
 * - Restarted empty (no persistence, a flush): the ttl timers' mark is gone, and the walk covers
 *   every attempt whose timer may have been pending.
 * - Restarted with its data (AOF `everysec`) but without its last writes: the mark survives; the
 *   sweep notices that another server (another run_id) holds the set, and the walk covers the
 *   attempts handed over since it last saw the one before. The lost writes are played by removing
 *   the timers before the restart: what a crash within the AOF's last second would have left.
 *
 * The Redis is this file's own (test/support/own-redis.ts, with an AOF), so it can be restarted and
 * emptied without touching the shared one.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { startOwnRedis, type OwnRedis } from '../support/own-redis.js';
import { ttlTimersKey } from '../../shared/engine/ttl-timers.js';

let redis: OwnRedis;
let svc: TestService;
let apiKey: string;
before(async () => {
  redis = await startOwnRedis({ aof: true });
  svc = await startTestService({ env: { REDIS_URL: redis.url, RECOVERY_SWEEP_MS: '500' } });
  // BullMQ prints every reconnect failure of a queue without an error listener: not this file's subject.
  for (const queue of svc.runtime.queues.all()) queue.on('error', () => undefined);
  ({ apiKey } = await svc.createAccount());
  await svc.admin('PUT', '/prices', [{ channel: 'sms', prefix: '', price_czk: 1, price_eur: 0.04 }, { channel: 'viber', prefix: '', price_czk: 0.5, price_eur: 0.02 }]);
});
after(async () => {
  await svc?.stop();
  await redis?.remove();
});

const attemptOf = async (id: string, step = 0) => (await svc.sql<{ id: number; state: string; result_info: string; handed_ms: number }>(
  `SELECT a.id, a.state, a.result_info, (extract(epoch FROM a.handed_at) * 1000)::float8 AS handed_ms
     FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1 AND a.step = $2`, [id, step]))[0];

/** A Viber step with an SMS fallback; sandbox ...03 is sent with no receipt, so the step waits for its ttl. */
const send = async (ttl: number) => {
  const body = { body: 'V', to: [{ phone_number: '420777502003' }], flow: [{ viber: { sender: 'Shop', ttl } }, { sms: {} }] };
  const res = await svc.request('POST', '/v2/message', { headers: { 'x-api-key': apiKey }, body });
  assert.equal(res.status, 200, res.text);
  return res.body.accepted[0].message_id as string;
};

/**
 * Two Viber steps waiting, with their timers: one of a 1-minute ttl, handed over two minutes ago
 * (its ttl ran out while Redis was away), and one of an hour.
 */
async function twoWaitingSteps() {
  const timers = svc.runtime.engine.ttlTimers;
  const ranOut = await send(1);
  const runsOn = await send(60);
  await waitFor(async () => (await attemptOf(ranOut))?.state === 'sent' && (await attemptOf(runsOn))?.state === 'sent', 10_000, 'both sent');
  const short = (await attemptOf(ranOut))!;
  const long = (await attemptOf(runsOn))!;
  await waitFor(async () => (await timers.deadlineOf(short.id)) !== null && (await timers.deadlineOf(long.id)) !== null, 5000, 'their timers');
  await svc.sql(`UPDATE attempts SET handed_at = handed_at - interval '2 minutes' WHERE id = $1`, [short.id]);
  return { ranOut, runsOn, short, long };
}

/** After the restart: the step whose ttl ran out expired and its flow moved on; the other has its own deadline. */
async function settledAgain({ ranOut, runsOn, long }: Awaited<ReturnType<typeof twoWaitingSteps>>) {
  const timers = svc.runtime.engine.ttlTimers;
  await waitFor(async () => (await attemptOf(ranOut))?.state === 'undelivered', 20_000, 'the step whose ttl ran out expired');
  assert.equal((await attemptOf(ranOut))!.result_info, '[1] TTL expired');
  await waitFor(async () => (await attemptOf(ranOut, 1))?.state === 'sent', 10_000, 'its flow moved on to SMS');
  const deadline = await timers.deadlineOf(long.id);
  assert.ok(deadline !== null && Math.abs(deadline - (long.handed_ms + 60 * 60_000)) < 1, `deadline ${deadline}, handed ${long.handed_ms}`);
  assert.equal((await attemptOf(runsOn))!.state, 'sent');
  await waitFor(async () => { const state = await timers.lossState(); return !state.lost && state.rearm === null; }, 5000, 'marked, and the walk done');
}

test('ttl timers lost with Redis are set again from Postgres at the next sweep', { timeout: 90_000 }, async () => {
  const steps = await twoWaitingSteps();
  // The first sweep ran at start: the mark is there and no walk is under way.
  await waitFor(async () => !(await svc.runtime.engine.ttlTimers.lossState()).lost, 5000, 'the mark');
  await redis.stop();
  await redis.start({ empty: true }); // the sweep (every 500 ms) may already be setting the timers again
  await settledAgain(steps);
});

test('ttl timers lost in the last writes before a restart are set again once another server holds the set', { timeout: 90_000 }, async () => {
  const steps = await twoWaitingSteps();
  // The sweeps noted the server that holds the set (the first one after the start's walk).
  const record = `${ttlTimersKey(svc.config.redisPrefix)}:server`;
  await waitFor(async () => (await svc.runtime.redis.hget(record, 'run')) !== null, 5000, 'the server noted');
  const before = await svc.runtime.redis.hget(record, 'run');
  // The two ZADDs were in the AOF's last second when Redis died.
  await svc.runtime.redis.zrem(ttlTimersKey(svc.config.redisPrefix), String(steps.short.id), String(steps.long.id));
  // Without a restart nothing sets them again: the mark is there and the server is the same.
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  assert.equal(await svc.runtime.engine.ttlTimers.deadlineOf(steps.long.id), null, 'no walk while the same server holds the set');
  await redis.stop();
  await redis.start(); // the AOF's data: the mark and the server record are back, the timers not
  await settledAgain(steps);
  const now = await svc.runtime.redis.hget(record, 'run');
  assert.ok(now !== null && now !== before, 'the new server is noted');
});
