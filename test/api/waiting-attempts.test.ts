/**
 * Nothing stays non-final without a timer (issue 22): the sweep of attempts that waited longer than
 * RECEIPT_WAIT_HOURS gives a Viber step whose ttl timer Redis lost its timer back (the step then
 * expires and the flow moves on), fails an SMS whose submit was never answered (refunded; charged
 * when some of its parts left), and leaves an SMS that was sent without a receipt as it is.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { RecoverySweep, rearmLostTimers, sweepWaitingAttempts, sweepWaitingPages } from '../../workers/recovery.js';
import { ttlTimersKey } from '../../shared/engine/ttl-timers.js';
import { createLogger } from '../../shared/logger.js';

let svc: TestService;
let apiKey: string;
before(async () => {
  // The service's own sweep only at its start: these tests call the walks themselves.
  svc = await startTestService({ env: { RECOVERY_SWEEP_MS: '3600000' } });
  ({ apiKey } = await svc.createAccount());
  await svc.admin('PUT', '/prices', [{ channel: 'sms', prefix: '', price_czk: 1, price_eur: 0.04 }, { channel: 'viber', prefix: '', price_czk: 0.5, price_eur: 0.02 }]);
});
after(async () => {
  await svc.stop();
});

const attemptOf = async (id: string, step = 0) => (await svc.sql<{ id: number; state: string; result_info: string; refunded: boolean }>(
  'SELECT a.id, a.state, a.result_info, a.refunded FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1 AND a.step = $2', [id, step]))[0];

test('attempts that waited too long are settled; their timers come back', { timeout: 60_000 }, async () => {
  const send = async (body: unknown) => {
    const res = await svc.request('POST', '/v2/message', { headers: { 'x-api-key': apiKey }, body });
    assert.equal(res.status, 200, res.text);
    return res.body.accepted[0].message_id as string;
  };
  // Sandbox: ...03 is sent with no receipt, on every channel.
  const viber = await send({ body: 'V', to: [{ phone_number: '420777502003' }], flow: [{ viber: { sender: 'Shop', ttl: 1 } }, { sms: {} }] });
  const smsSent = await send({ body: 'S', to: [{ phone_number: '420777502103' }] });
  const smsUnanswered = await send({ body: 'U', to: [{ phone_number: '420777502203' }] });
  await waitFor(async () => (await attemptOf(viber))?.state === 'sent' && (await attemptOf(smsSent))?.state === 'sent'
    && (await attemptOf(smsUnanswered))?.state === 'sent', 10_000, 'sent');
  const v = (await attemptOf(viber))!;
  // Redis lost the viber step's ttl timer (set just after the hand-over's record); the third SMS
  // never got its submit answered.
  await waitFor(() => svc.runtime.engine.ttlTimers.deadlineOf(v.id), 5000, 'the ttl timer');
  await svc.runtime.redis.zrem(ttlTimersKey(svc.config.redisPrefix), String(v.id));
  await svc.sql(`UPDATE attempts SET handed_at = now() - interval '2 minutes' WHERE id = $1`, [v.id]);
  await svc.sql(`UPDATE attempts SET state = 'sending', reached_sent = false WHERE id = $1`, [(await attemptOf(smsUnanswered))!.id]);

  const swept = await sweepWaitingAttempts(svc.runtime.db, svc.runtime.redis, svc.runtime.queues, svc.runtime.engine.ttlTimers, { boundMs: 0, cursorKey: `${svc.prefix}:test-cursor` });
  assert.equal(swept.ttlTimers, 1);
  assert.equal(swept.failed, 1);
  await waitFor(async () => (await attemptOf(viber))?.state === 'undelivered', 10_000, 'viber step expired');
  assert.equal((await attemptOf(viber))!.result_info, '[1] TTL expired');
  await waitFor(async () => (await attemptOf(viber, 1))?.state === 'sent', 10_000, 'the flow moved on to SMS');
  await waitFor(async () => (await attemptOf(smsUnanswered))?.state === 'failed', 10_000, 'unanswered SMS failed');
  const unanswered = (await attemptOf(smsUnanswered))!;
  assert.equal(unanswered.result_info, '[3] No answer from the carrier');
  assert.equal(unanswered.refunded, true);
  assert.equal((await attemptOf(smsSent))!.state, 'sent', 'a sent SMS stays sent');
  // The cursor moved past them: a second sweep finds nothing new.
  const again = await sweepWaitingAttempts(svc.runtime.db, svc.runtime.redis, svc.runtime.queues, svc.runtime.engine.ttlTimers, { boundMs: 0, cursorKey: `${svc.prefix}:test-cursor` });
  assert.equal(again.failed + again.ttlTimers, 0);
});

test('one sweep walks page after page until it reaches the bound, within its time budget', { timeout: 30_000 }, async () => {
  const [row] = await svc.sql<{ n: number; max: number }>('SELECT count(*)::int AS n, max(id)::int AS max FROM attempts');
  const { n, max } = row!;
  assert.ok(n >= 3, `${n} attempts`);
  const args = [svc.runtime.db, svc.runtime.redis, svc.runtime.queues, svc.runtime.engine.ttlTimers] as const;
  // A budget already spent: one page of one attempt, and the cursor stays just past it.
  const one = await sweepWaitingPages(...args, { boundMs: 0, cursorKey: `${svc.prefix}:pages-cursor`, limit: 1, budgetMs: 0 });
  assert.deepEqual([one.pages, one.checked], [1, 1]);
  // Time enough: every remaining attempt in one sweep, one page each, then an empty page.
  const rest = await sweepWaitingPages(...args, { boundMs: 0, cursorKey: `${svc.prefix}:pages-cursor`, limit: 1, budgetMs: 20_000 });
  assert.equal(rest.checked, n - 1);
  assert.equal(rest.pages, n);
  assert.equal(Number(await svc.runtime.redis.get(`${svc.prefix}:pages-cursor`)), max);
  // The bound stops it: attempts younger than an hour are left for later, and the cursor stays
  // before the first of them (a walk without a cursor starts a week before the bound: here, before
  // every attempt).
  await svc.runtime.redis.del(`${svc.prefix}:pages-cursor`);
  const young = await sweepWaitingPages(...args, { boundMs: 3_600_000, cursorKey: `${svc.prefix}:pages-cursor`, limit: 1, budgetMs: 20_000 });
  assert.deepEqual([young.pages, young.checked], [1, 1]);
  assert.equal(await svc.runtime.redis.get(`${svc.prefix}:pages-cursor`), '0');
});

test('after Redis lost the timers, the walk pages through the attempts across sweeps, then marks its end', { timeout: 30_000 }, async () => {
  const timers = svc.runtime.engine.ttlTimers;
  // A Viber step still waiting (sandbox ...03: sent, no receipt; a ttl of an hour).
  const res = await svc.request('POST', '/v2/message', { headers: { 'x-api-key': apiKey },
    body: { body: 'W', to: [{ phone_number: '420777502003' }], flow: [{ viber: { sender: 'Shop', ttl: 60 } }, { sms: {} }] } });
  assert.equal(res.status, 200, res.text);
  await waitFor(async () => (await attemptOf(res.body.accepted[0].message_id))?.state === 'sent', 10_000, 'sent');
  const [row] = await svc.sql<{ n: number; max: number; waiting: number }>(
    `SELECT count(*)::int AS n, max(id)::int AS max, count(*) FILTER (WHERE channel = 'viber' AND state IN ('sending', 'sent'))::int AS waiting FROM attempts`);
  const { n, max, waiting } = row!;
  assert.ok(n >= 4 && waiting >= 1, `${n} attempts, ${waiting} waiting`);
  // The first sweep marked the set, and its walk (of an empty table) is done.
  await waitFor(async () => { const state = await timers.lossState(); return !state.lost && state.rearm === null; }, 5000, 'the first sweep\'s mark');
  // Nothing lost: the walk does nothing.
  assert.equal(await rearmLostTimers(svc.runtime.db, timers, { sinceMs: 0, budgetMs: 0 }), null);
  // Redis lost the set with its mark.
  await svc.runtime.redis.del(ttlTimersKey(svc.config.redisPrefix), `${ttlTimersKey(svc.config.redisPrefix)}:kept`);
  assert.equal((await timers.lossState()).lost, true);
  // A spent budget: one page of one attempt per sweep, the range recorded, then its progress.
  const first = await rearmLostTimers(svc.runtime.db, timers, { sinceMs: 0, budgetMs: 0, limit: 1 });
  const walk = first?.started?.walk ?? '';
  assert.deepEqual(first?.started, { walk, after: 0, upTo: max }, 'the walk covers every attempt of the window, up to the newest');
  assert.ok(walk.length > 0, 'the walk has an id');
  assert.deepEqual([first?.pages, first?.checked, first?.done], [1, 1, false]);
  const firstId = (await svc.sql<{ id: number }>('SELECT min(id)::int AS id FROM attempts'))[0]!.id;
  assert.deepEqual(await timers.lossState(), { lost: false, rearm: { walk, after: firstId, upTo: max } });
  // A walker of another walk (one Redis lost meanwhile) cannot move this one on or end it.
  assert.equal(await timers.advanceRearm('an earlier walk', max), false);
  assert.equal(await timers.advanceRearm('an earlier walk', null), false);
  // Nor can this walk go backwards.
  assert.equal(await timers.advanceRearm(walk, 0), true);
  assert.deepEqual((await timers.lossState()).rearm, { walk, after: firstId, upTo: max });
  let ttlTimers = first!.ttlTimers;
  let checked = first!.checked;
  for (let sweep = 0; sweep < n + 1; sweep++) {
    const next = await rearmLostTimers(svc.runtime.db, timers, { sinceMs: 0, budgetMs: 0, limit: 1 });
    assert.ok(next !== null && next.started === null, 'the walk goes on, not over');
    ttlTimers += next.ttlTimers;
    checked += next.checked;
    if (next.done) break;
  }
  assert.equal(checked, n, 'every attempt walked once');
  assert.equal(ttlTimers, waiting, 'a timer for every waiting Viber step');
  assert.deepEqual(await timers.lossState(), { lost: false, rearm: null }, 'done');
  assert.equal(await timers.size(), waiting);
  // A walk from a later moment starts past the older attempts (a binary search over the ids).
  await svc.runtime.redis.del(`${ttlTimersKey(svc.config.redisPrefix)}:kept`);
  const none = await rearmLostTimers(svc.runtime.db, timers, { sinceMs: Date.now() + 60_000, budgetMs: 0 });
  assert.deepEqual([none?.started?.after, none?.started?.upTo, none?.checked, none?.done], [max, max, 0, true]);
});

test('one process at a time walks the waiting attempts: the sweep that finds the lock taken leaves the cursor alone', { timeout: 30_000 }, async () => {
  const redisPrefix = `${svc.prefix}:lock-test`;
  const cursorKey = `${redisPrefix}:sweep:waiting-attempts`;
  const lock = `${cursorKey}:lock`;
  const sweep = () => new RecoverySweep(svc.runtime.db, svc.runtime.redis, svc.runtime.queues, svc.runtime.engine.ttlTimers, {
    intervalMs: 3_600_000, graceMs: 3_600_000, webhookRetries: 1, receiptWaitMs: 0, redisPrefix,
  }, createLogger('silent'));
  await svc.runtime.redis.set(lock, 'another process', 'PX', 60_000);
  await sweep().runOnce();
  assert.equal(await svc.runtime.redis.get(cursorKey), null, 'no walk while another process holds the lock');
  assert.equal(await svc.runtime.redis.get(lock), 'another process', 'the lock is not taken from its holder');
  await svc.runtime.redis.del(lock);
  await sweep().runOnce();
  const [{ max }] = await svc.sql<{ max: number }>('SELECT max(id)::int AS max FROM attempts') as [{ max: number }];
  assert.equal(Number(await svc.runtime.redis.get(cursorKey)), max, 'the walk ran to the newest attempt');
  assert.equal(await svc.runtime.redis.get(lock), null, 'and released the lock');
});

test('a waiting walk that lost its cursor starts a week before its bound, not at the first attempt ever', { timeout: 30_000 }, async () => {
  const send = async (phone: string) => {
    const res = await svc.request('POST', '/v2/message', { headers: { 'x-api-key': apiKey }, body: { body: 'R', to: [{ phone_number: phone }] } });
    assert.equal(res.status, 200, res.text);
    return res.body.accepted[0].message_id as string;
  };
  // Two SMS whose submits were never answered (sandbox ...03 is sent without a receipt; its state
  // is then set back), one made 30 days ago with every attempt before it, one 4 days ago.
  const ancient = await send('420777502303');
  const recent = await send('420777502403');
  await waitFor(async () => (await attemptOf(ancient))?.state === 'sent' && (await attemptOf(recent))?.state === 'sent', 10_000, 'sent');
  const a = (await attemptOf(ancient))!;
  const r = (await attemptOf(recent))!;
  await svc.sql(`UPDATE attempts SET state = 'sending', reached_sent = false WHERE id = ANY($1)`, [[a.id, r.id]]);
  await svc.sql(`UPDATE attempts SET created_at = now() - interval '30 days' WHERE id <= $1`, [a.id]);
  await svc.sql(`UPDATE attempts SET created_at = now() - interval '4 days' WHERE id > $1 AND id <= $2`, [a.id, r.id]);
  const cursorKey = `${svc.prefix}:restart-cursor`;
  const args = [svc.runtime.db, svc.runtime.redis, svc.runtime.queues, svc.runtime.engine.ttlTimers] as const;
  const walked = await sweepWaitingPages(...args, { boundMs: 72 * 3_600_000, cursorKey, budgetMs: 20_000 });
  // 30 days is more than the bound (72 h) and a week before it: walked before Redis lost the cursor.
  assert.equal(Number(await svc.runtime.redis.get(cursorKey)), r.id, 'the walk started past the old attempts and ran to the bound');
  const [{ after }] = await svc.sql<{ after: number }>('SELECT count(*)::int AS after FROM attempts WHERE id > $1', [a.id]) as [{ after: number }];
  assert.equal(walked.checked, after, 'only the attempts after the old ones');
  assert.equal(walked.failed, 1, 'the 4-day-old unanswered SMS');
  assert.equal(walked.restartedAfter, a.id, 'it says where it started (the sweep logs it)');
  await waitFor(async () => (await attemptOf(recent))?.state === 'failed', 10_000, 'the recent unanswered SMS failed');
  assert.equal((await attemptOf(ancient))!.state, 'sending', 'the old one is left alone');
});

test('a long SMS whose hand-over stopped after some of its parts left is failed after `sent`, charged (D3), not refunded', { timeout: 30_000 }, async () => {
  const { apiKey: key, accountId } = await svc.createAccount({ credit_czk: 10 });
  const res = await svc.request('POST', '/v2/message', { headers: { 'x-api-key': key }, body: { body: 'L'.repeat(400), to: [{ phone_number: '420777502503' }] } });
  assert.equal(res.status, 200, res.text);
  const id = res.body.accepted[0].message_id as string;
  await waitFor(async () => (await attemptOf(id))?.state === 'sent', 10_000, 'sent');
  const a = (await attemptOf(id))!;
  // As an SMPP hand-over that stopped after part 1: still `sending`, part 1's ref registered.
  await svc.sql(`UPDATE attempts SET state = 'sending', reached_sent = false WHERE id = $1`, [a.id]);
  await svc.sql(`INSERT INTO carrier_refs (carrier, ref, attempt_id, part) VALUES ('smpp.gone', 'dec:1', $1, 0)`, [a.id]);
  const credit = async () => Number((await svc.sql<{ credit_czk: string }>('SELECT credit_czk FROM accounts WHERE id = $1', [accountId]))[0]!.credit_czk);
  const charged = await credit();
  assert.ok(charged < 10, `charged at the send (${charged} left)`);
  const cursorKey = `${svc.prefix}:partly-sent-cursor`;
  await svc.runtime.redis.set(cursorKey, String(a.id - 1));
  const swept = await sweepWaitingAttempts(svc.runtime.db, svc.runtime.redis, svc.runtime.queues, svc.runtime.engine.ttlTimers, { boundMs: 0, cursorKey });
  assert.equal(swept.failed, 1);
  await waitFor(async () => (await attemptOf(id))?.state === 'failed', 10_000, 'failed');
  const [row] = await svc.sql<{ reached_sent: boolean; refunded: boolean; result_info: string }>(
    'SELECT reached_sent, refunded, result_info FROM attempts WHERE id = $1', [a.id]);
  assert.deepEqual(row, { reached_sent: true, refunded: false, result_info: '[3] No answer from the carrier' });
  assert.equal(await credit(), charged, 'still charged: parts left');
});
