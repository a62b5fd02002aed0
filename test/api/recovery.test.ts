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

  await svc.sql(`UPDATE recipients SET due_at = now() - interval '1 minute' WHERE message_id = $1`, [id]);
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
});
