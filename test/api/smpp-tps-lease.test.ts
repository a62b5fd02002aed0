/**
 * The tps cap across processes, measured where it matters: two child processes, each an
 * SmppCarrier bound to the simulator (test/support/smpp-sender-child.ts), share one connection's
 * cap through a private redis-server, whose command counts show what the cap costs.
 *
 * - A binding cap: the submits the SMSC receives never exceed tps in any sliding second, and
 *   their steady rate is within 5 % of it.
 * - A cap that does not bind costs a few lease calls per second per process, not one per submit.
 * - With Redis gone, nothing goes past the leases already held; the waiting attempts go back to
 *   the engine after the stall timeout, as on a link down, and the batch ends once Redis is back.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { SmscSimulator } from '../../scripts/smsc-simulator.js';
import { SmppCarrier, SmppCarrierError } from '../../shared/carriers/smpp/carrier.js';
import type { SmsAttempt } from '../../shared/channels/index.js';
import { planSms } from '../../shared/sms/gsm7.js';
import { createRedis } from '../../shared/redis.js';
import { startOwnRedis, type OwnRedis } from '../support/own-redis.js';
import { stopChild } from '../support/processes.js';
import { uniqueName, waitFor } from '../support/harness.js';
import { fittedRate, worstWindow } from '../support/rates.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

let redis: OwnRedis;
let sim: SmscSimulator;
let connectionSeq = 0;

before(async () => {
  redis = await startOwnRedis();
  // No receipts (every destination ends in 03): only the submit path is measured.
  sim = new SmscSimulator({ systemId: 'sb', password: 'pw' });
  await sim.start();
});

after(async () => {
  await sim?.stop();
  await redis?.stop();
});

interface Sender {
  child: ChildProcess;
  output: string[];
  events: Array<Record<string, unknown>>;
  next(event: string): Promise<Record<string, unknown>>;
}

function startSender(env: Record<string, string>): Sender {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/smpp-sender-child.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const events: Array<Record<string, unknown>> = [];
  const waiters: Array<{ event: string; resolve(e: Record<string, unknown>): void }> = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    output.push(line);
    let e: Record<string, unknown>;
    try {
      e = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    events.push(e);
    for (const w of waiters.filter((x) => x.event === e.event)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(e);
    }
  });
  child.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
  return {
    child,
    output,
    events,
    next: (event) => {
      const seen = events.find((e) => e.event === event);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        waiters.push({ event, resolve });
        child.once('exit', (code) => reject(new Error(`sender exited (${code}) before "${event}":\n${output.join('\n')}`)));
      });
    },
  };
}

/** Runs `perSender` attempts from each of two processes over one connection; resolves with their reports. */
async function runTwo(query: string, perSender: number): Promise<{ done: Array<Record<string, unknown>>; evalCalls: number; ms: number }> {
  const connection = `cap${++connectionSeq}`;
  const prefix = uniqueName('sbtps');
  const senders = [0, 1].map((k) => startSender({
    SMPP_URL: `smpp://sb:pw@127.0.0.1:${sim.port}?${query}`,
    REDIS_URL: redis.url,
    REDIS_PREFIX: prefix,
    SENDER_CONNECTION: connection,
    SENDER_COUNT: String(perSender),
    SENDER_FIRST_ATTEMPT: String(1 + k * perSender),
    SENDER_TO: `4207${k}${connectionSeq}`,
    LOG_LEVEL: 'warn',
  }));
  try {
    await Promise.all(senders.map((s) => s.next('bound')));
    sim.reset();
    const before = await redis.commandCalls();
    const started = Date.now();
    for (const s of senders) s.child.stdin!.write('go\n');
    const done = await Promise.all(senders.map((s) => s.next('done')));
    const ms = Date.now() - started;
    const afterCalls = await redis.commandCalls();
    const evalCalls = ['evalsha', 'eval'].reduce((sum, c) => sum + (afterCalls[c] ?? 0) - (before[c] ?? 0), 0);
    return { done, evalCalls, ms };
  } finally {
    await Promise.all(senders.map((s) => stopChild(s.child, 5_000)));
  }
}

/** Most of `times` within any 1 s (sliding), and the times sorted. */
function busiestSecond(unsorted: number[]): { worst: number; times: number[] } {
  const times = [...unsorted].sort((a, b) => a - b);
  return { worst: worstWindow(times), times };
}

describe('tps cap shared by two processes', () => {
  it('binding (200/s): never above the cap in any second at the SMSC, within 5 % of it', { timeout: 60_000 }, async (t) => {
    const TPS = 200;
    const { done, evalCalls, ms } = await runTwo(`window=20&tps=${TPS}&submit_id=hex&receipt_id=hex`, 650);
    const atSmsc = busiestSecond(sim.submitted.map((r) => r.receivedAt));
    const taken = busiestSecond(done.flatMap((d) => d.takes as number[]));
    assert.equal(atSmsc.times.length, 1300, 'every attempt submitted once');
    assert.equal(taken.times.length, 1300, 'one token per submit');
    assert.equal(new Set(sim.submitted.map((r) => r.sessionId)).size, 2, 'both processes sent');
    // The first second's budget may go early; the steady rate is that of the submits after it
    // (the 201st to the 1201st), fitted by least squares so that one PDU read late does not bend it.
    const steady = (times: number[]): number => Math.round(fittedRate(times.slice(200, 1201)) * 10) / 10;
    t.diagnostic(`busiest second: ${atSmsc.worst} at the SMSC, ${taken.worst} as taken; steady ${steady(atSmsc.times)}/s at the SMSC; ` +
      `${evalCalls} lease calls in ${ms} ms for 1300 submits; ${JSON.stringify(done.map((d) => d.bucket))}`);
    // Exact for the times tokens are taken (the two processes' clocks are this machine's, as Redis's is).
    assert.ok(taken.worst <= TPS, `at most ${TPS} tokens taken in any second, saw ${taken.worst}`);
    // The SMSC (this process) reads each PDU a little after the token was taken; the window's 20 ms
    // guard covers that on a quiet machine (seen: 200), but on a machine loaded many times over
    // (load 12-27 on two cores: token → read p50 7-15 ms, p99 63-66 ms, max 91 ms) a lease read
    // late lands beside the next one (seen: 203, 220). One lease (a tenth of the cap) is allowed for it.
    assert.ok(atSmsc.worst <= TPS + TPS / 10, `at most ${TPS} (+ one lease of read delay) submits in any second at the SMSC, saw ${atSmsc.worst}`);
    // Never above the cap: exact on the take times (the busiest second of takes, above); at the
    // SMSC, whose read of each PDU lags its token by a few ms to tens of ms, the fitted rate within
    // 5 % of the cap either way.
    assert.ok(Math.abs(steady(atSmsc.times) - TPS) <= TPS * 0.05, `steady rate at the SMSC within 5 % of ${TPS}/s: ${steady(atSmsc.times)}/s`);
  });

  it('not binding (100,000/s): a few Redis calls per second per process, not one per submit', { timeout: 60_000 }, async (t) => {
    const PER_SENDER = 6000;
    const { done, evalCalls, ms } = await runTwo('window=50&tps=100000&submit_id=hex&receipt_id=hex', PER_SENDER);
    const perProcessPerSecond = evalCalls / 2 / (ms / 1000);
    t.diagnostic(`${evalCalls} lease calls (EVALSHA/EVAL at the server) for ${2 * PER_SENDER} submits in ${ms} ms: ${perProcessPerSecond.toFixed(1)}/s per process; ${JSON.stringify(done.map((d) => d.bucket))}`);
    assert.equal(sim.submitted.length, 2 * PER_SENDER);
    // One lease per ~250 ms of demand, one ahead, a settlement at expiry and one at close.
    assert.ok(perProcessPerSecond <= 10, `at most 10 lease calls per second per process, saw ${perProcessPerSecond.toFixed(1)}`);
    assert.ok(evalCalls * 100 < 2 * PER_SENDER, `${evalCalls} calls for ${2 * PER_SENDER} submits`);
  });

  it('Redis gone: no submit past the leases held; the waiting attempts go back after the stall timeout', { timeout: 30_000 }, async () => {
    const own = await startOwnRedis();
    // As the service connects: commands wait (queued) while Redis is away, retried for ever.
    const client = createRedis(own.url);
    const carrier = new SmppCarrier({
      connection: `cap${++connectionSeq}`,
      url: `smpp://sb:pw@127.0.0.1:${sim.port}?window=10&tps=50&submit_id=hex&receipt_id=hex`,
      sink: { report: async () => undefined, inbound: async () => undefined },
      redis: client,
      redisPrefix: uniqueName('sbtps'),
      stallTimeoutMs: 1_500,
    }).start();
    try {
      await carrier.waitUntilBound(5_000);
      sim.reset();
      const plan = planSms('Down', 'utf');
      const attempts: SmsAttempt[] = Array.from({ length: 200 }, (_, i) => ({
        attemptId: 90_000 + i, recipientPublicId: `d${i}`, accountId: 1, channel: 'sms', smsGateway: 'high', to: `42079${String(i).padStart(5, '0')}03`,
        sender: 'Switchboard', text: plan.text, encoding: plan.encoding, parts: plan.parts, ttlMinutes: 60,
      }));
      const sending = carrier.send(attempts);
      sending.catch(() => undefined);
      await waitForCount(15);
      await own.stop();
      const atStop = sim.submitted.length;
      const started = Date.now();
      // The leases held (one being spent, one granted ahead, perhaps for a later start) may still
      // be spent; every other attempt waits, then goes back to the engine after the stall timeout.
      await waitFor(() => carrier.stats.waiting === 0, 10_000, 'the waiting attempts to be given back');
      const waited = Date.now() - started;
      assert.ok(waited >= 1_000 && waited < 10_000, `given back after the stall timeout (${waited} ms)`);
      await new Promise((r) => setTimeout(r, 300));
      // tps 50: leases of at most 5 tokens, one held and one ahead.
      assert.ok(sim.submitted.length <= atStop + 10, `after Redis went: ${sim.submitted.length - atStop} submits (at most the 10 tokens leased)`);
      assert.ok(sim.submitted.length < 200);
      // What was submitted after Redis went waits for Redis to record its message id (as the
      // service does: commands wait while Redis is away). Once Redis is back the batch ends: it
      // rejects for the attempts given back, which the engine hands again.
      await own.start();
      await assert.rejects(sending, (err: unknown) => err instanceof SmppCarrierError && /not submitted/.test(err.message));
    } finally {
      await carrier.close();
      client.disconnect();
      await own.stop();
    }
  });
});

async function waitForCount(n: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (sim.submitted.length < n) {
    if (Date.now() > deadline) throw new Error(`only ${sim.submitted.length} submits`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
