/**
 * The per-connection throughput cap holds across worker processes: the service runs as `web`
 * (it never binds), and two separate `worker --pools=sms,status` processes share its database and
 * Redis prefix, each bound to the simulator. The simulator must never see more than tps (+ a
 * tolerance for scheduling delay) submit_sm in any one-second window, although both processes
 * send. The cap's accuracy and its Redis cost are measured in smpp-tps-lease.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { SmscSimulator } from '../../scripts/smsc-simulator.js';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { startWorkerProcess, stopWorkerProcess, type WorkerProcess } from '../support/worker-process.js';
import { worstWindow } from '../support/rates.js';

const TPS = 20;

let sim: SmscSimulator;
let svc: TestService;
let smppUrl: string;
const workers: WorkerProcess[] = [];

before(async () => {
  sim = new SmscSimulator({ systemId: 'sb', password: 'pw', receiptDelayMs: 20 });
  const { port } = await sim.start();
  smppUrl = `smpp://sb:pw@127.0.0.1:${port}?window=10&tps=${TPS}`;
  svc = await startTestService({ role: 'web', env: { SMPP_URL: smppUrl, SANDBOX: '0' } });
  const startWorker = () => startWorkerProcess(svc, ['--pools=sms,status'], { SMPP_URL: smppUrl, SANDBOX: '0' });
  workers.push(startWorker(), startWorker());
});

after(async () => {
  await Promise.all(workers.map((w) => stopWorkerProcess(w)));
  await svc?.stop();
  await sim?.stop();
});

it(`never exceeds tps=${TPS} per second across two worker processes`, { timeout: 80_000 }, async () => {
  assert.equal(sim.boundSessions, 0, 'the web process does not bind');
  try {
    await waitFor(() => sim.boundSessions === 2, 30_000, 'both worker processes bound');
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${workers.map((w) => w.output.join('')).join('\n---\n')}`);
  }
  const { apiKey } = await svc.createAccount();
  const phones = Array.from({ length: 100 }, (_, i) => `4207779${String(i).padStart(4, '0')}9`);
  // Ten calls, so ten dispatch jobs that the two worker processes share (one call's objects travel as one job).
  const responses = await Promise.all(Array.from({ length: 10 }, (_, k) => svc.request('POST', '/v2/messages', {
    body: [{
      body: `Rate ${k}`,
      flow: [{ sms: { sender: 'Switchboard' } }],
      to: phones.slice(k * 10, k * 10 + 10).map((phone_number) => ({ phone_number })),
    }],
    headers: { 'x-api-key': apiKey },
  })));
  for (const res of responses) {
    assert.equal(res.status, 200, res.text);
  }

  await waitFor(() => sim.submitted.length >= 100, 40_000, 'all submits');
  const times = sim.submitted.map((r) => r.receivedAt).sort((a, b) => a - b);
  const worst = worstWindow(times);
  const span = times[times.length - 1]! - times[0]!;
  // The cap holds for the times tokens are spent (at most TPS in any second plus a 20 ms guard,
  // on the Redis clock). Arrivals here also carry each process's scheduling delay between taking a
  // token and the SMSC reading the PDU: on a machine busy with other test files (load 14 on two
  // cores), PDUs read 50-100 ms late land beside the next ones (seen: 23 and 24 in one second;
  // smpp-tps-lease.test.ts checks the times tokens are taken exactly). The window bound
  // therefore allows half a second of lateness, which still fails a cap kept per process (2 x
  // TPS in a second); the span below checks the average rate, which lateness cannot raise (a
  // per-process cap would finish in about half the span).
  assert.ok(worst <= TPS + TPS / 2, `at most ${TPS}+${TPS / 2} submits in any second, saw ${worst}`);
  assert.ok(span >= ((100 - TPS - 2) / TPS) * 1000, `100 submits spread over ${span} ms`);
  const sessions = new Set(sim.submitted.map((r) => r.sessionId));
  assert.equal(sessions.size, 2, 'both processes sent');
  assert.equal(sim.submitted.length, 100, 'nothing sent twice');

  // Receipts come back over either bind and are applied by either process's status pool.
  await waitFor(async () => {
    const [row] = await svc.sql<{ n: number }>(`SELECT count(*)::int AS n FROM recipient_states WHERE state = 'delivered'`);
    return row?.n === 100;
  }, 20_000, 'all delivered');
});
