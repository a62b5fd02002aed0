/**
 * The sandbox keeps its pending outcomes across a restart (issue 22): a process stopped between a
 * message's `sent` and its scripted `delivered` loses the timer, and the next process to start
 * replays what is overdue. A report replayed twice changes nothing.
 */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { startRuntime } from '../../services/runtime.js';
import { createLogger } from '../../shared/logger.js';
import { startTestService, waitFor, type TestService } from '../support/harness.js';

let svc: TestService;
let apiKey: string;

before(async () => {
  svc = await startTestService({ env: { SANDBOX_SLOW_DELIVERY_MS: '1500' } });
  ({ apiKey } = await svc.createAccount());
});

after(async () => {
  await svc?.stop();
});

const stateOf = async (id: string) => (await svc.sql<{ state: string }>(
  'SELECT a.state FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1', [id]))[0]?.state;

it('a message whose outcome was pending when its process stopped reaches it after the next start', { timeout: 30_000 }, async () => {
  const res = await svc.request('POST', '/v2/message', {
    headers: { 'x-api-key': apiKey }, body: { body: 'Slow', to: [{ phone_number: '420777123404' }, { phone_number: '420777123400' }] },
  });
  assert.equal(res.status, 200, res.text);
  const [slow, fast] = res.body.accepted.map((a: { message_id: string }) => a.message_id) as [string, string];
  await waitFor(async () => (await stateOf(slow)) === 'sent', 10_000, 'slow: sent');
  await waitFor(async () => (await stateOf(fast)) === 'delivered', 10_000, 'fast: delivered');
  // SIGTERM's drain: the pending timer of the slow one dies with the process.
  await svc.runtime.stop();
  const [row] = await svc.sql<{ pending: boolean }>('SELECT pending FROM sandbox_messages s JOIN recipients r ON r.public_id = s.recipient_id WHERE r.public_id = $1', [slow]);
  assert.equal(row?.pending, true);
  assert.equal(await stateOf(slow), 'sent', 'not delivered while no process runs');

  const again = await startRuntime({ role: 'all', config: svc.config, logger: createLogger('silent') });
  try {
    await waitFor(async () => (await stateOf(slow)) === 'delivered', 15_000, 'slow: delivered after the restart');
    await waitFor(async () => (await svc.sql('SELECT 1 FROM sandbox_messages WHERE pending')).length === 0, 5_000, 'nothing pending');
    const events = await svc.sql<{ n: number }>(
      `SELECT count(*)::int AS n FROM events WHERE recipient_id = (SELECT id FROM recipients WHERE public_id = $1) AND body::jsonb ->> 'result' = 'delivered'`, [slow]);
    assert.equal(events[0]!.n, 1, 'delivered exactly once');
  } finally {
    await again.stop();
    svc.runtime.stop = async () => undefined; // already stopped; the harness stops it again
  }
});
