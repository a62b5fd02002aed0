/**
 * Accepted work survives Redis losing it: Postgres is the record, and the recovery sweep
 * re-enqueues recipients that are due but have no job (here: every queue was emptied between
 * the 200 and the first dispatch).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { sweepOnce } from '../../workers/recovery.js';
import { dispatchJobId } from '../../shared/queues.js';

let svc: TestService;
before(async () => {
  // The web role only: nothing consumes the queues until the test starts the workers itself.
  svc = await startTestService({ role: 'web' });
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
  const job = await queue.getJob(dispatchJobId(id, 0));
  assert.ok(job, 'the job is back under its deterministic id');
  assert.deepEqual(job.data.messages[0]!.recipientIds.length, 2);
  // A second sweep does not duplicate a job that exists.
  await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 });
  assert.equal(await queue.count(), 1);

  // A dispatch worker (another process in production) runs the recovered job: the attempts start.
  await svc.runtime.engine.dispatch(job.data);
  const states = await waitFor(async () => {
    const rows = await svc.sql<{ state: string }>('SELECT state FROM recipients WHERE message_id = $1', [id]);
    return rows.every((r) => r.state !== 'queued') ? rows : null;
  }, 10_000, 'dispatched');
  assert.ok(states.every((r) => r.state === 'sending' || r.state === 'sent' || r.state === 'delivered'));
  const [cleared] = await svc.sql<{ dispatch_pending: boolean }>('SELECT dispatch_pending FROM messages WHERE id = $1', [id]);
  assert.equal(cleared!.dispatch_pending, false, 'starting the recipients clears the flag');
  // Nothing left to sweep.
  assert.equal((await sweepOnce(svc.runtime.db, svc.runtime.queues, { graceMs: 30_000, webhookRetries: 3 })).dispatch, 0);
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
