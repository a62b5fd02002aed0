/**
 * A WhatsApp worker paused (SIGSTOP: a VM pause, a container frozen, a debugger) past its dispatch
 * job's lock while it hands the job's attempts to Meta over a capped business number. Another
 * worker takes the job over and sends what Meta had not taken (what it took is found in Redis and
 * not sent again); when the paused one wakes, its run no longer holds the job (`RunLease`) and it
 * sends nothing more of it (`OutboundAttempt.hold`, read before each first try's token and request).
 * Real processes on loopback (two `switchboard worker --pools=whatsapp`, the web in this process),
 * the Graph API simulator over HTTP, the per-number cap shared through Redis.
 *
 * Without the hold, the woken worker went on through every attempt still waiting for a token, and
 * Meta got each of them twice.
 */
import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { startWhatsappSimulator, type WhatsappSimulator } from '../../scripts/sim/whatsapp/simulator.js';
import { processesRunningMain, whatsappConnection } from '../support/whatsapp-connection.js';
import { WhatsappCarrier, WhatsappHoldLapsed } from '../../shared/carriers/whatsapp/carrier.js';
import { GraphClient } from '../../shared/carriers/whatsapp/graph.js';
import type { StatusReport } from '../../shared/carriers/types.js';
import type { WhatsappTemplateAttempt } from '../../shared/channels/index.js';
import { createLogger } from '../../shared/logger.js';
import { createRedis, type Redis } from '../../shared/redis.js';
import { startOwnRedis } from '../support/own-redis.js';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { startWorkerProcess, stopWorkerProcess, type WorkerProcess } from '../support/worker-process.js';

const CAP = 5;
const RECIPIENTS = 60;
const PN = '106540352242923';

let sim: WhatsappSimulator;
let svc: TestService;
const workers: WorkerProcess[] = [];

before(async () => {
  // No webhooks: what reaches "Meta" is what is counted.
  sim = await startWhatsappSimulator({ callbackUrl: '' });
  svc = await startTestService({ role: 'web', env: { SANDBOX: '0', WHATSAPP_GRAPH_URL: sim.url } });
});

after(async () => {
  for (const w of workers) w.child.kill('SIGCONT');
  await Promise.all(workers.map(stopWorkerProcess));
  await svc?.stop();
  await sim?.stop();
});

/** A worker of the WhatsApp pool (every lane) with a 2 s dispatch lock; resolves once it runs the connection. */
async function startWorker(): Promise<WorkerProcess> {
  const before = await processesRunningMain(svc);
  const w = startWorkerProcess(svc, ['--pools=whatsapp', '--lanes=transactional,promotional'], { WHATSAPP_GRAPH_URL: sim.url, SANDBOX: '0', DISPATCH_LOCK_MS: '2000' });
  workers.push(w);
  try {
    await waitFor(async () => (await processesRunningMain(svc)) > before, 40_000, 'the worker running the connection');
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${w.output.join('')}`);
  }
  return w;
}

/**
 * A carrier of its own in this process (connection `name`, `mps` per number) for PN, with a sink
 * that records the reports; `redis` is the service's unless given.
 */
function ownCarrier(name: string, mps: number, redis: Redis = svc.runtime.redis): { carrier: WhatsappCarrier; reports: StatusReport[] } {
  const reports: StatusReport[] = [];
  const carrier = new WhatsappCarrier({
    connection: name, graph: new GraphClient({ baseUrl: sim.url }), perNumberMps: mps, db: svc.runtime.db, redis,
    redisPrefix: `${svc.prefix}:${name}`, logger: createLogger('silent'),
    sink: {
      report: async (r: StatusReport[]) => {
        reports.push(...r);
        return true;
      },
      inbound: async () => undefined,
      registered: async () => [],
    } as never,
  });
  carrier.setSenders([{ accountId: 1, sender: PN, credentials: { access_token: 'sim-system-user-token' }, details: {} }] as never);
  return { carrier, reports };
}

/** A template attempt to `to` for PN under `hold`. */
const templateAttempt = (attemptId: number, to: string, hold: { held(): boolean }): WhatsappTemplateAttempt => ({
  attemptId, recipientPublicId: `t-${attemptId}`, accountId: 1, to, sender: PN, text: '', ttlMinutes: 10,
  channel: 'whatsapp_template', template: { templateName: 'hello_world' }, hold,
});

it('a WhatsApp worker paused past its job lock sends nothing more of the job once it wakes; the one that took it over sends the rest once', { timeout: 120_000 }, async (t) => {
  const { apiKey } = await whatsappConnection(svc, sim, CAP, PN);

  // The first worker alone takes the job: the one paused below is the one sending.
  const first = await startWorker();
  // Numbers ending in x0: the simulator accepts them at once. One call of objects of 10: one dispatch job.
  const phones = Array.from({ length: RECIPIENTS }, (_, i) => `42077791${String(i).padStart(3, '0')}0`);
  const res = await svc.request('POST', '/v2/messages', {
    body: Array.from({ length: RECIPIENTS / 10 }, (_, k) => ({
      flow: [{ whatsapp_template: { sender: PN, template_name: 'hello_world' } }],
      to: phones.slice(10 * k, 10 * k + 10).map((phone_number) => ({ phone_number })),
    })),
    headers: { 'x-api-key': apiKey },
  });
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.rejected.length, 0, res.text);
  // Past the first requests, whose answers a new process is slow to get and record: paused among
  // them on a machine loaded with two busy loops, all were sent again (3 of 3, in three runs of three).
  await waitFor(() => sim.messages({ limit: 1000 }).length >= CAP + 3, 20_000, 'the first sends');
  // Paused while it sends at the cap (CAP a second: RECIPIENTS / CAP s in all), with most to go.
  first.child.kill('SIGSTOP');
  const atPause = sim.messages({ limit: 1000 }).length;
  assert.ok(atPause < RECIPIENTS - 2 * CAP, `paused with work left (${atPause} of ${RECIPIENTS} sent)`);
  // Meanwhile the lock lapses (2 s); the second worker starts and its stalled-job check gives it
  // the job: it sends what Meta had not taken. The pause lasts until it has sent a few.
  const second = await startWorker();
  await waitFor(() => sim.messages({ limit: 1000 }).length >= atPause + CAP, 30_000, 'the second worker resuming');
  first.child.kill('SIGCONT');
  await waitFor(() => new Set(sim.messages({ limit: 1000 }).map((m) => m.to)).size >= RECIPIENTS, 40_000, 'every recipient sent');
  // Quiet for two tokens' worth and more: anything the woken worker still had queued would go now.
  await new Promise((r) => setTimeout(r, 3_000));

  const perPhone = new Map<string, number>();
  for (const m of sim.messages({ limit: 1000 })) perPhone.set(m.to, (perPhone.get(m.to) ?? 0) + 1);
  assert.equal(perPhone.size, RECIPIENTS, 'every recipient sent');
  let twice = 0;
  for (const n of perPhone.values()) twice += n - 1;
  // What both may send: a request the paused worker had made, whose answer (and its record in
  // Redis) came after the pause: at most one token's worth. Nothing after it woke.
  t.diagnostic(`paused at ${atPause} of ${RECIPIENTS} sent; ${twice} sent twice`);
  assert.ok(twice <= 2, `${twice} sent twice (paused at ${atPause} of ${RECIPIENTS})`);
  assert.ok(first.output.join('').includes('dispatch run stopped: its job lock was not renewed in time'), 'the woken worker says why it stopped');
  const [attempts] = await svc.sql<{ n: number; refs: number }>(
    `SELECT count(*)::int AS n, (SELECT count(DISTINCT attempt_id)::int FROM carrier_refs) AS refs FROM attempts`);
  assert.deepEqual(attempts, { n: RECIPIENTS, refs: RECIPIENTS }, 'one attempt (one charge) per recipient, each with its wamid');
  assert.equal(second.child.exitCode, null, 'the second worker still runs');
});

/**
 * The same job run twice in one process (BullMQ gave it again to the worker whose first run still
 * lives): the later run hands the attempts the earlier one is sending, and waits for them. When the
 * earlier run's hold lapses, an attempt the later run handed too goes on that run's hold; one that
 * no live run holds goes back, and both runs fail (their jobs are retried; nothing is lost).
 */
it('a later run of the same job in one process lends its hold to the attempts it finds in flight, and fails with them when it has none', { timeout: 60_000 }, async () => {
  // One message every 4 s: whichever attempt takes the first token goes at once, the other waits
  // about 4 s, time enough for the later run to start on a loaded machine.
  const { carrier, reports } = ownCarrier('join', 0.25);
  const phone = (attemptId: number) => `4207779200${attemptId}0`;
  const attempt = (attemptId: number, hold: { held(): boolean }) => templateAttempt(attemptId, phone(attemptId), hold);
  const sentTo = (id: number) => sim.messages({ to: phone(id), limit: 10 }).length;
  try {
    for (const laterHolds of [true, false]) {
      const pair = laterHolds ? [1, 2] : [3, 4];
      // The earlier run's hold lapses the moment Meta has one of its attempts (the two pacers race
      // for the first token, either may win), however late the test's poll below notices.
      const earlier = { held: () => pair.every((id) => sentTo(id) === 0) };
      const later = { held: () => laterHolds };
      const first = carrier.send(pair.map((id) => attempt(id, earlier)));
      await waitFor(() => pair.some((id) => sentTo(id) === 1), 10_000, 'the first send').catch((err: Error) => {
        throw new Error(`${err.message}: ${JSON.stringify(reports)} ${JSON.stringify(sim.messages({ limit: 5 }))}`);
      });
      // The attempt still waiting for its token, handed again by the later run.
      const waiting = pair.find((id) => sentTo(id) === 0)!;
      const second = carrier.send([attempt(waiting, later)]);
      const [r1, r2] = await Promise.allSettled([first, second]);
      if (laterHolds) {
        assert.deepEqual([r1.status, r2.status], ['fulfilled', 'fulfilled'], 'both runs done');
        assert.equal(sentTo(waiting), 1, 'sent once, on the later run\'s hold');
        assert.equal(reports.filter((r) => r.attemptId === waiting).length, 1, 'reported once');
      } else {
        assert.equal(r1.status, 'rejected');
        assert.ok(r1.status === 'rejected' && r1.reason instanceof WhatsappHoldLapsed, 'the earlier run gave it back');
        assert.equal(r2.status, 'rejected', 'the later run fails with it: its job is retried');
        assert.equal(sentTo(waiting), 0, 'not sent');
        assert.equal(reports.filter((r) => r.attemptId === waiting).length, 0, 'nothing reported');
      }
    }
  } finally {
    await carrier.close();
  }
});

/**
 * A first try whose token could not be taken (the cap's Redis did not answer) is retried by the
 * carrier itself: the call resolves, the engine records the hand-over and the run ends, its hold
 * lapsing soon after. The retry is not a first try: it goes whatever the hold says.
 */
it('a retry after the cap\'s Redis failed the first try is the carrier\'s own: it goes after the run\'s hold lapsed', { timeout: 60_000 }, async () => {
  const own = await startOwnRedis();
  const redis = createRedis(own.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0 });
  redis.on('error', () => undefined);
  const { carrier } = ownCarrier('retry', 10, redis);
  const to = '420777930010';
  let held = true;
  try {
    await waitFor(() => redis.status === 'ready', 10_000, 'the client connected');
    await own.stop();
    await carrier.send([templateAttempt(9301, to, { held: () => held })]);
    assert.equal(carrier.pendingRetries, 1, 'the try that found no Redis waits as a retry; the call is done');
    held = false; // the run has ended: its lease is no longer renewed
    await own.start();
    await waitFor(() => sim.messages({ to, limit: 10 }).length === 1, 20_000, 'the retry sent');
  } finally {
    await carrier.close();
    redis.disconnect();
    await own.remove();
  }
});

/**
 * A later run that joined an attempt which then waits for a retry (Meta throttled it) while the
 * earlier run still sends others is done when the earlier run is: the retry's own entry does not
 * take the earlier run's place for it.
 */
it('a run that joined an attempt being retried is done when the run it joined is', { timeout: 60_000 }, async () => {
  const { carrier } = ownCarrier('joinretry', 1);
  const held = { held: () => true };
  const attempt = (attemptId: number, to: string) => templateAttempt(attemptId, to, held);
  // …06: Meta throttles it twice (130429), then takes it; the others go at one a second.
  const throttled = attempt(9401, '420777940006');
  try {
    const earlier = carrier.send([throttled, attempt(9402, '420777940010'), attempt(9403, '420777940020'), attempt(9404, '420777940030')]);
    const later = carrier.send([throttled]);
    const outcome = await Promise.race([
      Promise.all([earlier, later]).then(() => 'done'),
      new Promise((resolve) => setTimeout(() => resolve('still waiting'), 30_000).unref()),
    ]);
    assert.equal(outcome, 'done');
    // The simulator records the refused tries too.
    const taken = () => sim.messages({ to: throttled.to, limit: 10 }).filter((m) => !m.error);
    await waitFor(() => taken().length === 1, 20_000, 'the throttled one taken on a retry');
    await new Promise((r) => setTimeout(r, 1_500));
    assert.equal(taken().length, 1, 'taken once');
  } finally {
    await carrier.close();
  }
});
