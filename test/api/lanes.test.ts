/**
 * `--lanes`: a worker process may serve only some dispatch lanes (the Procfile runs the priority
 * lane in a process of its own).
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startTestService, waitFor, type TestService } from '../support/harness.js';

let svc: TestService;

before(async () => {
  svc = await startTestService({ env: { SANDBOX: '1' }, lanes: ['priority'] });
});
after(async () => {
  await svc.stop();
});

test('a process serving only the priority lane carries priority messages and leaves the other lanes queued', async () => {
  const { apiKey } = await svc.createAccount({ credit_czk: 1000 });
  const send = async (tag: string, phone: string) => {
    const res = await svc.request('POST', '/v2/messages', { body: [{ body: tag, tag, to: [{ phone_number: phone }] }], headers: { 'x-api-key': apiKey } });
    assert.equal(res.status, 200, res.text);
    return `${res.body.accepted[0].message_id}-0`;
  };
  const promo = await send('promotional', '420777310000');
  const otp = await send('priority', '420777310100');
  await waitFor(async () => (await svc.sql(`SELECT 1 FROM sandbox_messages WHERE recipient_id = $1`, [otp])).length === 1, 10_000, 'the priority message carried');
  await new Promise((resolve) => setTimeout(resolve, 300));
  const [row] = await svc.sql<{ state: string }>('SELECT state FROM recipient_states WHERE public_id = $1', [promo]);
  assert.equal(row!.state, 'queued', 'no worker of this process serves the promotional lane');
});

test('an unknown lane is refused at start with the known ones named', () => {
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'bin/switchboard.ts', 'worker', '--lanes=priority,bulk'], { encoding: 'utf8', timeout: 20_000 });
  assert.equal(run.status, 2);
  assert.match(run.stderr, /unknown lanes: bulk \(known: priority, transactional, promotional\)/);
});
