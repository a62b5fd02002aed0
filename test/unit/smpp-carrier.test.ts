/**
 * SmppCarrier against the SMSC simulator over real TCP on 127.0.0.1, with a real Redis (one key
 * prefix per file) and a recording sink in place of the engine. Covers what the engine-level
 * tests (test/api/smpp.test.ts) cannot steer precisely: lane order, throttling without
 * reordering parts, drops mid-window, re-hand idempotency, stalls, the shared token bucket and
 * MO parts spread over several binds.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { Redis } from 'ioredis';
import type { CarrierSink, InboundReport, PriorHandOvers, StatusReport } from '../../shared/carriers/types.js';
import { SmppCarrier, SmppCarrierError, type SmppCarrierOptions } from '../../shared/carriers/smpp/carrier.js';
import type { SmsAttempt } from '../../shared/channels/index.js';
import { SmppRedisStore } from '../../shared/carriers/smpp/redis-store.js';
import { RedisTokenBucket, TPS_LEASE_LUA } from '../../shared/carriers/smpp/token-bucket.js';
import { ReceiptIds } from '../../shared/carriers/smpp/receipt-ids.js';
import { planSms } from '../../shared/sms/gsm7.js';
import { SmscSimulator, type SmscSimulatorOptions, type SubmittedRecord } from '../../scripts/smsc-simulator.js';
import { REDIS_URL, deleteRedisPrefix, uniqueName } from '../support/harness.js';
import { worstWindow } from '../support/rates.js';

const T = { timeout: 20_000 };
const prefix = uniqueName('sbu');
const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });

after(async () => {
  redis.disconnect();
  await deleteRedisPrefix(prefix);
});

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function until(predicate: () => boolean | Promise<boolean>, timeoutMs = 5_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

class RecordingSink implements CarrierSink {
  readonly reports: StatusReport[] = [];
  readonly messages: InboundReport[] = [];
  /**
   * What `report` answers: applied (true), queued (false), or a sink that cannot tell (undefined);
   * a function answers per call, from its first report's attempt.
   */
  applied: boolean | undefined | ((attemptId: number | undefined) => boolean | undefined) = undefined;
  /** What Postgres holds of earlier hand-overs (`priorHandOvers`): nothing unless a test says. */
  prior: (attemptIds: number[]) => Promise<PriorHandOvers> = async () => ({ handed: [], parts: [] });
  async report(updates: StatusReport[]): Promise<boolean | undefined> {
    this.reports.push(...updates);
    return typeof this.applied === 'function' ? this.applied(updates[0]?.attemptId) : this.applied;
  }
  priorHandOvers(_carrier: string, attemptIds: number[]): Promise<PriorHandOvers> {
    return this.prior(attemptIds);
  }
  async inbound(message: InboundReport): Promise<void> {
    this.messages.push(message);
  }
  of(attemptId: number): StatusReport[] {
    return this.reports.filter((r) => r.attemptId === attemptId);
  }
}

let attemptSeq = 1;
function attempt(to: string, text = 'Hello', extra: Partial<SmsAttempt> = {}): SmsAttempt {
  const plan = planSms(text, 'utf');
  const attemptId = attemptSeq++;
  return {
    attemptId,
    recipientPublicId: `r${attemptId}`,
    accountId: 1,
    channel: 'sms',
    smsGateway: 'high',
    to,
    sender: 'Switchboard',
    text: plan.text,
    encoding: plan.encoding,
    parts: plan.parts,
    ttlMinutes: 60,
    ...extra,
  };
}

let connectionSeq = 0;
interface Ctx {
  sim: SmscSimulator;
  sink: RecordingSink;
  carrier: SmppCarrier;
  url: string;
  make(options?: Partial<SmppCarrierOptions>): SmppCarrier;
}

async function withCarrier(
  simOptions: SmscSimulatorOptions,
  query: string,
  options: Partial<SmppCarrierOptions>,
  fn: (ctx: Ctx) => Promise<void>,
): Promise<void> {
  const sim = new SmscSimulator({ receiptDelayMs: 20, ...simOptions });
  const { port } = await sim.start();
  const sink = new RecordingSink();
  const url = `smpp://sb:secret@127.0.0.1:${port}?${query}`;
  const connection = `c${++connectionSeq}`;
  const made: SmppCarrier[] = [];
  const make = (extra: Partial<SmppCarrierOptions> = {}): SmppCarrier => {
    const carrier = new SmppCarrier({
      connection,
      url,
      sink,
      redis,
      redisPrefix: prefix,
      session: { reconnect: { initialDelayMs: 50, maxDelayMs: 200 }, unbindTimeoutMs: 1_000 },
      ...options,
      ...extra,
    }).start();
    made.push(carrier);
    return carrier;
  };
  const carrier = make();
  try {
    await carrier.waitUntilBound(3_000);
    await fn({ sim, sink, carrier, url, make });
  } finally {
    await Promise.all(made.map((c) => c.close()));
    await sim.stop();
  }
}

const accepted = (sim: SmscSimulator): SubmittedRecord[] => sim.submitted.filter((r) => r.commandStatus === 0);

/** The carrier's Redis record of its accepted parts (and written marks). */
const storeOf = (carrier: SmppCarrier): SmppRedisStore => (carrier as unknown as { store: SmppRedisStore }).store;

/** The fields Redis holds of an attempt's accepted parts (and written marks) on a connection. */
async function acceptedFields(connection: string, attemptId: number): Promise<string[]> {
  const fields = await redis.hkeys(`${prefix}:smpp:${connection}:acc64:${Math.floor(attemptId / 64)}`);
  return fields.filter((f) => f.startsWith(`${attemptId}:`)).sort();
}

describe('SmppCarrier', () => {
  it('submits the parts of a long message in order, registers each part\'s ref, and reports the attempt sent with its last part', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sim, sink, carrier }) => {
      const a = attempt('420777000100', 'x'.repeat(400));
      await carrier.send([a]);
      const sent = sink.of(a.attemptId);
      assert.deepEqual(sent.map((r) => [r.state, r.part, r.partCount, r.carrier]), [
        ['sending', 0, 3, carrier.name],
        ['sending', 1, 3, carrier.name],
        ['sent', 2, 3, carrier.name],
      ]);
      assert.ok(sent.every((r) => r.ref), 'every part with its ref');
      const records = accepted(sim);
      assert.deepEqual(records.map((r) => r.concat?.seq), [1, 2, 3]);
      assert.equal(new Set(records.map((r) => r.concat?.ref)).size, 1, 'one concatenation reference');
      assert.deepEqual(records.map((r) => r.esm_class & 0x40), [0x40, 0x40, 0x40]);
      assert.equal(records.map((r) => r.text).join(''), 'x'.repeat(400));
      // validity_period from the ttl (60 min) in SMPP relative form
      assert.equal(records[0]?.validity_period, '000000010000000R');
      await until(() => sink.reports.filter((r) => r.attemptId === undefined).length === 3, 3_000, 'receipts');
      const receipts = sink.reports.filter((r) => r.attemptId === undefined);
      assert.deepEqual(receipts.map((r) => r.ref).sort(), sent.map((r) => r.ref).sort(), 'receipt refs equal the registered refs');
      assert.ok(receipts.every((r) => r.state === 'delivered' && r.resultInfo === '[0] Delivered'));
    });
  });

  it('maps submit error statuses and receipt outcomes (D10 table) and refuses bad senders locally', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sink, carrier }) => {
      const failed = attempt('420777000102');
      const undelivered = attempt('420777000101');
      const rejected = attempt('420777000105');
      const badSender = attempt('420777000100', 'Hi', { sender: 'Žluťoučký' });
      await carrier.send([failed, undelivered, rejected, badSender]);
      assert.deepEqual(sink.of(failed.attemptId).map((r) => [r.state, r.resultInfo]), [['failed', '[8] ESME_RSYSERR']]);
      assert.equal(sink.of(badSender.attemptId)[0]?.state, 'rejected');
      assert.match(sink.of(badSender.attemptId)[0]?.resultInfo ?? '', /^\[10\] ESME_RINVSRCADR/);
      const refOf = (id: number) => sink.of(id)[0]?.ref;
      await until(() => sink.reports.filter((r) => r.attemptId === undefined).length === 2, 3_000, 'receipts');
      const byRef = new Map(sink.reports.filter((r) => r.attemptId === undefined).map((r) => [r.ref, r]));
      assert.equal(byRef.get(refOf(undelivered.attemptId))?.state, 'undelivered');
      assert.equal(byRef.get(refOf(undelivered.attemptId))?.resultInfo, '[1] Undelivered (UNDELIV err:001)');
      assert.equal(byRef.get(refOf(rejected.attemptId))?.state, 'rejected');
      assert.equal(byRef.get(refOf(rejected.attemptId))?.resultInfo, '[2] Rejected (REJECTD err:002)');
    });
  });

  it('lets priority attempts overtake a queued promotional backlog', T, async () => {
    await withCarrier({}, 'window=5&tps=100', {}, async ({ sim, carrier }) => {
      const backlog = Array.from({ length: 80 }, (_, i) => attempt(`4207771${String(i).padStart(4, '0')}9`));
      const bulk = carrier.send(backlog);
      await until(() => sim.submitted.length >= 5, 3_000, 'backlog started');
      const otp = attempt('420777999900', 'Your code is 1234', { priority: true });
      await carrier.send([otp]);
      const index = sim.submitted.findIndex((r) => r.destination_addr === '420777999900');
      const submittedBefore = sim.submitted.length;
      assert.ok(index >= 0 && index < 15, `priority attempt was submit #${index + 1}`);
      assert.ok(submittedBefore < 60, 'the priority attempt did not wait for the backlog');
      await bulk;
      assert.equal(accepted(sim).length, 81);
    });
  });

  it('retries throttled PDUs in place: parts keep their order and the connection pauses', T, async () => {
    await withCarrier({}, 'window=10', { throttleBackoff: { initialMs: 200, maxMs: 1_000 } }, async ({ sim, sink, carrier }) => {
      let seen = 0;
      sim.on('submit', () => {
        seen++;
        if (seen === 4) sim.throttleNext(4); // the 5th..8th submits are throttled
      });
      const messages = Array.from({ length: 4 }, (_, i) => attempt(`4207772000${i}9`, `${i}`.repeat(400)));
      await carrier.send(messages);
      const throttled = sim.submitted.filter((r) => r.commandStatus === 0x58);
      assert.equal(throttled.length, 4);
      for (const m of messages) {
        const parts = accepted(sim).filter((r) => r.destination_addr === m.to);
        assert.deepEqual(parts.map((r) => r.concat?.seq), [1, 2, 3], `parts of ${m.to} in order`);
        assert.equal(parts.map((r) => r.text).join(''), m.text);
        assert.deepEqual(sink.of(m.attemptId).map((r) => r.state), ['sending', 'sending', 'sent']);
      }
      // After the first throttle nothing was accepted for at least ~the first pause.
      const firstThrottle = throttled[0]!.receivedAt;
      const nextAccepted = accepted(sim).find((r) => r.receivedAt > firstThrottle + 5);
      assert.ok(nextAccepted && nextAccepted.receivedAt - firstThrottle >= 150, 'the connection paused after ESME_RTHROTTLED');
      assert.ok(carrier.stats.busy >= 4);
    });
  });

  it('survives a drop mid-window: unanswered submits are sent once more, queued ones after the rebind, none lost', T, async () => {
    await withCarrier({ responseDelayMs: 150 }, 'window=10', {}, async ({ sim, sink, carrier }) => {
      const batch = Array.from({ length: 30 }, (_, i) => attempt(`4207773${String(i).padStart(4, '0')}9`));
      const sending = carrier.send(batch);
      await until(() => sim.outstanding >= 5 && sim.submitted.length >= 12, 5_000, 'submits in flight');
      const dropAt = Date.now();
      sim.dropConnections();
      await sending;
      for (const a of batch) {
        const reports = sink.of(a.attemptId);
        assert.equal(reports.length, 1, `${a.to} reported once`);
        assert.equal(reports[0]?.state, 'sent');
      }
      const perDestination = new Map<string, SubmittedRecord[]>();
      for (const r of sim.submitted) perDestination.set(r.destination_addr, [...(perDestination.get(r.destination_addr) ?? []), r]);
      assert.equal(perDestination.size, 30, 'every message reached the SMSC');
      const twice = [...perDestination.values()].filter((rs) => rs.length > 1);
      assert.ok(twice.length >= 1 && twice.length <= 10, `${twice.length} resent (at most one window)`);
      for (const rs of twice) {
        assert.equal(rs.length, 2, 'sent at most twice');
        assert.ok(rs[0]!.receivedAt <= dropAt, 'only submits written before the drop are sent again');
      }
      // A PDU written just before the drop may die with the socket: resent, yet seen only once.
      assert.ok(carrier.stats.resent >= twice.length && carrier.stats.resent <= 10, `resent ${carrier.stats.resent}`);
    });
  });

  it('at-most-once: a submit written but unanswered when the link drops is reported sent (unconfirmed), never written twice', T, async () => {
    await withCarrier({ responseDelayMs: 150 }, 'window=10', {}, async ({ sim, sink, carrier }) => {
      const batch = Array.from({ length: 30 }, (_, i) => attempt(`4207774${String(i).padStart(4, '0')}9`, 'Hello', { atMostOnce: true }));
      const sending = carrier.send(batch);
      await until(() => sim.outstanding >= 5 && sim.submitted.length >= 12, 5_000, 'submits in flight');
      sim.dropConnections();
      await sending;
      const perDestination = new Map<string, number>();
      for (const r of sim.submitted) perDestination.set(r.destination_addr, (perDestination.get(r.destination_addr) ?? 0) + 1);
      assert.ok([...perDestination.values()].every((n) => n === 1), 'no destination got a submit twice');
      const unconfirmed = batch.filter((a) => sink.of(a.attemptId).some((r) => r.resultInfo.startsWith('Sent (unconfirmed')));
      assert.ok(unconfirmed.length >= 1, 'the unanswered ones are reported sent, unconfirmed');
      for (const a of batch) assert.equal(sink.of(a.attemptId).filter((r) => r.state === 'sent').length, 1, `${a.to} reported once`);
      assert.equal(carrier.stats.resent, 0);
    });
  });

  it('at-most-once: a part written before a crash without an answer is not sent again when the attempt is handed again', T, async () => {
    await withCarrier({ responseDelayMs: 5_000 }, 'window=10', {}, async ({ sim, sink, make }) => {
      const a = attempt('420777400444', 'z'.repeat(300), { atMostOnce: true });
      // A process writes part 1 and dies before its answer (here: it never comes).
      const crashed = make();
      await crashed.waitUntilBound(3_000);
      void crashed.send([a]).catch(() => undefined);
      await until(() => sim.submitted.length >= 1, 3_000, 'part 1 written');
      sim.options.responseDelayMs = 0;
      sim.dropConnections();
      await crashed.close();
      const writtenBefore = sim.submitted.length;
      // Another process takes the attempt over: part 1 is not written again, part 2 is.
      const other = make();
      await other.waitUntilBound(3_000);
      await other.send([{ ...a, rehand: true }]);
      const seqs = sim.submitted.slice(writtenBefore).map((r) => r.concat?.seq);
      assert.ok(!seqs.includes(1), `part 1 not written again (${JSON.stringify(seqs)})`);
      assert.ok(seqs.includes(2), 'part 2 sent');
      assert.deepEqual(sink.of(a.attemptId).map((r) => [r.state, r.part, r.resultInfo.startsWith('Sent (unconfirmed')]), [['sent', 1, true]],
        'sent with its last part, saying a part is unconfirmed');
    });
  });

  it('never resubmits parts the SMSC accepted when the same attempt is handed again', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sim, sink, carrier, make }) => {
      const a = attempt('420777400000', 'y'.repeat(400));
      sim.on('submit', (r) => {
        if (r.concat?.seq === 1 && r.commandStatus === 0) sim.setMode({ throttle: true });
      });
      const first = carrier.send([a]).then(() => null, (err: unknown) => err);
      await until(() => sim.submitted.some((r) => r.commandStatus === 0x58), 3_000, 'throttling');
      await carrier.close(); // shutting down: part 2 and 3 go back to the engine
      assert.ok((await first) instanceof SmppCarrierError);
      sim.setMode({ throttle: false });
      sim.removeAllListeners('submit');

      const other = make(); // another process, same connection
      await other.waitUntilBound(3_000);
      await other.send([{ ...a, rehand: true }]); // the engine re-hands an attempt recorded earlier
      const parts = accepted(sim);
      assert.deepEqual(parts.map((r) => r.concat?.seq), [1, 2, 3], 'part 1 was not sent again');
      assert.equal(new Set(parts.map((r) => r.concat?.ref)).size, 1, 'the resumed parts keep the reference');
      const registered = sink.of(a.attemptId).filter((r) => r.ref !== undefined);
      assert.deepEqual([...new Set(registered.map((r) => r.part))].sort(), [0, 1, 2], 'every part\'s ref registered');
      assert.deepEqual(sink.of(a.attemptId).filter((r) => r.state === 'sent').map((r) => r.part), [2], 'sent once, with the last part');

      const before = sim.submitted.length;
      await other.send([{ ...a, rehand: true }]); // a third hand-over: everything was accepted
      assert.equal(sim.submitted.length, before);
    });
  });

  it('reads the accepted parts an earlier version recorded in one hash per attempt (kept 6 h, so an upgrade resumes them)', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sim, sink, carrier }) => {
      const a = attempt('420777400100', 'z'.repeat(400));
      await redis.hset(`${prefix}:smpp:${carrier.connection}:att:${a.attemptId}`, { c: '77', p0: 'hex:abc' });
      await carrier.send([{ ...a, rehand: true }]);
      const parts = accepted(sim).filter((r) => r.destination_addr === a.to);
      assert.deepEqual(parts.map((r) => r.concat?.seq), [2, 3], 'the part the hash names was not sent again');
      assert.deepEqual(parts.map((r) => r.concat?.ref), [77, 77], 'the resumed parts keep the recorded reference');
      const reports = sink.of(a.attemptId);
      assert.deepEqual(reports.find((r) => r.part === 0)?.ref, 'hex:abc');
      assert.deepEqual([...new Set(reports.map((r) => r.part))].sort(), [0, 1, 2]);
      assert.deepEqual(reports.filter((r) => r.state === 'sent').map((r) => r.part), [2], 'sent with the last part');
    });
  });

  it('looks up accepted parts of an attempt planned with no parts without failing the others of its batch', T, async () => {
    const store = new SmppRedisStore(redis, `${prefix}:smpp:store-edge`);
    await store.recordAccepted({ attemptId: 7, part: 0, ref: 'hex:1', index: false, idTtlSeconds: 60 });
    await store.recordAccepted({ attemptId: 8, part: 1, ref: '', index: false, idTtlSeconds: 60 });
    const found = await store.acceptedParts([{ attemptId: 6, partCount: 0 }, { attemptId: 7, partCount: 1 }, { attemptId: 8, partCount: 2 }]);
    assert.deepEqual([...found.keys()].sort(), [7, 8]);
    assert.equal(found.get(7)?.parts.get(0), 'hex:1');
    assert.deepEqual([...found.get(8)!.parts], [[1, '']], 'a part accepted without a message id is still known');
    assert.equal(found.get(7)?.concatRef, null, 'no legacy hash: the reference is derived');
  });

  it('forgets the accepted parts of attempts whose hand-over the engine committed, and keeps those only queued', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sink, carrier }) => {
      const fieldsOf = (attemptId: number): Promise<string[]> => acceptedFields(carrier.connection, attemptId);
      const queued = attempt('420777500009', 'q'.repeat(200));
      sink.applied = false; // Postgres was away: the reports went to the status queues
      await carrier.send([queued]);
      assert.deepEqual(await fieldsOf(queued.attemptId), [`${queued.attemptId}:0`, `${queued.attemptId}:1`], 'kept: a re-hand may still come');
      const long = attempt('420777500019', 'l'.repeat(400));
      const short = attempt('420777500029', 'short', { atMostOnce: true });
      sink.applied = true;
      await carrier.send([long, short]);
      await until(async () => (await fieldsOf(long.attemptId)).length + (await fieldsOf(short.attemptId)).length === 0, 3_000, 'forgotten');
      assert.equal((await fieldsOf(queued.attemptId)).length, 2, 'the other attempt\'s parts stay');
    });
  });

  it('forgets per attempt as each report is applied: an at-most-once attempt refused at submit, and a re-hand found wholly accepted', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sim, sink, carrier }) => {
      const fieldsOf = (attemptId: number): Promise<string[]> => acceptedFields(carrier.connection, attemptId);
      // Both refused with ESME_RSYSERR (a number ending in 02): ended by `end()`, their written marks left behind.
      const refused = attempt('420777600102', 'Hi', { atMostOnce: true });
      const refusedQueued = attempt('420777600202', 'Hi', { atMostOnce: true });
      // Handed before, both parts accepted: settled by the re-hand's report alone.
      const whole = attempt('420777600300', 'w'.repeat(200));
      const store = storeOf(carrier);
      for (const part of [0, 1]) await store.recordAccepted({ attemptId: whole.attemptId, part, ref: `hex:7${part}`, index: false, idTtlSeconds: 60 });
      sink.applied = (attemptId) => attemptId !== refusedQueued.attemptId; // that one's report only queued

      await carrier.send([refused, refusedQueued, { ...whole, rehand: true }]);
      assert.deepEqual(sink.of(refused.attemptId).map((r) => r.state), ['failed']);
      assert.deepEqual(sink.of(whole.attemptId).map((r) => [r.part, r.state]), [[0, 'sent'], [1, 'sent']]);
      assert.equal(accepted(sim).filter((r) => r.destination_addr === whole.to).length, 0, 'nothing of it submitted again');
      await until(async () => (await fieldsOf(refused.attemptId)).length + (await fieldsOf(whole.attemptId)).length === 0, 3_000, 'forgotten');
      assert.deepEqual(await fieldsOf(refusedQueued.attemptId), [`${refusedQueued.attemptId}:0:w`], 'its report only queued: the mark stays');
    });
  });

  it('keeps an accepted part\'s window slot until Redis has its record: a crash repeats at most a window of PDUs', T, async () => {
    await withCarrier({}, 'window=2', {}, async ({ sim, carrier }) => {
      const store = storeOf(carrier);
      const record = store.recordAccepted.bind(store);
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let recording = 0;
      store.recordAccepted = async (input) => {
        recording++;
        await held; // Redis slow to answer: the records are not in yet
        return record(input);
      };
      const attempts = Array.from({ length: 5 }, (_, i) => attempt(`4207776007${i}0`));
      const sending = carrier.send(attempts);
      await until(() => recording === 2, 3_000, 'two parts accepted, their records under way');
      await new Promise((r) => setTimeout(r, 200));
      assert.equal(sim.submitted.length, 2, 'no third PDU while the first two answers are unrecorded');
      release();
      await sending;
      assert.equal(accepted(sim).length, 5);
    });
  });

  it('submits and reports nothing of an attempt Postgres records as handed over: another run of its job finished it and forgot the record', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sim, sink, carrier }) => {
      // Parts accepted without a message_id leave no ref in Postgres: only Redis knew of them.
      const a = attempt('420777600400', 'f'.repeat(300), { atMostOnce: true });
      sink.prior = async (ids) => ({ handed: ids.filter((id) => id === a.attemptId), parts: [] });
      await carrier.send([{ ...a, rehand: true }]);
      assert.equal(sim.submitted.filter((r) => r.destination_addr === a.to).length, 0, 'nothing submitted');
      assert.deepEqual(sink.of(a.attemptId), [], 'nothing reported: its hand-over is recorded');
    });
  });

  it('reads Redis before Postgres: a hand-over committed and forgotten between the two reads is not sent again', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sim, sink, carrier }) => {
      const a = attempt('420777600500', 'r'.repeat(200));
      const store = storeOf(carrier);
      // Another run of the job had both parts accepted (no message ids) ...
      for (const part of [0, 1]) await store.recordAccepted({ attemptId: a.attemptId, part, ref: '', index: false, idTtlSeconds: 60 });
      sink.prior = async () => {
        const answer: PriorHandOvers = { handed: [], parts: [] }; // read before that run's commit ...
        // ... which commits and forgets its record before this read returns.
        sink.prior = async (ids) => ({ handed: ids, parts: [] });
        await store.forgetAccepted([{ attemptId: a.attemptId, partCount: 2, atMostOnce: false }]);
        return answer;
      };
      await carrier.send([{ ...a, rehand: true }]);
      assert.equal(sim.submitted.filter((r) => r.destination_addr === a.to).length, 0, 'the accepted parts were not sent again');
      assert.deepEqual(sink.of(a.attemptId).filter((r) => r.state === 'sent').map((r) => r.part), [0, 1], 'reported sent from Redis\'s record');
    });
  });

  it('merges the parts Postgres registered into Redis\'s record: only the part neither knows is sent, and a registered part is no longer unconfirmed', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sim, sink, carrier }) => {
      const a = attempt('420777600600', 'm'.repeat(400), { atMostOnce: true });
      const store = storeOf(carrier);
      // Redis: part 1 accepted without an id; part 2 written with no answer recorded (its write to Redis lost).
      await store.recordWritten(a.attemptId, 0);
      await store.recordAccepted({ attemptId: a.attemptId, part: 0, ref: '', index: false, idTtlSeconds: 60 });
      await store.recordWritten(a.attemptId, 1);
      // Postgres: part 2's ref, registered by that earlier hand-over's report.
      sink.prior = async () => ({ handed: [], parts: [{ attemptId: a.attemptId, part: 1, ref: 'hex:p1' }] });
      await carrier.send([{ ...a, rehand: true }]);
      assert.deepEqual(accepted(sim).filter((r) => r.destination_addr === a.to).map((r) => r.concat?.seq), [3], 'only part 3 sent');
      const reports = sink.of(a.attemptId);
      assert.deepEqual(reports.map((r) => [r.part, r.state, r.ref]), [[1, 'sending', 'hex:p1'], [2, 'sent', reports[1]?.ref]]);
      assert.equal(reports[1]?.resultInfo, 'Sent', 'every part confirmed: not reported unconfirmed');
    });
  });

  it('records the parts accepted in one tick in one hash per 64 consecutive attempts, with an expiry', T, async () => {
    const base = `${prefix}:smpp:store-hash`;
    const store = new SmppRedisStore(redis, base);
    await Promise.all([
      store.recordAccepted({ attemptId: 2047, part: 0, ref: 'hex:a', index: false, idTtlSeconds: 60 }),
      store.recordAccepted({ attemptId: 2048, part: 0, ref: 'hex:b', index: false, idTtlSeconds: 60 }),
      store.recordAccepted({ attemptId: 2048, part: 1, ref: 'hex:c', index: false, idTtlSeconds: 60 }),
      store.recordAccepted({ attemptId: 2111, part: 0, ref: 'hex:d', index: false, idTtlSeconds: 60 }),
    ]);
    assert.deepEqual(await redis.hgetall(`${base}:acc64:31`), { '2047:0': 'hex:a' });
    assert.deepEqual(await redis.hgetall(`${base}:acc64:32`), { '2048:0': 'hex:b', '2048:1': 'hex:c', '2111:0': 'hex:d' });
    for (const key of [`${base}:acc64:31`, `${base}:acc64:32`]) {
      const ttl = await redis.ttl(key);
      assert.ok(ttl > 6 * 3600 - 60 && ttl <= 6 * 3600, `${key} expires in 6 h (ttl ${ttl})`);
    }
    assert.equal(await redis.exists(`${base}:id:hex:a`), 0, 'no id index unless asked');
    const found = await store.acceptedParts([{ attemptId: 2047, partCount: 1 }, { attemptId: 2048, partCount: 3 }]);
    assert.deepEqual([...found.get(2047)!.parts], [[0, 'hex:a']]);
    assert.deepEqual([...found.get(2048)!.parts], [[0, 'hex:b'], [1, 'hex:c']]);
  });

  it('reads the accepted parts and written marks that versions before 2026-11-29 recorded in one hash per 1024 attempts (an upgrade resumes them)', T, async () => {
    const base = `${prefix}:smpp:store-hash1024`;
    const store = new SmppRedisStore(redis, base);
    // attempt 2050: part 0 accepted and part 2 written without an answer, by the version before.
    await redis.hset(`${base}:acc:2`, '2050:0', 'hex:old', '2050:2:w', '1');
    await store.recordAccepted({ attemptId: 2050, part: 1, ref: 'hex:new', index: false, idTtlSeconds: 60 });
    const found = await store.acceptedParts([{ attemptId: 2050, partCount: 3 }, { attemptId: 2051, partCount: 1 }]);
    assert.deepEqual([...found.get(2050)!.parts].sort(), [[0, 'hex:old'], [1, 'hex:new']]);
    assert.deepEqual([...found.get(2050)!.unanswered], [2]);
    assert.equal(found.has(2051), false);
  });

  it('reads the accepted parts the version before recorded as one string per part (kept 6 h, so an upgrade resumes them)', T, async () => {
    const base = `${prefix}:smpp:store-strings`;
    const store = new SmppRedisStore(redis, base);
    await redis.set(`${base}:att:31:1`, 'hex:old', 'EX', 60);
    await store.recordAccepted({ attemptId: 31, part: 0, ref: 'hex:new', index: false, idTtlSeconds: 60 });
    const found = await store.acceptedParts([{ attemptId: 31, partCount: 3 }]);
    assert.deepEqual([...found.get(31)!.parts].sort(), [[0, 'hex:new'], [1, 'hex:old']]);
  });

  it('indexes each accepted id once while the id form is learned, and nothing once it is known', T, async () => {
    const base = `${prefix}:smpp:store-ids`;
    const store = new SmppRedisStore(redis, base);
    const told: string[] = [];
    store.onIdForm = (value) => told.push(value);
    await Promise.all([
      store.recordAccepted({ attemptId: 40, part: 0, ref: 'hex:10', index: true, idTtlSeconds: 120 }),
      store.recordAccepted({ attemptId: 41, part: 0, ref: 'hex:a', index: true, idTtlSeconds: 120 }),
      store.recordAccepted({ attemptId: 42, part: 0, ref: '', index: true, idTtlSeconds: 120 }),
    ]);
    assert.deepEqual(await store.lookupIds(['hex:10', 'hex:a', 'hex:b']), { idForm: null, indexed: new Set(['hex:10', 'hex:a']) });
    const ttl = await redis.ttl(`${base}:id:hex:10`);
    assert.ok(ttl > 60 && ttl <= 120, `the id index keeps the step's ttl (${ttl})`);
    assert.deepEqual(told, []);

    assert.equal(await store.saveIdForm('same'), 'same');
    assert.equal(await store.saveIdForm('hex-dec'), 'same', 'the first relation stored stays');
    await store.recordAccepted({ attemptId: 43, part: 0, ref: 'hex:c', index: true, idTtlSeconds: 120 });
    assert.equal(await redis.exists(`${base}:id:hex:c`), 0, 'not indexed once the form is known');
    assert.deepEqual(told, ['same'], 'the writer learns the stored form');
    assert.deepEqual(await store.lookupIds([]), { idForm: 'same', indexed: new Set() });
  });

  it('looks up accepted parts only for re-handed attempts: an accepted part is not resubmitted, a fresh attempt is', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sim, sink, carrier }) => {
      const store = (carrier as unknown as { store: SmppRedisStore }).store;
      const lookups: number[][] = [];
      const lookup = store.acceptedParts.bind(store);
      store.acceptedParts = (attempts) => {
        lookups.push(attempts.map((a) => a.attemptId));
        return lookup(attempts);
      };

      const a = attempt('420777700000');
      await carrier.send([a]);
      assert.deepEqual(lookups, [], 'a first hand-over costs no accepted-parts lookup');
      assert.equal(accepted(sim).filter((r) => r.destination_addr === a.to).length, 1);
      const ref = sink.of(a.attemptId)[0]?.ref;
      assert.ok(ref, 'the first hand-over was reported sent with a ref');

      const fresh = attempt('420777700001');
      await carrier.send([{ ...a, rehand: true }, fresh]);
      assert.deepEqual(lookups, [[a.attemptId]], 'only the re-handed attempt is looked up');
      assert.equal(accepted(sim).filter((r) => r.destination_addr === a.to).length, 1, 'the accepted part was not submitted again');
      assert.equal(accepted(sim).filter((r) => r.destination_addr === fresh.to).length, 1, 'the fresh attempt was submitted');
      assert.deepEqual(sink.of(a.attemptId).map((r) => [r.state, r.ref]), [['sent', ref], ['sent', ref]], 'reported sent again with its ref');
      assert.equal(sink.of(fresh.attemptId)[0]?.state, 'sent');

      const before = sim.submitted.length;
      await carrier.send([{ ...fresh, rehand: true }]);
      assert.equal(sim.submitted.length, before, 'a re-hand after everything was accepted submits nothing');
      assert.deepEqual(lookups, [[a.attemptId], [fresh.attemptId]]);
    });
  });

  it('gives attempts back to the engine when the SMSC stays unreachable', T, async () => {
    const sim = new SmscSimulator();
    const { port } = await sim.start();
    await sim.stop(); // nothing listens there any more
    const sink = new RecordingSink();
    const carrier = new SmppCarrier({
      connection: 'down', url: `smpp://sb:secret@127.0.0.1:${port}`, sink, redis, redisPrefix: prefix,
      stallTimeoutMs: 300, session: { reconnect: { initialDelayMs: 50, maxDelayMs: 100 } },
    }).start();
    try {
      const started = Date.now();
      await assert.rejects(carrier.send([attempt('420777500000')]), /not bound/);
      assert.ok(Date.now() - started < 3_000);
      assert.equal(sink.reports.length, 0);
    } finally {
      await carrier.close();
    }
  });

  for (const [what, sim, relation] of [
    ['decimal ids in both', { idForm: 'decimal', firstId: 100 }, 'same'],
    ['hex ids answered, decimal in receipts', { idForm: 'hex', receiptIdForm: 'decimal', firstId: 0x100 }, 'hex-dec'],
    ['decimal ids answered, hex in receipts', { idForm: 'decimal', receiptIdForm: 'hex', firstId: 100 }, 'dec-hex'],
  ] as Array<[string, SmscSimulatorOptions, string]>) {
    it(`learns the SMSC's id form from its first receipts (${what}), keeps the ambiguous ones until then, then indexes nothing`, T, async () => {
      await withCarrier(sim, 'window=10', { idForms: { voteGraceMs: 50 } }, async ({ sink, carrier }) => {
        const refs = async (attempts: SmsAttempt[]): Promise<string[]> => {
          await carrier.send(attempts);
          return attempts.map((a) => sink.of(a.attemptId)[0]!.ref!);
        };
        const receiptRefs = (): string[] => sink.reports.filter((r) => r.attemptId === undefined).map((r) => r.ref!);
        const first = await refs(Array.from({ length: 12 }, (_, i) => attempt(`4207771${String(i).padStart(3, '0')}09`)));
        await until(() => receiptRefs().length === 12, 8_000, 'the first receipts, applied once the form is learned');
        assert.deepEqual(receiptRefs().sort(), [...first].sort(), 'each receipt names its own message');
        const base = `${prefix}:smpp:${carrier.connection}`;
        const [formKey] = await redis.keys(`${base}:idform:*`);
        assert.equal(await redis.get(formKey!), relation);
        assert.equal(await redis.hlen(`${base}:rcpt:parked`), 0, 'nothing left parked');

        const later = await refs([attempt('420777200009'), attempt('420777200109')]);
        await until(() => receiptRefs().length === 14, 3_000, 'later receipts');
        assert.deepEqual(receiptRefs().slice(12).sort(), [...later].sort());
        assert.equal(await redis.exists(...later.map((ref) => `${base}:id:${ref}`)), 0, 'ids accepted after learning are not indexed');
      });
    });
  }

  it('never applies a receipt under another reading: with its own id lost from the index, it is kept until the form is known', T, async () => {
    const store = new SmppRedisStore(redis, `${prefix}:smpp:resolver`);
    const reported: StatusReport[] = [];
    const ids = new ReceiptIds({
      submitForm: 'auto', receiptForm: 'auto', store, report: async (r) => void reported.push(...r), carrier: 'smpp.x',
      logger: { info: () => {}, warn: () => {} }, voteGraceMs: 20,
    });
    const delivered = { state: 'delivered' as const, resultInfo: '[0] Delivered', at: 1 };
    // A decimal SMSC: message 10 is indexed; its receipt names it alone.
    await store.recordAccepted({ attemptId: 1, part: 0, ref: 'hex:10', index: true, idTtlSeconds: 60 });
    assert.equal(await ids.resolve('10', delivered), 'hex:10', 'the one registered reading, after the grace');
    assert.equal(await redis.exists(`${prefix}:smpp:resolver:id:hex:10`), 0, 'a message whose receipt was applied leaves the index');
    // Message 16 follows, and Redis loses its entry: its receipt's other reading (16 = 0x10) names message 10, finished.
    await store.recordAccepted({ attemptId: 2, part: 0, ref: 'hex:16', index: true, idTtlSeconds: 60 });
    await redis.del(`${prefix}:smpp:resolver:id:hex:16`);
    assert.equal(await ids.resolve('16', delivered), undefined, 'kept, not applied to message 10');
    assert.equal(await ids.resolve('7', delivered), 'hex:7', 'an id whose readings agree is reported at once');
    // While the index offers two messages for one receipt, it is kept too.
    await store.recordAccepted({ attemptId: 3, part: 0, ref: 'hex:20', index: true, idTtlSeconds: 60 });
    await store.recordAccepted({ attemptId: 4, part: 0, ref: 'hex:14', index: true, idTtlSeconds: 60 });
    assert.equal(await ids.resolve('20', delivered), undefined, 'hex:20 and hex:14 (20 in decimal) both registered');
    assert.equal(ids.known, null, 'one vote decides nothing');
    assert.equal(reported.length, 0);
    // Another process learned the form: the next lookup adopts it and applies what was kept.
    await store.saveIdForm('same');
    assert.equal(await ids.resolve('12', delivered), 'hex:12');
    assert.equal(ids.known, 'same');
    await until(() => reported.length === 2, 2_000, 'the kept receipts');
    assert.deepEqual(reported.map((r) => [r.ref, r.state]).sort(), [['hex:16', 'delivered'], ['hex:20', 'delivered']]);
    assert.equal(await redis.hlen(`${prefix}:smpp:resolver:rcpt:parked`), 0);
    ids.close();
  });

  it('before the form is known, takes a receipt only as written, and only while no votes favour a conversion', T, async () => {
    const store = new SmppRedisStore(redis, `${prefix}:smpp:resolver-favour`);
    const ids = new ReceiptIds({
      submitForm: 'auto', receiptForm: 'auto', store, report: async () => undefined, carrier: 'smpp.z',
      logger: { info: () => {}, warn: () => {} }, voteGraceMs: 5,
    });
    const delivered = { state: 'delivered' as const, resultInfo: '[0] Delivered', at: 1 };
    for (const ref of ['hex:40', 'hex:101']) await store.recordAccepted({ attemptId: 1, part: 0, ref, index: true, idTtlSeconds: 60 });
    // 64 in decimal is 0x40: message 40 is the only registered reading, but a converted one: kept.
    assert.equal(await ids.resolve('64', delivered), undefined);
    // That vote favours hex-dec: now even the one registered reading as written is kept.
    assert.equal(await ids.resolve('101', delivered), undefined);
    assert.equal(ids.known, null);
    ids.close();
  });

  it('with a sink that matches refs against the engine\'s registrations, learns from those instead of the Redis index', T, async () => {
    // The engine's side: refs registered to attempts still waiting for a receipt (a stand-in for
    // carrier_refs joined to attempts; see CarrierSink.matchRefs).
    const live = new Set(['hex:16', 'hex:1a']);
    const asked: string[][] = [];
    const matchRefs = async (refs: string[]): Promise<string[]> => {
      asked.push(refs);
      return refs.filter((r) => live.has(r));
    };
    const make = (name: string): ReceiptIds => new ReceiptIds({
      submitForm: 'auto', receiptForm: 'auto', store: new SmppRedisStore(redis, `${prefix}:smpp:${name}`), report: async () => undefined,
      carrier: `smpp.${name}`, logger: { info: () => {}, warn: () => {} }, voteGraceMs: 5, matchRefs,
    });
    const delivered = { state: 'delivered' as const, resultInfo: '[0] Delivered', at: 1 };
    const decimal = make('match-dec');
    // Message 10 is finished (not live), 16 waits: the receipt 16 (also 0x10 → "10", 0x16 → "22") is 16's.
    assert.equal(decimal.accepted('hex:16'), false, 'nothing indexed in Redis: the engine\'s registrations serve');
    assert.equal(await decimal.resolve('16', delivered), 'hex:16');
    assert.deepEqual(asked.at(-1), ['hex:16', 'hex:10', 'hex:22']);
    decimal.close();
    // An SMSC that answers in hex and writes receipts in decimal: receipt 26 names 0000001A, taken at once.
    const converting = make('match-hexdec');
    assert.equal(await converting.resolve('26', delivered), 'hex:1a');
    converting.close();
    assert.deepEqual(await redis.keys(`${prefix}:smpp:match-*:id:*`), []);
  });

  it('drops a kept receipt with a warning when the form is not learned in time, never applying it', T, async () => {
    const store = new SmppRedisStore(redis, `${prefix}:smpp:resolver-late`);
    const warnings: object[] = [];
    const reported: StatusReport[] = [];
    const ids = new ReceiptIds({
      submitForm: 'auto', receiptForm: 'auto', store, report: async (r) => void reported.push(...r), carrier: 'smpp.y',
      logger: { info: () => {}, warn: (obj) => void warnings.push(obj) }, parkedMaxMs: 100,
    });
    assert.equal(await ids.resolve('16', { state: 'undelivered', resultInfo: '[1] Undelivered', at: 1 }), undefined);
    await until(() => warnings.length === 1, 2_000, 'the warning');
    assert.deepEqual(warnings[0], { carrier: 'smpp.y', receipts: 1, ids: ['16'], keptMs: 100 });
    assert.equal(await redis.hlen(`${prefix}:smpp:resolver-late:rcpt:parked`), 0);
    assert.equal(reported.length, 0);
    ids.close();
  });

  it('joins MO parts that arrive over different binds and decodes UCS-2', T, async () => {
    await withCarrier({}, 'window=10', {}, async ({ sim, sink, make }) => {
      const second = make();
      await second.waitUntilBound(3_000);
      await until(() => sim.boundSessions === 2, 3_000, 'two binds');
      const text = 'Dobrý den, tohle je dlouhá odpověď s diakritikou: ěščřžýáíé. '.repeat(3);
      const result = await sim.sendMo({ from: '420777600000', to: '420600100200', text, spread: true });
      assert.ok(result.parts >= 3);
      assert.deepEqual(result.statuses, Array(result.parts).fill(0), 'every part acknowledged');
      assert.equal(sink.messages.length, 1);
      assert.deepEqual(sink.messages[0] && { ...sink.messages[0], at: 0 }, {
        gateway: 'sms', sender: '420777600000', recipient: '420600100200', body: text, at: 0,
      });
    });
  });
});

describe('RedisTokenBucket', () => {
  /** How late (µs) a settled lease's end may sit after its true last spend: a lease call's round trip, generously. */
  const SPEND_SLACK_US = 150_000;
  /** The leases in a cap's book (member, end in µs) and Redis' time now, in µs. */
  const leaseBook = async (key: string): Promise<{ leases: Array<readonly [string, number]>; nowUs: number }> => {
    const [seconds, micros] = await redis.time();
    const book = await redis.zrange(key, '0', '-1', 'WITHSCORES');
    const leases = book.flatMap((v, i) => (i % 2 === 0 && v.startsWith('L:') ? [[v, Number(book[i + 1])] as const] : []));
    return { leases, nowUs: Number(seconds) * 1e6 + Number(micros) };
  };
  it('shares one cap between several limiters on one key: never more than tps in a window, paced, unspent tokens returned', T, async () => {
    const key = `${prefix}:tb-test`;
    const a = new RedisTokenBucket(redis, key, { tps: 40 });
    const b = new RedisTokenBucket(redis, key, { tps: 40 });
    const times: number[] = [];
    const run = async (bucket: RedisTokenBucket): Promise<void> => {
      for (let i = 0; i < 30; i++) {
        if (!bucket.tryTake()) await bucket.take();
        times.push(performance.now());
      }
    };
    await Promise.all([run(a), run(b)]);
    times.sort((x, y) => x - y);
    let worst = 0;
    for (let i = 0; i < times.length; i++) {
      const inWindow = times.filter((t) => t >= times[i]! && t < times[i]! + 1000).length;
      worst = Math.max(worst, inWindow);
    }
    assert.ok(worst <= 40, `never more than the budget in any second (saw ${worst})`);
    assert.ok(times[40]! - times[0]! >= 1000, `the 41st token waited for the window (${Math.round(times[40]! - times[0]!)} ms)`);
    // Paced: a burst of two leases (2 x 4 tokens), then a lease per 100 ms.
    assert.ok(times[16]! - times[0]! >= 150, `paced, not a second's budget at once (${Math.round(times[16]! - times[0]!)} ms for 17)`);
    await Promise.all([a.close(), b.close()]);
    assert.equal(a.stats.tokens + b.stats.tokens, 60);
    const { leases, nowUs } = await leaseBook(key);
    const held = leases.reduce((sum, [m]) => sum + Number(m.split(':')[2]), 0);
    assert.ok(held > 0 && held <= 60, `after close the book holds only tokens really spent (${held})`);
    // A spend is placed no earlier than it could have happened (up to a lease call's round trip
    // late), so "at its last spend" is checked with that slack; an unsettled lease would end about
    // 500 ms (its validity) after its grant, right before close().
    assert.ok(leases.every(([, end]) => end <= nowUs + SPEND_SLACK_US), 'settled: every lease ends at its last spend, none at its validity');
  });

  it('a lease that can start soon is granted for that start, not refused, and not spent before it', T, async () => {
    const key = `${prefix}:tb-ahead`;
    // tps 10: leases of one token, paced 100 ms apart; the 11th token waits for the window.
    const a = new RedisTokenBucket(redis, key, { tps: 10 });
    const times: number[] = [];
    for (let i = 0; i < 14; i++) {
      await a.take();
      times.push(performance.now());
    }
    await a.close();
    assert.equal(a.stats.refused, 0, 'every wait (pacing, then the window) was within the grant-ahead horizon');
    assert.equal(a.stats.grants, 14, 'one lease per token');
    assert.ok(worstWindow(times) <= 10, `never more than tps in a second (saw ${worstWindow(times)})`);
    assert.ok(times[10]! - times[0]! >= 1000, `the 11th token waited for the window (${Math.round(times[10]! - times[0]!)} ms)`);
    // Paced on Redis's clock: the third token's lease starts 100 ms after the first's; seen from
    // here, less the first call's round trip.
    assert.ok(times[2]! - times[0]! >= 90, `paced: the third token a lease interval after the first (${Math.round(times[2]! - times[0]!)} ms)`);
  });

  it('a lease granted ahead starts and ends on whole µs, as returned (a pacing wait that is not)', T, async () => {
    const key = `${prefix}:tb-ahead-us`;
    // Leases of 997 tokens at 156.25 µs each, a burst of 1,000: the second lease waits for pacing,
    // a wait ending in .25 µs (Redis's clock in µs is exact to a quarter at today's magnitude).
    const args = (id: string): Array<string | number> => [100_000, 1_020_000, 156.25, 1000, 997, id, 500_000, 0, 250_000];
    const replies: number[][] = [];
    for (const id of ['a', 'b']) replies.push(((await redis.eval(TPS_LEASE_LUA, 1, key, ...args(id))) as number[]).map(Number));
    const [granted, nowUs, waitUs] = replies[1]!;
    assert.equal(granted, 997, `granted ahead, not refused: ${JSON.stringify(replies)}`);
    assert.ok(waitUs! > 0 && Number.isInteger(waitUs), `a later start, in whole µs (${waitUs})`);
    assert.equal(Number(await redis.zscore(key, 'L:b:997')), nowUs! + waitUs! + 500_000, 'the book ends it where the caller does: now + wait + validity');
  });

  it('an idle limiter gives its unspent tokens back: its lease shrinks to what it spent', T, async () => {
    const key = `${prefix}:tb-idle`;
    const a = new RedisTokenBucket(redis, key, { tps: 400, leaseValidityMs: 100 });
    await a.take();
    const members = async (): Promise<string[]> => (await redis.zrange(key, '0', '-1')).filter((m) => m.startsWith('L:'));
    const [lease] = await members();
    assert.match(lease ?? '', /^L:[^:]+:10$/, 'a first lease of a quarter of the largest (tps 400: 40)');
    await sleep(250); // expired after 100 ms, settled 50 ms later
    assert.deepEqual(await members(), [lease!.replace(/:10$/, ':1')], 'the nine unspent tokens went back');
    assert.equal(a.stats.calls, 2, 'one grant, one settlement');
    await a.close();
  });

  it('close() settles a lease that was still being asked for ahead of need', T, async () => {
    const key = `${prefix}:tb-close-in-flight`;
    const a = new RedisTokenBucket(redis, key, { tps: 400 });
    await a.take(); // a first lease of 10 (a quarter of the largest, 40)
    for (let i = 0; i < 7; i++) assert.ok(a.tryTake());
    // 8 of 10 spent at once: the next lease is asked for now, in the background; close at once.
    await a.close();
    const { leases, nowUs } = await leaseBook(key);
    assert.equal(a.stats.grants, 2, 'the lease asked for ahead was granted');
    assert.deepEqual(leases.map(([m]) => m.split(':')[2]), ['8'], 'only the 8 tokens spent are held; the second lease gave all back');
    assert.ok(leases.every(([, end]) => end <= nowUs + SPEND_SLACK_US), 'settled at its last spend, not at its validity');
  });

  it('never spends a lease after its validity', T, async () => {
    const key = `${prefix}:tb-expiry`;
    const a = new RedisTokenBucket(redis, key, { tps: 1000, leaseValidityMs: 50 });
    await a.take();
    assert.ok(a.tryTake(), 'the lease has more tokens');
    await sleep(70);
    assert.equal(a.tryTake(), false, 'expired: no token without asking Redis again');
    await a.close();
  });

  it('pause() holds every limiter on the key', T, async () => {
    const key = `${prefix}:tb-pause`;
    const a = new RedisTokenBucket(redis, key, { tps: 1000 });
    const b = new RedisTokenBucket(redis, key, { tps: 1000 });
    await a.pause(300);
    const started = Date.now();
    await b.take();
    assert.ok(Date.now() - started >= 250, 'the other limiter waited for the pause');
  });
});
