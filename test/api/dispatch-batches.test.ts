/**
 * Dispatch jobs taken together (`dispatchRuns`, engine/dispatch.ts), against Postgres and Redis:
 * the runs of a batch share one transaction, each keeps its own outcome and its own hold, and a
 * recipient in two runs is written and charged once. The web role only, so nothing consumes the
 * queues: the test takes the jobs acceptance enqueued and runs them itself, as a dispatch pool's
 * batch would (the pool's batching is covered by test/unit/dispatch-batches.test.ts; every
 * test that sends through a full service runs its jobs through it).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, type TestService } from '../support/harness.js';
import { waitForTrail } from '../support/trails.js';
import { callJobId, messageJobId } from '../../shared/engine/dispatch-jobs.js';
import type { DispatchJob } from '../../shared/queues.js';
import type { OutboundAttempt } from '../../shared/carriers/types.js';

let svc: TestService;
let apiKey: string;
let accountId: number;
const handed: OutboundAttempt[] = [];

before(async () => {
  svc = await startTestService({ role: 'web' });
  ({ apiKey, accountId } = await svc.createAccount({ credit_czk: 1000 }));
  // Every attempt as its carrier got it (the verification hook keeps running).
  const engine = svc.runtime.engine;
  const verification = engine.deps.hooks.afterHanded;
  engine.setHooks({
    afterHanded: async (source, attempts) => {
      handed.push(...attempts);
      await verification?.(source, attempts);
    },
  });
});
after(async () => {
  await svc.stop();
});

let next = 0;
/** A call's job as acceptance enqueued it, and its message's id; `at`: a scheduled message's job instead. */
async function acceptedJob(recipients: number, at?: Date): Promise<{ job: DispatchJob; messageId: string }> {
  const to = Array.from({ length: recipients }, () => ({ phone_number: `42077750${String(next++).padStart(3, '0')}0` }));
  const res = await svc.request('POST', '/v2/messages', {
    body: [{ body: 'together', to, ...(at && { datetime: at.toISOString() }) }], headers: { 'x-api-key': apiKey },
  });
  assert.equal(res.status, 200, res.text);
  const messageId = res.body.accepted[0].message_id as string;
  const queue = svc.runtime.queues.dispatchQueue('sms', 'promotional');
  const job = await queue.getJob(at ? messageJobId(messageId, 0) : callJobId(res.body.request_id as string));
  assert.ok(job, 'acceptance enqueued the job');
  await job.remove(); // the test runs it; nothing else will
  return { job: job.data, messageId };
}

const credit = async (): Promise<number> => Number((await svc.sql<{ c: string }>('SELECT credit_czk AS c FROM accounts WHERE id = $1', [accountId]))[0]!.c);
const attemptsOf = (messageId: string) => svc.sql<{ recipient_id: string; charged: string; xmin: string }>(
  `SELECT a.recipient_id, a.charged, a.xmin::text AS xmin FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.message_id = $1 ORDER BY a.recipient_id`,
  [messageId]);
const held = () => ({ held: () => true });

test('runs taken together share one transaction; each has its own outcome, and each attempt its own run\'s hold', async () => {
  const a = await acceptedJob(2);
  const b = await acceptedJob(3);
  const before = await credit();
  const holdA = held();
  const holdB = held();
  let commits = 0;
  const outcomes = await svc.runtime.engine.dispatchRuns(
    [{ job: a.job, delaySelf: false, hold: holdA }, { job: b.job, delaySelf: false, hold: holdB }], 'promotional', () => commits++);
  assert.deepEqual(outcomes, [{ delayUntil: null, handed: 2, rejected: 0 }, { delayUntil: null, handed: 3, rejected: 0 }]);
  assert.equal(commits, 1, 'told once that the transaction committed');

  const rows = [...await attemptsOf(a.messageId), ...await attemptsOf(b.messageId)];
  assert.equal(rows.length, 5);
  assert.equal(new Set(rows.map((r) => r.xmin)).size, 1, 'every attempt written by one transaction');
  const charged = rows.reduce((sum, r) => sum + Number(r.charged), 0);
  assert.ok(charged > 0);
  assert.equal(Math.round((before - await credit()) * 10_000), Math.round(charged * 10_000), 'the credit taken is what the attempts were charged');

  const holdOf = (messageId: string) => new Set(handed.filter((x) => x.recipientPublicId.startsWith(messageId)).map((x) => x.hold));
  assert.deepEqual([...holdOf(a.messageId)], [holdA]);
  assert.deepEqual([...holdOf(b.messageId)], [holdB]);
  for (const [m, n] of [[a.messageId, 2], [b.messageId, 3]] as const) {
    for (let i = 0; i < n; i++) await waitForTrail(svc, `${m}-${i}`, ['sms:sending', 'sms:sent', 'sms:delivered']);
  }
});

test('a recipient in two runs of a batch is written and charged once, by its first run; the batch run again writes nothing', async () => {
  const a = await acceptedJob(2);
  const before = await credit();
  const runs = [{ job: a.job, delaySelf: false }, { job: a.job, delaySelf: false }];
  assert.deepEqual((await svc.runtime.engine.dispatchRuns(runs, 'promotional')).map((o) => o.handed), [2, 0]);
  const rows = await attemptsOf(a.messageId);
  assert.equal(rows.length, 2);
  const charged = rows.reduce((sum, r) => sum + Number(r.charged), 0);
  assert.equal(Math.round((before - await credit()) * 10_000), Math.round(charged * 10_000));
  await waitForTrail(svc, `${a.messageId}-1`, ['sms:sending', 'sms:sent', 'sms:delivered']);
  const settled = await credit();
  assert.deepEqual((await svc.runtime.engine.dispatchRuns(runs, 'promotional')).map((o) => o.handed), [0, 0]);
  assert.equal((await attemptsOf(a.messageId)).length, 2);
  assert.equal(await credit(), settled, 'charged once');
});

test('runs of one message with recipients of their own (later steps\' jobs) each count their own', async () => {
  const a = await acceptedJob(3);
  const [first, ...rest] = a.job.messages[0]!.recipientIds;
  const one = (ids: number[]): DispatchJob => ({ step: 0, messages: [{ messageId: a.messageId, recipientIds: ids }] });
  const outcomes = await svc.runtime.engine.dispatchRuns([{ job: one([first!]), delaySelf: true }, { job: one(rest), delaySelf: true }], 'promotional');
  assert.deepEqual(outcomes.map((o) => o.handed), [1, 2]);
  assert.equal((await attemptsOf(a.messageId)).length, 3);
});

test('a scheduled message\'s run waits for its time while the run beside it goes', async () => {
  const at = new Date(Date.now() + 3_600_000);
  const later = await acceptedJob(1, at);
  const now = await acceptedJob(1);
  const outcomes = await svc.runtime.engine.dispatchRuns([{ job: later.job, delaySelf: true }, { job: now.job, delaySelf: false }], 'promotional');
  assert.ok(outcomes[0]!.delayUntil && Math.abs(outcomes[0]!.delayUntil.getTime() - at.getTime()) < 1000, 'the scheduled one waits until its time');
  assert.equal(outcomes[0]!.handed, 0);
  assert.deepEqual(outcomes[1], { delayUntil: null, handed: 1, rejected: 0 });
  assert.equal((await attemptsOf(later.messageId)).length, 0);
  await waitForTrail(svc, `${now.messageId}-0`, ['sms:sending', 'sms:sent', 'sms:delivered']);
});

test('runs of different steps are never one batch', async () => {
  const a = await acceptedJob(1);
  await assert.rejects(
    svc.runtime.engine.dispatchRuns([{ job: a.job, delaySelf: false }, { job: { ...a.job, step: 1 }, delaySelf: false }], 'promotional'),
    /must be of one step/);
  assert.equal((await attemptsOf(a.messageId)).length, 0, 'nothing written');
});
