/**
 * A change to the routing configuration (carrier connections, their routes, prices) applies to
 * every message accepted after the admin API answered, in every process. The service runs as
 * `web` (the admin API) and a separate `worker --pools=sms,status` process dispatches, as the
 * Procfile runs them. The worker learns of a change from the stored version its dispatch batches
 * read (migration 027), not only at its periodic refresh (every 5 s): without that, a message sent
 * right after a connection was stored ended `[303] No route`, was charged the old price, or was
 * handed to a connection already deleted.
 */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { SmscSimulator } from '../../scripts/smsc-simulator.js';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { startWorkerProcess, stopWorkerProcess, type WorkerProcess } from '../support/worker-process.js';

let sim: SmscSimulator;
let svc: TestService;
let worker: WorkerProcess;
let apiKey: string;
let port: number;

before(async () => {
  sim = new SmscSimulator({ systemId: 'sb', password: 'pw', receiptDelayMs: 20 });
  ({ port } = await sim.start());
  svc = await startTestService({ role: 'web', env: { SANDBOX: '0' } });
  worker = startWorkerProcess(svc, ['--pools=sms,status'], { SANDBOX: '0' });
  ({ apiKey } = await svc.createAccount());
  const priced = await svc.admin('PUT', '/prices', [{ channel: 'sms', prefix: '', price_czk: 1, price_eur: 0.04 }]);
  assert.equal(priced.status, 200, priced.text);
});

after(async () => {
  await stopWorkerProcess(worker);
  await svc?.stop();
  await sim?.stop();
});

interface AttemptRow {
  carrier: string;
  state: string;
  result_info: string;
  charged: string;
}

/** Sends one SMS and waits until its attempt is written and has left `sending` (or was handed and sent). */
async function sendAndSettle(phone: string, until: (a: AttemptRow) => boolean): Promise<AttemptRow> {
  const sent = await svc.request('POST', '/v2/message', {
    headers: { 'x-api-key': apiKey }, body: { body: 'Routing', to: [{ phone_number: phone }] },
  });
  assert.equal(sent.status, 200, sent.text);
  const id = sent.body.accepted[0].message_id as string;
  try {
    return await waitFor(async () => {
      const rows = await svc.sql<AttemptRow>(
        `SELECT a.carrier, a.state, a.result_info, a.charged::text AS charged
           FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1`, [id]);
      return rows[0] && until(rows[0]) ? rows[0] : null;
    }, 20_000, `the attempt of ${phone}`);
  } catch (err) {
    const rows = await svc.sql<AttemptRow>(
      'SELECT a.carrier, a.state, a.result_info FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1', [id]);
    throw new Error(`${(err as Error).message}: ${JSON.stringify(rows)}\n${worker.output.join('')}`);
  }
}

it('routes, prices and stops routing by a change from the moment the admin API answered it, in another process', { timeout: 90_000 }, async () => {
  // No connection yet: the worker runs and refuses the destination.
  const unrouted = await sendAndSettle('420777100010', (a) => a.state !== 'sending');
  assert.equal(unrouted.state, 'rejected');
  assert.match(unrouted.result_info, /^\[303\] No route/);

  // A connection for 420 and a new price, then a message at once (the worker's periodic refresh
  // is seconds away).
  const created = await svc.admin('POST', '/carriers', {
    name: 'main', kind: 'smpp', config: { url: `smpp://sb:pw@127.0.0.1:${port}?window=10` }, routes: ['420'],
  });
  assert.equal(created.status, 201, created.text);
  const repriced = await svc.admin('PUT', '/prices', [{ channel: 'sms', prefix: '420', price_czk: 2.5, price_eur: 0.1 }]);
  assert.equal(repriced.status, 200, repriced.text);
  const routed = await sendAndSettle('420777100020', (a) => a.state === 'delivered' || a.state === 'rejected');
  assert.equal(routed.state, 'delivered', JSON.stringify(routed));
  assert.equal(routed.carrier, 'smpp.main');
  assert.equal(Number(routed.charged), 2.5, 'charged the price stored before the message was accepted');
  assert.equal(sim.submitted.filter((s) => s.destination_addr === '420777100020').length, 1);

  // Deleted: a message right after is refused, not handed to the retired connection.
  const deleted = await svc.admin('DELETE', '/carriers/main');
  assert.equal(deleted.status, 200, deleted.text);
  const afterDelete = await sendAndSettle('420777100030', (a) => a.state !== 'sending');
  assert.equal(afterDelete.state, 'rejected', JSON.stringify(afterDelete));
  assert.match(afterDelete.result_info, /^\[303\] No route/);
  assert.equal(sim.submitted.filter((s) => s.destination_addr === '420777100030').length, 0);
});
