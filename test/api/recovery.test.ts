/**
 * Accepted work survives Redis losing it: Postgres is the record, and the recovery sweep
 * re-enqueues recipients that are due but have no job (here: every queue was emptied between
 * the 200 and the first dispatch).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { sweepOnce } from '../../workers/recovery.js';
import { callJobId, messageJobId, recipientJobId } from '../../shared/engine/dispatch-jobs.js';
import { webhookJobId } from '../../shared/queues.js';
import { BatchHolder, holderKey, liveHolders } from '../../shared/webhooks/holders.js';

let svc: TestService;
before(async () => {
  // The web role only: nothing consumes the queues until the test starts the workers itself.
  // The sandbox's slow delivery (…04 over SMS) made quick, so a test can wait for it.
  svc = await startTestService({ role: 'web', env: { SANDBOX_SLOW_DELIVERY_MS: '200' } });
});
after(async () => {
  await svc.stop();
});

test('recipients whose jobs Redis lost are re-enqueued by the sweep and then delivered', async () => {
  const { apiKey } = await svc.createAccount();
  const res = await svc.request('POST', '/v2/messages', {
    body: [{ body: 'lost', to: [{ phone_number: '420777400000' }, { phone_number: '420777400010' }] }],
    headers: { 'x-api-key': apiKey },
  });
  assert.equal(res.status, 200);
  const id = res.body.accepted[0].message_id as string;
  const queue = svc.runtime.queues.dispatchQueue('sms', 'promotional');
  assert.equal(await queue.count(), 1, 'the call enqueued its dispatch');
  await queue.obliterate({ force: true }); // Redis loses the job
  assert.equal(await queue.count(), 0);

  // Due now: the message is flagged and its recipients carry no due_at. Age both by a minute.
  const [flag] = await svc.sql<{ dispatch_pending: boolean }>('SELECT dispatch_pending FROM messages WHERE id = $1', [id]);
  assert.equal(flag!.dispatch_pending, true);
  assert.deepEqual(await svc.sql('SELECT due_at FROM recipients WHERE message_id = $1 AND due_at IS NOT NULL', [id]), []);
  await svc.sql(`UPDATE messages SET created_at = created_at - interval '1 minute' WHERE id = $1`, [id]);
  await svc.sql(`UPDATE recipients SET created_at = created_at - interval '1 minute' WHERE message_id = $1`, [id]);
  const swept = await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 });
  assert.equal(swept.dispatch, 1);
  const job = await queue.getJob(callJobId(res.body.request_id));
  assert.ok(job, 'the job is back under the id of the call\'s job');
  assert.deepEqual(job.data.messages[0]!.recipientIds.length, 2);
  assert.ok(job.data.messages[0]!.recipientIds.every((r) => typeof r === 'number'), 'ids as acceptance writes them: numbers');
  // A second sweep does not duplicate a job that exists.
  await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 });
  assert.equal(await queue.count(), 1);

  // A dispatch worker (another process in production) runs the recovered job: the attempts start.
  await svc.runtime.engine.dispatch(job.data);
  const states = await waitFor(async () => {
    const rows = await svc.sql<{ state: string }>('SELECT state FROM recipient_states WHERE message_id = $1', [id]);
    return rows.every((r) => r.state !== 'queued') ? rows : null;
  }, 10_000, 'dispatched');
  assert.ok(states.every((r) => r.state === 'sending' || r.state === 'sent' || r.state === 'delivered'));
  const [cleared] = await svc.sql<{ dispatch_pending: boolean }>('SELECT dispatch_pending FROM messages WHERE id = $1', [id]);
  assert.equal(cleared!.dispatch_pending, false, 'handing the recipients over clears the flag');
  // Nothing left to sweep.
  assert.equal((await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 })).dispatch, 0);
});

test('every lost message of a call comes back in one sweep, in one job under the call\'s id', async () => {
  const { apiKey } = await svc.createAccount();
  const phones = ['420777400100', '420777400110', '420777400120', '420777400130'];
  const res = await svc.request('POST', '/v2/messages', {
    body: phones.map((phone_number, i) => ({ body: `lost ${i}`, to: [{ phone_number }] })),
    headers: { 'x-api-key': apiKey },
  });
  assert.equal(res.status, 200, res.text);
  const ids = (res.body.accepted as Array<{ message_id: string }>).map((a) => a.message_id);
  const queue = svc.runtime.queues.dispatchQueue('sms', 'promotional');
  await queue.obliterate({ force: true }); // Redis loses the call's job
  await svc.sql(`UPDATE messages SET created_at = created_at - interval '1 minute' WHERE id = ANY($1)`, [ids]);
  await svc.sql(`UPDATE recipients SET created_at = created_at - interval '1 minute' WHERE message_id = ANY($1)`, [ids]);
  // One job per message under the one id kept only the first: a call of N messages took N sweeps.
  const swept = await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 });
  assert.equal(swept.dispatch, 1);
  const job = await queue.getJob(callJobId(res.body.request_id));
  assert.ok(job);
  assert.deepEqual(job.data.messages.map((m) => m.messageId).sort(), [...ids].sort());
  await svc.runtime.engine.dispatch(job.data);
  await waitFor(async () => {
    const rows = await svc.sql<{ state: string }>('SELECT state FROM recipient_states WHERE message_id = ANY($1)', [ids]);
    return rows.length === phones.length && rows.every((r) => r.state !== 'queued');
  }, 10_000, 'every message dispatched');
  await queue.obliterate({ force: true });
});

test('a flagged message whose recipients are no longer queued only loses its flag', async () => {
  const { apiKey } = await svc.createAccount();
  const res = await svc.request('POST', '/v2/messages', {
    body: [{ body: 'handled', to: [{ phone_number: '420777400100' }] }],
    headers: { 'x-api-key': apiKey },
  });
  const id = res.body.accepted[0].message_id as string;
  await svc.runtime.queues.dispatchQueue('sms', 'promotional').obliterate({ force: true });
  await svc.sql(`UPDATE recipients SET state = 'failed' WHERE message_id = $1`, [id]);
  await svc.sql(`UPDATE messages SET created_at = created_at - interval '1 minute' WHERE id = $1`, [id]);
  await svc.sql(`UPDATE recipients SET created_at = created_at - interval '1 minute' WHERE message_id = $1`, [id]);
  const swept = await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 });
  assert.equal(swept.dispatch, 0);
  const [row] = await svc.sql<{ dispatch_pending: boolean }>('SELECT dispatch_pending FROM messages WHERE id = $1', [id]);
  assert.equal(row!.dispatch_pending, false);
});

test('scheduled recipients carry due_at and no flag; the sweep finds them by due_at', async () => {
  const { apiKey } = await svc.createAccount();
  const sendAt = new Date(Date.now() + 3600_000).toISOString();
  const res = await svc.request('POST', '/v2/messages', {
    body: [{ body: 'later', to: [{ phone_number: '420777400200' }], datetime: sendAt }],
    headers: { 'x-api-key': apiKey },
  });
  assert.equal(res.status, 200, res.text);
  const id = res.body.accepted[0].message_id as string;
  const [msg] = await svc.sql<{ dispatch_pending: boolean }>('SELECT dispatch_pending FROM messages WHERE id = $1', [id]);
  assert.equal(msg!.dispatch_pending, false);
  const [rcpt] = await svc.sql<{ due_at: Date | null }>('SELECT due_at FROM recipients WHERE message_id = $1', [id]);
  assert.equal(rcpt!.due_at?.toISOString(), new Date(sendAt).toISOString());
  await svc.runtime.queues.dispatchQueue('sms', 'promotional').obliterate({ force: true });
  await svc.sql(`UPDATE recipients SET due_at = now() - interval '1 minute' WHERE message_id = $1`, [id]);
  const swept = await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 });
  assert.equal(swept.dispatch, 1);
});

test('a hand-over that fails keeps the work findable; the job run again hands the attempts without writing or charging them twice', async () => {
  const { accountId, apiKey } = await svc.createAccount({ credit_czk: 10 });
  const res = await svc.request('POST', '/v2/messages', {
    body: [{ body: 'once', to: [{ phone_number: '420777400300' }, { phone_number: '420777400400' }] }],
    headers: { 'x-api-key': apiKey },
  });
  assert.equal(res.status, 200, res.text);
  const id = res.body.accepted[0].message_id as string;
  await svc.runtime.queues.dispatchQueue('sms', 'promotional').obliterate({ force: true });
  const recipientIds = (await svc.sql<{ id: number }>('SELECT id FROM recipients WHERE message_id = $1 ORDER BY id', [id])).map((r) => Number(r.id));
  const job = { step: 0, messages: [{ messageId: id, recipientIds }] };

  // The carrier fails the first hand-over (a link down, a process killed right after the commit).
  const carrier = svc.runtime.engine.carriers.pick('sms', '420777400300')!;
  const send = carrier.send.bind(carrier);
  carrier.send = async () => {
    carrier.send = send;
    throw new Error('carrier link down');
  };
  await assert.rejects(svc.runtime.engine.dispatch(job), /carrier link down/);
  const attempts = () => svc.sql<{ state: string; handed: boolean }>(
    'SELECT a.state, a.handed_at IS NOT NULL AS handed FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.message_id = $1', [id]);
  assert.deepEqual(await attempts(), [{ state: 'sending', handed: false }, { state: 'sending', handed: false }]);
  const [flag] = await svc.sql<{ dispatch_pending: boolean }>('SELECT dispatch_pending FROM messages WHERE id = $1', [id]);
  assert.equal(flag!.dispatch_pending, true, 'not handed over: still findable');
  const credit = async () => (await svc.admin('GET', `/accounts/${accountId}`)).body.credit_czk as number;
  assert.equal(await credit(), 10 - 2 * 0.9, 'charged at the commit');

  await svc.sql(`UPDATE messages SET created_at = created_at - interval '1 minute' WHERE id = $1`, [id]);
  await svc.sql(`UPDATE recipients SET created_at = created_at - interval '1 minute' WHERE message_id = $1`, [id]);
  assert.ok((await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 })).dispatch >= 1);
  const recovered = await svc.runtime.queues.dispatchQueue('sms', 'promotional').getJob(callJobId(res.body.request_id));
  assert.ok(recovered);
  await svc.runtime.engine.dispatch(recovered.data);
  await waitFor(async () => (await attempts()).every((a) => a.state === 'delivered' && a.handed), 10_000, 'delivered');
  // A third run finds everything done: no attempt, event, charge or hand-over more.
  await svc.runtime.engine.dispatch(recovered.data);
  assert.equal((await attempts()).length, 2);
  const events = await svc.sql<{ result: string; n: number }>(
    `SELECT e.body::json->>'result' AS result, count(*)::int AS n FROM events e JOIN recipients r ON r.id = e.recipient_id
      WHERE r.message_id = $1 GROUP BY 1 ORDER BY 1`, [id]);
  assert.deepEqual(events, [{ result: 'delivered', n: 2 }, { result: 'sending', n: 2 }, { result: 'sent', n: 2 }]);
  assert.equal(await credit(), 10 - 2 * 0.9, 'charged once');
  const carried = await svc.sql<{ n: number }>(
    `SELECT count(*)::int AS n FROM sandbox_messages WHERE recipient_id LIKE $1`, [`${id}-%`]);
  assert.equal(carried[0]!.n, 2, 'each attempt carried once');
  const [cleared] = await svc.sql<{ dispatch_pending: boolean }>('SELECT dispatch_pending FROM messages WHERE id = $1', [id]);
  assert.equal(cleared!.dispatch_pending, false);
  assert.deepEqual(await svc.sql('SELECT 1 FROM recipients WHERE message_id = $1 AND due_at IS NOT NULL', [id]), []);
});

test('a later flow step stays findable by its due_at until it is handed over', async () => {
  const { apiKey } = await svc.createAccount();
  // Not a Viber user (…04): the Viber step ends undelivered and the SMS step is due at once.
  const res = await svc.request('POST', '/v2/messages', {
    body: [{ body: 'fallback', to: [{ phone_number: '420777400504' }], flow: [{ viber: { sender: 'Shop' } }, { sms: {} }] }],
    headers: { 'x-api-key': apiKey },
  });
  const id = res.body.accepted[0].message_id as string;
  const job = await waitFor(async () => (await svc.runtime.queues.dispatchQueue('viber', 'promotional').getJobs(['waiting', 'prioritized']))[0], 5_000, 'viber job');
  await job.remove();
  await svc.runtime.engine.dispatch(job.data);
  const [rcpt] = await waitFor(async () => {
    const rows = await svc.sql<{ id: number; step: number; due: boolean }>('SELECT id, step, due_at IS NOT NULL AS due FROM recipients WHERE message_id = $1', [id]);
    return rows[0]?.step === 1 ? rows : null;
  }, 5_000, 'moved to the sms step');
  assert.equal(rcpt!.due, true, 'the sms step is due and findable');
  const smsQueue = svc.runtime.queues.dispatchQueue('sms', 'promotional');
  const smsJob = await smsQueue.getJob(recipientJobId(Number(rcpt!.id), 1));
  assert.ok(smsJob, 'the next step was enqueued');
  await smsJob.remove();
  await svc.runtime.engine.dispatch(smsJob.data);
  const [after] = await svc.sql<{ due: boolean }>('SELECT due_at IS NOT NULL AS due FROM recipients WHERE message_id = $1', [id]);
  assert.equal(after!.due, false, 'handed over: nothing left for the sweep');
  const [state] = await waitFor(async () => {
    const rows = await svc.sql<{ state: string; channel: string }>('SELECT state, channel FROM recipient_states WHERE message_id = $1', [id]);
    return rows[0]?.state === 'delivered' ? rows : null;
  }, 5_000, 'delivered over sms');
  assert.deepEqual(state, { state: 'delivered', channel: 'sms' });
});

test('a job that failed for good during a long outage is replaced by the sweep, not left under its id', async () => {
  const { apiKey } = await svc.createAccount();
  const later = new Date(Date.now() + 3600_000).toISOString();
  const res = await svc.request('POST', '/v2/message', {
    body: { body: 'scheduled', datetime: later, to: [{ phone_number: '420777401000' }] }, headers: { 'x-api-key': apiKey },
  });
  assert.equal(res.status, 200);
  const id = res.body.accepted[0].message_id as string;
  const [recipient] = await svc.sql<{ message_id: string }>('SELECT message_id FROM recipients WHERE public_id = $1', [id]);
  const messageId = recipient!.message_id;
  const queue = svc.runtime.queues.dispatchQueue('sms', 'promotional');
  const jobId = messageJobId(messageId, 0);
  // The job fails for good (its retries ran out while Postgres was down).
  await queue.remove(jobId);
  await queue.add('dispatch', { step: 0, messages: [{ messageId, recipientIds: [1] }] }, { jobId, attempts: 1 });
  const { Worker } = await import('bullmq');
  const failing = new Worker(queue.name, async () => {
    throw new Error('database unavailable');
  }, { connection: svc.runtime.queues.connection, prefix: svc.prefix });
  await waitFor(async () => (await queue.getJobState(jobId)) === 'failed', 10_000, 'job failed');
  await failing.close();

  // Its time came long ago: the sweep finds the recipient and replaces the failed job.
  await svc.sql(`UPDATE recipients SET due_at = now() - interval '1 hour' WHERE public_id = $1`, [id]);
  const swept = await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 });
  assert.equal(swept.replaced, 1);
  assert.ok(['waiting', 'prioritized'].includes(await queue.getJobState(jobId)), 'a live job again');
  const job = await queue.getJob(jobId);
  assert.deepEqual(job!.data.messages[0]!.messageId, messageId);
  await queue.remove(jobId);
});

test('a call\'s job still waiting in a backlog is not run twice: the sweep adds nothing beside it', async () => {
  const { apiKey } = await svc.createAccount();
  const res = await svc.request('POST', '/v2/messages', {
    body: [{ body: 'backlog', to: [{ phone_number: '420777400500' }] }, { body: 'backlog too', to: [{ phone_number: '420777400600' }] }],
    headers: { 'x-api-key': apiKey },
  });
  assert.equal(res.status, 200);
  const queue = svc.runtime.queues.dispatchQueue('sms', 'promotional');
  await queue.obliterate({ force: true });
  await svc.request('POST', '/v2/messages', { body: [{ body: 'again', to: [{ phone_number: '420777400700' }] }], headers: { 'x-api-key': apiKey } });
  // The first call's job is still waiting (re-added as it was), its messages pending for a minute.
  const ids = res.body.accepted.map((a: { message_id: string }) => a.message_id) as string[];
  const recipientIds = (await svc.sql<{ id: number; message_id: string }>('SELECT id, message_id FROM recipients WHERE message_id = ANY($1) ORDER BY id', [ids]));
  await queue.add('dispatch', { step: 0, messages: ids.map((m) => ({ messageId: m, recipientIds: recipientIds.filter((r) => r.message_id === m).map((r) => Number(r.id)) })) },
    { jobId: callJobId(res.body.request_id) });
  await svc.sql(`UPDATE messages SET created_at = created_at - interval '1 minute' WHERE id = ANY($1)`, [ids]);
  await svc.sql(`UPDATE recipients SET created_at = created_at - interval '1 minute' WHERE message_id = ANY($1)`, [ids]);
  const swept = await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 });
  assert.ok(swept.dispatch >= 2, 'both messages found');
  const theirs = (await queue.getJobs(['waiting', 'prioritized', 'delayed', 'active']))
    .filter((j) => j.data.messages.some((m) => ids.includes(m.messageId)));
  assert.deepEqual(theirs.map((j) => j.id), [callJobId(res.body.request_id)], 'no second job for them');
  await queue.obliterate({ force: true });
});

test('a pending webhook batch whose holder is gone is queued at once; a live holder\'s waits the minute', async () => {
  const { accountId } = await svc.createAccount();
  const prefix = svc.runtime.config.redisPrefix;
  const redis = svc.runtime.redis;
  const webhooks = svc.runtime.queues.webhooks;
  // A live holder (its key renewed, as the relay's process keeps it) and one that was killed.
  const live = new BatchHolder(redis, prefix, svc.runtime.logger);
  live.start();
  await waitFor(async () => (await redis.exists(holderKey(prefix, live.id))) === 1, 5_000, 'the live holder\'s key');
  const inserted: number[] = [];
  const insert = async (holder: string | null, agoSeconds: number): Promise<number> => {
    const [row] = await svc.sql<{ id: string }>(
      `INSERT INTO webhook_batches (webhook_id, account_id, url, event_ids, holder, updated_at)
       VALUES ($1, $2, 'http://127.0.0.1:9/hook', '{1}', $3, now() - make_interval(secs => $4)) RETURNING id`,
      [`msg_holder_${inserted.length}`, accountId, holder, agoSeconds]);
    inserted.push(Number(row!.id));
    return Number(row!.id);
  };
  const queued = async (ids: number[]) => Promise.all(ids.map(async (id) => (await webhooks.getJob(webhookJobId(id))) !== undefined));
  const sweep = (liveOf: (ids: string[]) => Promise<Set<string>>) =>
    sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3, liveHolders: liveOf, confirmGoneMs: 50 });
  const fromRedis = (ids: string[]) => liveHolders(redis, prefix, ids);
  try {
    const deadRecent = await insert('gone-host:1:0000', 20);
    const liveRecent = await insert(live.id, 20);
    const queuedRecent = await insert(null, 20);
    const deadYoung = await insert('gone-host:1:0000', 2);
    const liveStale = await insert(live.id, 70);

    // The keys cannot be read: every holder counts as alive, stale batches are still queued.
    const unread = await sweep(async () => { throw new Error('CLUSTERDOWN'); });
    assert.equal(unread.webhooks, 1);
    assert.deepEqual(await queued([liveStale, deadRecent]), [true, false]);
    // A key missing at the first look and back at the second (Redis lost it; the holder wrote it
    // again): its holder is alive.
    let looks = 0;
    await sweep(async (ids) => (++looks === 1 ? new Set<string>() : new Set(ids)));
    assert.equal(looks, 2, 'looked again');
    assert.deepEqual(await queued([deadRecent]), [false]);

    const swept = await sweep(fromRedis);
    assert.deepEqual(await queued([deadRecent, liveStale]), [true, true], 'a gone holder\'s batch at once, any batch after a minute');
    assert.deepEqual(await queued([liveRecent, queuedRecent, deadYoung]), [false, false, false],
      'a live holder\'s batch, one without a holder and one younger than the grace stay as they are');
    assert.equal(swept.webhooks, 2);

    // A graceful stop deletes the key: the holder's batches no longer wait the minute.
    await live.stop();
    assert.equal(await redis.exists(holderKey(prefix, live.id)), 0);
    await sweep(fromRedis);
    assert.deepEqual(await queued([liveRecent]), [true]);

    // 5,000 stale batches waiting (a receiver down) do not hide a recent one whose holder is gone.
    await webhooks.obliterate({ force: true });
    await svc.sql('DELETE FROM webhook_batches WHERE id = ANY($1)', [inserted]);
    await svc.sql(
      `INSERT INTO webhook_batches (webhook_id, account_id, url, event_ids, updated_at)
       SELECT 'msg_backlog_' || n, $1, 'http://127.0.0.1:9/backlog', '{1}', now() - interval '10 minutes' FROM generate_series(1, 5000) n`,
      [accountId]);
    const behind = await insert('gone-host:2:0000', 20);
    const backlog = await sweep(fromRedis);
    assert.equal(backlog.webhooks, 5001);
    assert.deepEqual(await queued([behind]), [true]);
  } finally {
    await live.stop();
    await webhooks.obliterate({ force: true });
    await svc.sql(`DELETE FROM webhook_batches WHERE id = ANY($1) OR webhook_id LIKE 'msg_backlog_%'`, [inserted]);
  }
});
