/**
 * SMS over SMPP end to end: the real service (HTTP, engine, status and webhook workers) with
 * SANDBOX off and SMPP_URL pointing at the SMSC simulator over real TCP on 127.0.0.1, and a local
 * webhook receiver as the message callback. What the SMSC received is read back from the
 * simulator's records; what the customer sees, from the webhook events.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SmscSimulator, type SimIdForm, type SmscSimulatorOptions, type SubmittedRecord } from '../../scripts/smsc-simulator.js';
import { applyReports, priorHandOvers } from '../../shared/engine/status.js';
import { planSms } from '../../shared/sms/gsm7.js';
import { normalizeMessageId } from '../../shared/carriers/smpp/pdu.js';
import { startReceiver, startTestService, waitFor, type Receiver, type TestService } from '../support/harness.js';

const T = { timeout: 30_000 };
const FIRST_ID = 0x10000000; // hex ids are all digits, decimal ids have 9: every id form is exercised
const SENDER = 'Switchboard';

let sim: SmscSimulator;
let svc: TestService;
let receiver: Receiver;
let apiKey: string;
let accountId: number;

before(async () => {
  sim = new SmscSimulator({ systemId: 'sb', password: 's3cret', receiptDelayMs: 30, firstId: FIRST_ID });
  const { port } = await sim.start();
  receiver = await startReceiver();
  svc = await startTestService({
    env: { SMPP_URL: `smpp://sb:s3cret@127.0.0.1:${port}?window=10&enquire_link=1&country=CZ`, SANDBOX: '0' },
  });
  ({ apiKey, accountId } = await svc.createAccount());
});

after(async () => {
  await svc?.stop();
  await receiver?.close();
  await sim?.stop();
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Event = any;

async function send(to: string[], text: string, sms: Record<string, unknown> = {}, key = apiKey): Promise<string[]> {
  const res = await svc.request('POST', '/v2/message', {
    body: { body: text, to: to.map((phone_number) => ({ phone_number })), flow: [{ sms: { sender: SENDER, ...sms } }], callback: receiver.url },
    headers: { 'x-api-key': key },
  });
  assert.equal(res.status, 200, res.text);
  return (res.body.accepted as Array<{ message_id: string }>).map((a) => a.message_id);
}

const eventsOf = (id: string): Event[] => receiver.events().filter((e: Event) => e.message_id === id);
const resultsOf = (id: string): string[] => eventsOf(id).map((e: Event) => e.result);

async function waitResult(id: string, result: string, timeoutMs = 10_000): Promise<Event> {
  try {
    return await waitFor(() => eventsOf(id).find((e: Event) => e.result === result), timeoutMs, `${id} ${result}`);
  } catch (err) {
    // Say where it stopped: the attempt, its part refs, parked receipts and what the SMSC saw.
    const refs = await svc.sql(
      `SELECT a.id, a.state, a.phone, c.ref, c.part, c.state AS ref_state FROM attempts a JOIN recipients r ON r.id = a.recipient_id
         LEFT JOIN carrier_refs c ON c.attempt_id = a.id WHERE r.public_id = $1`, [id],
    );
    const parked = await svc.sql('SELECT carrier, ref, state FROM carrier_refs WHERE attempt_id IS NULL');
    const phone = (refs[0] as { phone?: string } | undefined)?.phone ?? '';
    const seen = recordsTo(phone).map((r) => [r.messageId, r.commandStatus, r.concat?.seq]);
    throw new Error(`${(err as Error).message}; events ${JSON.stringify(resultsOf(id))}; refs ${JSON.stringify(refs)}; parked ${JSON.stringify(parked)}; smsc ${JSON.stringify(seen)}`);
  }
}

/**
 * Sends `count` numbers `42077<group>NN03` (03: the SMSC sends no receipt), waits until each is
 * `sent`, and returns them in order: public id and attempt id.
 */
async function sentWithoutReceipt(group: string, count: number, text: string): Promise<Array<{ publicId: string; attemptId: number }>> {
  const ids = await send(Array.from({ length: count }, (_, i) => `42077${group}${String(i).padStart(2, '0')}03`), text);
  for (const id of ids) await waitResult(id, 'sent');
  const rows = await svc.sql<{ id: number; public_id: string }>(
    `SELECT a.id, r.public_id FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = ANY($1)`, [ids],
  );
  const attemptOf = new Map(rows.map((r) => [r.public_id, r.id]));
  return ids.map((publicId) => ({ publicId, attemptId: attemptOf.get(publicId)! }));
}

const recordsTo = (phone: string): SubmittedRecord[] => sim.submitted.filter((r) => r.destination_addr === phone);

/** A further SMSC with a connection of its own (admin API) for the destinations under `route`; both removed afterwards. */
async function withOwnSmsc(name: string, route: string, options: SmscSimulatorOptions, fn: (own: SmscSimulator) => Promise<void>): Promise<void> {
  const own = new SmscSimulator({ systemId: 'sb', password: 's3cret', receiptDelayMs: 30, ...options });
  const { port } = await own.start();
  try {
    const created = await svc.admin('POST', '/carriers', { name, url: `smpp://sb:s3cret@127.0.0.1:${port}?window=10`, routes: [route] });
    assert.equal(created.status, 201, created.text);
    await waitFor(() => own.boundSessions === 1, 5_000, `${name} bound`);
    await fn(own);
  } finally {
    await svc.admin('DELETE', `/carriers/${name}`);
    await own.stop();
  }
}

describe('SMS over SMPP', () => {
  it('binds and delivers a short SMS with the SMPP-path event fields and submit_sm parameters', T, async () => {
    await waitFor(() => sim.boundSessions === 1, 5_000, 'bind');
    const [id] = await send(['+420 777 123 456'], 'Hello from SMPP');
    const delivered = await waitResult(id!, 'delivered');
    assert.deepEqual(resultsOf(id!), ['sending', 'sent', 'delivered']);
    assert.equal(delivered.gateway, 'sms');
    assert.equal(delivered.result_info, '[0] Delivered');
    assert.deepEqual(delivered.sms, { sender: SENDER, country: 230, operator: 0, price_czk: 0.9, price_eur: 0.036, count: 1, gateway: 'high' });

    const [record] = recordsTo('420777123456');
    assert.ok(record);
    assert.equal(record.text, 'Hello from SMPP');
    assert.deepEqual([record.source_addr, record.source_addr_ton, record.source_addr_npi], [SENDER, 5, 0]);
    assert.deepEqual([record.dest_addr_ton, record.dest_addr_npi], [1, 1]);
    assert.equal(record.registered_delivery, 1);
    assert.equal(record.data_coding, 0);
    assert.equal(record.esm_class, 0);
    assert.equal(record.validity_period, '000001000000000R', 'validity = default ttl of the last step (1440 min)');

    const [attempt] = await svc.sql<{ carrier: string; parts: number; id: number }>(
      `SELECT a.id, a.carrier, a.parts FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1`, [id],
    );
    assert.equal(attempt?.carrier, 'smpp.default');
    const refs = await svc.sql<{ ref: string; state: string }>('SELECT ref, state FROM carrier_refs WHERE attempt_id = $1', [attempt?.id]);
    assert.equal(refs.length, 1);
    // The receipt of a registered one-part ref moves the attempt only; its ref row stays as registered.
    assert.equal(refs[0]?.state, 'sent');
  });

  it('splits a 400-character GSM-7 text into 3 UDH parts, bills 3 and is delivered only after every part', T, async () => {
    const phone = '420777200009';
    const text = 'A'.repeat(150) + 'B'.repeat(150) + 'C'.repeat(100);
    // Hold the receipt of the last part: the first two arrive at once.
    sim.options.receiptDelayFor = (r) => (r.destination_addr === phone && r.concat?.seq === 3 ? 1_500 : null);
    try {
      const [id] = await send([phone], text, { ttl: 30 });
      await waitResult(id!, 'sent');
      await waitFor(() => sim.counters.receiptsAcked >= 0 && recordsTo(phone).length === 3, 5_000, 'three parts');
      await new Promise((r) => setTimeout(r, 700));
      assert.ok(!resultsOf(id!).includes('delivered'), 'not delivered while a part is still out');
      const [row] = await svc.sql<{ state: string }>('SELECT state FROM recipient_states WHERE public_id = $1', [id]);
      assert.equal(row?.state, 'sent');
      const delivered = await waitResult(id!, 'delivered');
      assert.equal(delivered.sms.count, 3);
      assert.equal(delivered.sms.price_czk, 2.7);
      assert.deepEqual(resultsOf(id!), ['sending', 'sent', 'delivered']);
      // Its hand-over is committed: Redis keeps nothing of its accepted parts (they guard a re-hand).
      const [{ id: attemptId }] = await svc.sql<{ id: number }>(
        'SELECT a.id FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1', [id]) as [{ id: number }];
      const acc = `${svc.config.redisPrefix}:smpp:default:acc64:${Math.floor(attemptId / 64)}`;
      await waitFor(async () => !(await svc.runtime.redis.hkeys(acc)).some((f) => f.startsWith(`${attemptId}:`)), 5_000, 'accepted parts forgotten');
    } finally {
      sim.options.receiptDelayFor = undefined;
    }
    const parts = recordsTo(phone);
    assert.deepEqual(parts.map((r) => r.concat?.seq), [1, 2, 3]);
    assert.deepEqual(parts.map((r) => r.concat?.total), [3, 3, 3]);
    assert.equal(new Set(parts.map((r) => r.concat?.ref)).size, 1);
    assert.ok(parts.every((r) => r.esm_class === 0x40 && r.udh?.subarray(0, 3).equals(Buffer.from([5, 0, 3]))));
    assert.equal(parts.map((r) => r.text).join(''), text);
    assert.deepEqual(parts.map((r) => r.text.length), [153, 153, 94]);
    assert.ok(parts.every((r) => r.validity_period === '000000003000000R'), 'validity from the step ttl (30 min)');
  });

  it('sends UCS-2 as data_coding 8 in parts of 67 characters', T, async () => {
    const phone = '420777300009';
    const text = 'Příliš žluťoučký kůň úpěl ďábelské ódy. '.repeat(4).trim(); // 159 characters
    const [id] = await send([phone], text);
    const delivered = await waitResult(id!, 'delivered');
    assert.equal(delivered.sms.count, 3);
    const parts = recordsTo(phone);
    assert.deepEqual(parts.map((r) => r.data_coding), [8, 8, 8]);
    assert.deepEqual(parts.map((r) => r.text.length), [67, 67, 25]);
    assert.deepEqual(parts.map((r) => r.concat?.seq), [1, 2, 3]);
    assert.equal(parts.map((r) => r.text).join(''), text);
  });

  it('maps SMSC outcomes: error status → failed with the SMPP code and a refund, UNDELIV, REJECTD, no receipt', T, async () => {
    const own = await svc.createAccount({ credit_czk: 100 });
    const ids = await send(['420777400002', '420777400001', '420777400005', '420777400003'], 'Outcomes', {}, own.apiKey);
    const [failedId, undeliveredId, rejectedId, silentId] = ids as [string, string, string, string];
    const failed = await waitResult(failedId, 'failed');
    assert.equal(failed.result_info, '[8] ESME_RSYSERR');
    assert.deepEqual(resultsOf(failedId), ['sending', 'failed']);
    assert.equal((await waitResult(undeliveredId, 'undelivered')).result_info, '[1] Undelivered (UNDELIV err:001)');
    assert.equal((await waitResult(rejectedId, 'rejected')).result_info, '[2] Rejected (REJECTD err:002)');
    await waitResult(silentId, 'sent');
    const account = await svc.admin('GET', `/accounts/${own.accountId}`);
    assert.equal(account.body.credit_czk, 100 - 3 * 0.9, 'the failed attempt was refunded');
  });

  it('matches receipts whatever the id forms, learned per connection: hex or decimal, case, leading zeros, opaque strings', { timeout: 60_000 }, async () => {
    const combos: Array<[SimIdForm, SimIdForm | 'same']> = [
      ['hex', 'decimal'],
      ['decimal', 'hex'],
      ['hex', 'hex-lower'],
      ['hex-lower', 'hex'],
      ['decimal', 'decimal-padded'],
      ['string', 'same'],
    ];
    // Each on an SMSC of its own (an SMSC writes its ids one way): the connection learns that way
    // from its first receipts (a few, kept until then) and applies every receipt to its own message.
    await Promise.all(combos.map(([idForm, receiptIdForm], i) => withOwnSmsc(`forms${i}`, `42079${i}`, { idForm, receiptIdForm, firstId: FIRST_ID }, async () => {
      const ids = await send(Array.from({ length: 5 }, (_, k) => `42079${i}00${k}009`), `Id forms ${idForm}/${receiptIdForm}`);
      for (const id of ids) await waitResult(id, 'delivered', 20_000);
    })));
  });

  it('never applies a receipt to another message when Redis loses index entries (decimal ids 10, 11, …)', { timeout: 90_000 }, async () => {
    // Decimal ids from 10: a receipt id read another way names an older message (32 = 0x20 → "20").
    // Redis loses the index entries of the last second's submits (as with AOF everysec) while the
    // connection still learns its SMSC's id form, and then, once it is known, everything it had.
    await withOwnSmsc('lossy', '420798', { idForm: 'decimal', firstId: 10, receiptDelayMs: 150 }, async (own) => {
      const outcome = ['09', '01', '05'] as const;
      const expected = { '09': 'delivered', '01': 'undelivered', '05': 'rejected' } as const;
      const phoneAt = (n: number): string => `420798${String(n).padStart(4, '0')}${outcome[n % 3]}`;
      const redis = svc.runtime.redis;
      const base = `${svc.prefix}:smpp:lossy`;
      const indexKey = (r: SubmittedRecord): string => `${base}:id:${normalizeMessageId(r.messageId ?? '')[0]}`;
      /** Deletes, every 10 ms, the index entries of the submits `which` selects. */
      const losing = async <T>(which: (r: SubmittedRecord) => boolean, fn: () => Promise<T>): Promise<T> => {
        let on = true;
        const loser = (async () => {
          while (on) {
            const keys = own.submitted.filter(which).map(indexKey);
            if (keys.length > 0) await redis.del(...keys);
            await new Promise((r) => setTimeout(r, 10));
          }
        })();
        try {
          return await fn();
        } finally {
          on = false;
          await loser;
        }
      };
      const ids: string[] = [];
      const phones: string[] = [];
      // Ten recipients per call (the API's bound); waits until the SMSC sent every receipt.
      const batch = async (from: number, n: number): Promise<void> => {
        const list = Array.from({ length: n }, (_, k) => phoneAt(from + k));
        const sent = await Promise.all(Array.from({ length: Math.ceil(n / 10) }, (_, k) => send(list.slice(10 * k, 10 * k + 10), 'Lossy')));
        ids.push(...sent.flat());
        phones.push(...list);
        await waitFor(() => own.counters.receiptsSent >= phones.length, 10_000, 'receipts');
        await new Promise((r) => setTimeout(r, 700)); // the learning grace
      };
      await batch(0, 15);
      await losing((r) => r.receivedAt > Date.now() - 1_000, () => batch(15, 30));
      await batch(45, 15);
      const [formKey] = await redis.keys(`${base}:idform:*`);
      assert.equal(await redis.get(formKey!), 'same', 'learned: decimal ids both ways');
      // Known now: receipts no longer depend on Redis, not even on the learned form itself.
      await losing(() => true, async () => {
        await redis.del(formKey!);
        await batch(60, 15);
      });
      for (const [k, id] of ids.entries()) {
        await waitResult(id, expected[phones[k]!.slice(-2) as keyof typeof expected], 20_000);
      }
      // Every recipient exactly its own events: no other final result, nothing applied twice.
      for (const [k, id] of ids.entries()) {
        assert.deepEqual(resultsOf(id), ['sending', 'sent', expected[phones[k]!.slice(-2) as keyof typeof expected]], `${id} (${phones[k]})`);
      }
      assert.equal(await redis.hlen(`${base}:rcpt:parked`), 0, 'nothing left kept');
    });
  });

  it('applies receipts to the new messages when a restarted SMSC issues its ids again', { timeout: 60_000 }, async () => {
    // An SMSC that counts its ids from 1 again after a restart (SMPPSim, many small SMSCs): the
    // ids of earlier, finished messages come back for new ones, and their receipts name the new ones.
    await withOwnSmsc('restarted', '420795', { idForm: 'decimal', firstId: 700 }, async (own) => {
      const before = await send(['+420795000109', '+420795000209'], 'Before the SMSC restarts');
      for (const id of before) await waitResult(id, 'delivered');
      const port = own.port;
      await own.stop();
      const again = new SmscSimulator({ systemId: 'sb', password: 's3cret', receiptDelayMs: 30, idForm: 'decimal', firstId: 700, port });
      await again.start();
      try {
        await waitFor(() => again.boundSessions === 1, 10_000, 'rebound to the restarted SMSC');
        // The same ids 700 and 701 again; the first ends undelivered this time, the second delivered.
        const after = await send(['+420795000301', '+420795000409'], 'After the SMSC restarted');
        await waitResult(after[0]!, 'undelivered');
        await waitResult(after[1]!, 'delivered');
        assert.deepEqual(again.submitted.map((r) => r.messageId).sort(), ['700', '701']);
        assert.deepEqual(resultsOf(after[0]!), ['sending', 'sent', 'undelivered']);
        assert.deepEqual(resultsOf(after[1]!), ['sending', 'sent', 'delivered']);
        // The earlier messages keep their own outcome and get no further event.
        for (const id of before) assert.deepEqual(resultsOf(id), ['sending', 'sent', 'delivered']);
      } finally {
        await again.stop();
      }
    });
  });

  it('reads receipts and MO that the SMSC delivers as data_sm', T, async () => {
    const update = await svc.request('POST', '/v1/apikey/update', { body: { default_callback_url: receiver.url }, headers: { 'x-api-key': apiKey } });
    assert.equal(update.status, 200, update.text);
    const assign = await svc.admin('POST', '/numbers', { account_id: accountId, value: '420600999777', channels: ['sms'] });
    assert.equal(assign.status, 201, assign.text);
    await withOwnSmsc('datasm', '420794', { deliverWith: 'data_sm', idForm: 'decimal', firstId: 900 }, async (own) => {
      const [delivered, undelivered] = await send(['+420794000109', '+420794000201'], 'Receipts as data_sm');
      await waitResult(delivered!, 'delivered');
      await waitResult(undelivered!, 'undelivered');
      assert.deepEqual(resultsOf(delivered!), ['sending', 'sent', 'delivered']);
      assert.deepEqual(resultsOf(undelivered!), ['sending', 'sent', 'undelivered']);
      await waitFor(() => own.counters.receiptsAcked === 2, 5_000, 'both data_sm_resp with status 0');
      assert.equal(own.counters.receiptsNacked, 0);

      const mo = await own.sendMo({ from: '420777000333', to: '420600999777', text: 'Hello over data_sm, včetně háčků' });
      assert.deepEqual(mo.statuses, [0]);
      const incoming = await waitFor(
        () => receiver.events().find((e: Event) => e.type === 'incoming' && e.sender === '420777000333'), 10_000, 'incomingMessage',
      );
      assert.equal(incoming.recipient, '420600999777');
      assert.equal(incoming.body, 'Hello over data_sm, včetně háčků');
    });
  });

  it('does not lose a receipt that overtakes its submit_sm_resp', T, async () => {
    sim.options.receiptFirst = true;
    try {
      const [id] = await send(['420777600009'], 'Receipt first', {});
      await waitResult(id!, 'delivered');
      assert.deepEqual(resultsOf(id!), ['sending', 'sent', 'delivered']);
    } finally {
      sim.options.receiptFirst = false;
    }
  });

  it('applies a receipt whose status job runs at the same time as the one registering its ref', T, async () => {
    // Two status workers: one registers a ref (submit_sm_resp), the other gets its receipt. Neither
    // transaction sees the other's uncommitted row, so without serialising per ref the receipt was
    // parked after the registering transaction had looked for it: lost.
    const sent = await sentWithoutReceipt('765', 10, 'Race');
    const ids = sent.map((s) => s.publicId);
    const deps = svc.runtime.engine.deps;
    await Promise.all(sent.flatMap(({ attemptId }) => {
      const ref = `race-${attemptId}`;
      return [
        applyReports(deps, [{ attemptId, carrier: 'smpp.race', ref, part: 0, partCount: 1, state: 'sent', resultInfo: 'Sent', at: Date.now() }]),
        applyReports(deps, [{ carrier: 'smpp.race', ref, state: 'delivered', resultInfo: '[0] Delivered', at: Date.now() }]),
      ];
    }));
    for (const id of ids) await waitResult(id, 'delivered', 5_000);
    assert.deepEqual(await svc.sql(`SELECT ref FROM carrier_refs WHERE carrier = 'smpp.race' AND attempt_id IS NULL`), [], 'no receipt left parked');
  });

  it('batches that each register one ref and carry the receipt of the other apply both, without a deadlock', T, async () => {
    // A registers x and has y's receipt; B registers y and has x's receipt. Written as two
    // statements per batch, each took one key and waited for the other's (a deadlock).
    const sent = await sentWithoutReceipt('767', 8, 'Cross');
    const ids = sent.map((s) => s.publicId);
    const rows = sent.map((s) => ({ id: s.attemptId })).sort((a, b) => a.id - b.id);
    const deps = svc.runtime.engine.deps;
    const register = (id: number) => ({ attemptId: id, carrier: 'smpp.cross', ref: `cross-${id}`, part: 0, partCount: 1, state: 'sent' as const, resultInfo: 'Sent', at: Date.now() });
    const receipt = (id: number) => ({ carrier: 'smpp.cross', ref: `cross-${id}`, state: 'delivered' as const, resultInfo: '[0] Delivered', at: Date.now() });
    // A deadlock would fail one of these calls (40P01): applyReports is called directly here.
    await Promise.all(Array.from({ length: rows.length / 2 }, (_, i) => {
      const [x, y] = [rows[2 * i]!.id, rows[2 * i + 1]!.id];
      return Promise.all([applyReports(deps, [register(x), receipt(y)]), applyReports(deps, [register(y), receipt(x)])]);
    }));
    for (const id of ids) await waitResult(id, 'delivered', 5_000);
    assert.deepEqual(await svc.sql(`SELECT ref FROM carrier_refs WHERE carrier = 'smpp.cross' AND attempt_id IS NULL`), [], 'no receipt left parked');
  });

  it('keeps the receipt further along when a later one for the same ref is less so: parked, within one batch, and registered', T, async () => {
    // A DELIVRD then an intermediate report (ENROUTE, read as `sent`) for one ref: parked until the
    // ref is registered, the later one replaced the earlier; met in one status batch, only the
    // batch's last was applied; met in the batch that registers the ref, the batch's was applied.
    // Each way the attempt stayed `sent` and its delivery was lost.
    const sent = await sentWithoutReceipt('768', 4, 'Order');
    const ids = sent.map((s) => s.publicId);
    const [parked, oneBatch, registered, withRegistration] = sent.map((s) => s.attemptId);
    const deps = svc.runtime.engine.deps;
    const register = (id: number) => ({ attemptId: id, carrier: 'smpp.order', ref: `order-${id}`, part: 0, partCount: 1, state: 'sent' as const, resultInfo: 'Sent', at: Date.now() });
    const delivered = (id: number) => ({ carrier: 'smpp.order', ref: `order-${id}`, state: 'delivered' as const, resultInfo: '[0] Delivered', at: Date.now() });
    const enroute = (id: number) => ({ carrier: 'smpp.order', ref: `order-${id}`, state: 'sent' as const, resultInfo: 'ENROUTE', at: Date.now() });
    await applyReports(deps, [delivered(parked!)]);
    await applyReports(deps, [enroute(parked!)]);
    // Parked, then a batch that registers the ref and brings a report less far along: the parked one is applied.
    await applyReports(deps, [delivered(withRegistration!)]);
    await applyReports(deps, [register(withRegistration!), enroute(withRegistration!)]);
    await applyReports(deps, [delivered(oneBatch!), enroute(oneBatch!)]);
    assert.deepEqual(await svc.sql(`SELECT ref, state, result_info FROM carrier_refs WHERE carrier = 'smpp.order' AND attempt_id IS NULL ORDER BY ref`),
      [parked, oneBatch].map((id) => `order-${id}`).sort().map((ref) => ({ ref, state: 'delivered', result_info: '[0] Delivered' })), 'the delivery is what stays parked');
    await applyReports(deps, [register(parked!), register(oneBatch!), register(registered!)]);
    await applyReports(deps, [delivered(registered!), enroute(registered!)]);
    for (const id of ids) await waitResult(id, 'delivered', 5_000);
    for (const id of ids) assert.deepEqual(resultsOf(id), ['sending', 'sent', 'delivered'], id);
  });

  it('delivers a long message when its part receipts are applied by concurrent status jobs', T, async () => {
    // Each job marks its own part delivered and counts the delivered parts; unserialised, none saw all three.
    const phones = Array.from({ length: 10 }, (_, i) => `42077766${String(i).padStart(2, '0')}03`); // 03: no SMSC receipt
    const ids = await send(phones, 'P'.repeat(400));
    for (const id of ids) await waitResult(id, 'sent');
    // `sent` comes with the first part's submit response; the other parts' refs follow in later status batches.
    const refs = await waitFor(async () => {
      const rows = await svc.sql<{ ref: string; carrier: string }>(
        `SELECT c.ref, c.carrier FROM carrier_refs c JOIN attempts a ON a.id = c.attempt_id JOIN recipients r ON r.id = a.recipient_id
          WHERE r.public_id = ANY($1)`, [ids],
      );
      return rows.length === 30 ? rows : null;
    }, 5_000, 'all 30 part refs registered');
    assert.equal(refs.length, 30);
    const deps = svc.runtime.engine.deps;
    await Promise.all(refs.map((c) => applyReports(deps, [{ carrier: c.carrier, ref: c.ref, state: 'delivered', resultInfo: '[0] Delivered', at: Date.now() }])));
    for (const id of ids) await waitResult(id, 'delivered', 5_000);
  });

  it('retries throttled parts later without reordering them', T, async () => {
    const phone = '420777700009';
    let partsSeen = 0;
    const onSubmit = (r: SubmittedRecord): void => {
      if (r.destination_addr !== phone) return;
      partsSeen++;
      if (partsSeen === 1) sim.throttleNext(2); // part 2 is throttled twice
    };
    sim.on('submit', onSubmit);
    try {
      const [id] = await send([phone], 'T'.repeat(400));
      await waitResult(id!, 'delivered');
    } finally {
      sim.off('submit', onSubmit);
    }
    const records = recordsTo(phone);
    assert.deepEqual(records.map((r) => [r.concat?.seq, r.commandStatus]), [[1, 0], [2, 0x58], [2, 0x58], [2, 0], [3, 0]]);
    const [, throttled, , retried] = records;
    assert.ok(retried!.receivedAt - throttled!.receivedAt >= 150, 'the connection slowed down after ESME_RTHROTTLED');
  });

  /**
   * A connection of its own whose SMSC accepts part 1 of a message to `phone` and then answers
   * ESME_RTHROTTLED until `fn` lets it go (`release`), so parts 2 and 3 wait meanwhile.
   */
  async function withPartsHeldAfterFirst(
    name: string, route: string, phone: string, fn: (own: SmscSimulator, url: string, release: () => void) => Promise<void>,
  ): Promise<void> {
    const own = new SmscSimulator({ systemId: 'sb', password: 's3cret', receiptDelayMs: 30 });
    const { port } = await own.start();
    const onSubmit = (r: SubmittedRecord): void => {
      if (r.destination_addr === phone && r.concat?.seq === 1 && r.commandStatus === 0) own.setMode({ throttle: true });
    };
    const release = (): void => {
      own.off('submit', onSubmit);
      own.setMode({ throttle: false });
    };
    own.on('submit', onSubmit);
    try {
      const url = `smpp://sb:s3cret@127.0.0.1:${port}?window=10`;
      assert.equal((await svc.admin('POST', '/carriers', { name, url, routes: [route] })).status, 201);
      await waitFor(() => own.boundSessions === 1, 5_000, 'bound');
      await fn(own, url, release);
    } finally {
      release();
      await svc.admin('DELETE', `/carriers/${name}`);
      await own.stop();
    }
  }

  const attemptIdOf = async (id: string): Promise<number> => (await svc.sql<{ id: number }>(
    'SELECT a.id FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1', [id]))[0]!.id;

  for (const lost of [false, true]) {
    it(`sends the rest of a long message whose connection was replaced midway, and no part twice${lost ? ', with Redis\'s record of its parts lost' : ''}`, T, async () => {
      // The operator changes the connection's settings while parts 2 and 3 wait: the old link closes
      // and gives them back to the engine, whose retry hands the attempt again over the new link.
      const name = lost ? 'midway2' : 'midway';
      const phone = lost ? '420795000009' : '420796000009';
      await withPartsHeldAfterFirst(name, phone.slice(0, 6), phone, async (own, url, release) => {
        const [id] = await send([phone], 'M'.repeat(400));
        await waitFor(() => own.submitted.some((r) => r.commandStatus === 0x58), 5_000, 'part 2 throttled');
        const attemptId = await attemptIdOf(id!);
        if (lost) {
          // Redis lost what the SMSC accepted; Postgres has part 1's ref.
          await waitFor(async () => (await svc.sql('SELECT 1 FROM carrier_refs WHERE attempt_id = $1', [attemptId])).length === 1, 5_000, 'part 1 registered');
          await svc.runtime.redis.del(`${svc.config.redisPrefix}:smpp:${name}:acc64:${Math.floor(attemptId / 64)}`);
        }
        const changed = await svc.admin('POST', '/carriers', { name, url: url.replace('window=10', 'window=5'), routes: [phone.slice(0, 6)] });
        assert.equal(changed.status, 200, changed.text);
        await waitFor(() => own.counters.unbinds >= 1, 5_000, 'the old link closed');
        release();
        await waitResult(id!, 'delivered', 15_000);
        assert.deepEqual(resultsOf(id!), ['sending', 'sent', 'delivered']);
        const parts = own.submitted.filter((r) => r.destination_addr === phone && r.commandStatus === 0);
        assert.deepEqual(parts.map((r) => r.concat?.seq), [1, 2, 3], 'every part once, in order');
        assert.equal(new Set(parts.map((r) => r.concat?.ref)).size, 1, 'one concatenation reference');

        // A late run of the same dispatch job (one BullMQ took for stalled) resumes it now, after
        // Redis forgot its parts: Postgres records it handed over, so nothing is sent or reported.
        const carrierName = `smpp.${name}`;
        const fieldsLeft = async (): Promise<number> => (await svc.runtime.redis.hkeys(`${svc.config.redisPrefix}:smpp:${name}:acc64:${Math.floor(attemptId / 64)}`))
          .filter((f) => f.startsWith(`${attemptId}:`)).length;
        await waitFor(async () => (await fieldsLeft()) === 0, 5_000, 'Redis forgot the accepted parts');
        const prior = await priorHandOvers(svc.runtime.db, carrierName, [attemptId, attemptId + 1_000_000]);
        assert.deepEqual(prior.handed, [attemptId]);
        assert.deepEqual(prior.parts.map((p) => p.part).sort(), [0, 1, 2]);
        const plan = planSms('M'.repeat(400), 'sms');
        const submittedBefore = own.submitted.length;
        // The reports the carrier gives the engine meanwhile (it holds this very sink object).
        const sink = svc.runtime.engine.sink;
        const report = sink.report;
        const reported: number[] = [];
        sink.report = (updates, opts) => {
          for (const u of updates) if (u.attemptId !== undefined) reported.push(u.attemptId);
          return report(updates, opts);
        };
        try {
          await svc.runtime.engine.carriers.byName(carrierName)!.send([{
            attemptId, recipientPublicId: id!, accountId: 1, channel: 'sms', smsGateway: 'high', to: phone, sender: 'Switchboard',
            text: plan.text, encoding: plan.encoding, parts: plan.parts, ttlMinutes: 60, rehand: true,
          }]);
        } finally {
          sink.report = report;
        }
        assert.equal(own.submitted.length, submittedBefore, 'nothing submitted');
        assert.deepEqual(reported.filter((a) => a === attemptId), [], 'nothing reported: its hand-over is recorded');
        assert.deepEqual(resultsOf(id!), ['sending', 'sent', 'delivered']);
      });
    });
  }

  it('charges a long message whose first part was undelivered before its last part left: sent, then undelivered', T, async () => {
    const payer = await svc.createAccount({ credit_czk: 100 });
    const phone = '420794000001'; // …01: the simulator's receipts say UNDELIV
    await withPartsHeldAfterFirst('early', '420794', phone, async (own, _url, release) => {
      const [id] = await send([phone], 'U'.repeat(400), {}, payer.apiKey);
      await waitResult(id!, 'undelivered');
      release();
      await waitFor(() => own.submitted.filter((r) => r.destination_addr === phone && r.commandStatus === 0).length === 3, 5_000, 'every part sent');
      assert.deepEqual(resultsOf(id!), ['sending', 'sent', 'undelivered'], 'the carrier took part 1: sent, then its receipt');
      const [attempt] = await svc.sql<{ refunded: boolean; reached_sent: boolean }>(
        'SELECT refunded, reached_sent FROM attempts WHERE id = $1', [await attemptIdOf(id!)]);
      assert.deepEqual(attempt, { refunded: false, reached_sent: true });
      const [account] = await svc.sql<{ credit_czk: string }>('SELECT credit_czk FROM accounts WHERE id = $1', [payer.accountId]);
      assert.equal(Number(account!.credit_czk), 100 - 2.7, 'three parts charged, not refunded (D3)');
    });
  });

  it('loses nothing when the SMSC drops the connection mid-window', T, async () => {
    const phones = Array.from({ length: 20 }, (_, i) => `4207778${String(i).padStart(4, '0')}9`);
    sim.options.responseDelayMs = 200;
    let dropAt = 0;
    let ids: string[] = [];
    try {
      const res = await svc.request('POST', '/v2/messages', {
        body: [0, 1].map((k) => ({
          body: 'Drop test', flow: [{ sms: { sender: SENDER } }], callback: receiver.url,
          to: phones.slice(k * 10, k * 10 + 10).map((phone_number) => ({ phone_number })),
        })),
        headers: { 'x-api-key': apiKey },
      });
      assert.equal(res.status, 200);
      ids = (res.body.accepted as Array<{ message_id: string }>).flatMap((a) => Array.from({ length: 10 }, (_, i) => `${a.message_id}-${i}`));
      await waitFor(() => sim.outstanding >= 5, 5_000, 'submits in flight');
      dropAt = Date.now();
      sim.dropConnections();
      sim.options.responseDelayMs = 0;
      for (const id of ids) await waitResult(id, 'delivered', 15_000);
    } finally {
      sim.options.responseDelayMs = 0;
    }
    for (const id of ids) {
      assert.deepEqual(resultsOf(id), ['sending', 'sent', 'delivered'], `${id}: every state once`);
    }
    let resent = 0;
    for (const phone of phones) {
      const records = recordsTo(phone);
      assert.ok(records.length === 1 || records.length === 2, `${phone} submitted ${records.length} times`);
      if (records.length === 2) {
        resent++;
        assert.ok(records[0]!.receivedAt <= dropAt, 'only a submit unanswered at the drop is sent again');
      }
    }
    assert.ok(resent <= 10, 'at most one window is resent');
    await waitFor(() => sim.boundSessions === 1, 5_000, 'rebound');
  });

  it('answers the SMSC enquire_link and sends its own', T, async () => {
    await waitFor(() => sim.counters.enquireLinksReceived >= 1, 5_000, 'enquire_link from the service');
    assert.equal(await sim.enquireLinkAll(2_000), 1);
  });

  it('turns MO into incomingMessage (reassembled, UCS-2) and a reply into incomingReplyMessage', T, async () => {
    const update = await svc.request('POST', '/v1/apikey/update', { body: { default_callback_url: receiver.url }, headers: { 'x-api-key': apiKey } });
    assert.equal(update.status, 200, update.text);
    const assign = await svc.admin('POST', '/numbers', { account_id: accountId, value: '420600999888', channels: ['sms'] });
    assert.equal(assign.status, 201, assign.text);

    const text = 'Dobrý den, mám dotaz k objednávce č. 12345: kdy dorazí? Děkuji, Jiří Novák. '.repeat(2);
    const mo = await sim.sendMo({ from: '420777000111', to: '420600999888', text, reverse: true });
    assert.ok(mo.parts >= 2);
    assert.deepEqual(mo.statuses, Array(mo.parts).fill(0));
    const incoming = await waitFor(
      () => receiver.events().find((e: Event) => e.type === 'incoming' && e.sender === '420777000111'), 10_000, 'incomingMessage',
    );
    assert.equal(incoming.gateway, 'sms');
    assert.equal(incoming.recipient, '420600999888');
    assert.equal(incoming.body, text);
    assert.equal(incoming.request_id, undefined, 'not a reply');

    const [sentId] = await send(['420777000222'], 'Reply YES to confirm', { sender: '420600111222' });
    await waitResult(sentId!, 'delivered');
    const numeric = recordsTo('420777000222')[0];
    assert.deepEqual([numeric?.source_addr, numeric?.source_addr_ton, numeric?.source_addr_npi], ['420600111222', 1, 1]);
    await sim.sendMo({ from: '420777000222', to: '420600111222', text: 'YES' });
    const reply = await waitFor(
      () => receiver.events().find((e: Event) => e.type === 'incoming' && e.sender === '420777000222'), 10_000, 'incomingReplyMessage',
    );
    assert.equal(reply.message_id, sentId);
    assert.ok(typeof reply.request_id === 'string');
    assert.equal(reply.body, 'YES');
    const [stored] = await svc.sql<{ reply_to_attempt: number | null }>(`SELECT reply_to_attempt FROM inbound_messages WHERE sender = '420777000222'`);
    assert.ok(stored?.reply_to_attempt);

    // An SMSC that writes MO numbers nationally (TON 2): read in the connection's country (country=CZ),
    // the reply is matched as one written internationally is.
    await sim.sendMo({ from: '777000222', to: '600111222', text: 'YES again', national: true });
    const nationalReply = await waitFor(
      () => receiver.events().find((e: Event) => e.type === 'incoming' && e.body === 'YES again'), 10_000, 'the national reply',
    );
    assert.deepEqual([nationalReply.sender, nationalReply.recipient, nationalReply.message_id], ['420777000222', '420600111222', sentId]);
  });

  it('manages more connections with destination-prefix routes through the admin API', T, async () => {
    // A second SMSC with decimal submit ids and hex receipts that arrive before the submit_sm_resp:
    // the forms are set explicitly on the connection, so receipts overtaking their id are parked.
    const sim2 = new SmscSimulator({ systemId: 'sb2', password: 'p@ss/word', idForm: 'decimal', receiptIdForm: 'hex', receiptFirst: true, firstId: 5000 });
    const { port: port2 } = await sim2.start();
    try {
      const url = `smpp://sb2:p%40ss%2Fword@127.0.0.1:${port2}?window=5&tps=50&submit_id=dec&receipt_id=hex`;
      const created = await svc.admin('POST', '/carriers', { name: 'sk', url, routes: ['421', '4219'] });
      assert.equal(created.status, 201, created.text);
      assert.deepEqual(created.body.routes, ['421', '4219']);
      assert.ok(!created.text.includes('p%40ss') && !created.text.includes('word'), 'password never shown');
      const list = await svc.admin('GET', '/carriers');
      assert.deepEqual(list.body.carriers.map((c: Event) => [c.name, c.source, c.routes]), [['default', 'env', ['']], ['sk', 'admin', ['421', '4219']]]);
      assert.ok(!list.text.includes('s3cret') && !list.text.includes('word'));
      assert.ok(list.body.carriers.every((c: Event) => String(c.url).includes(':***@')));

      await waitFor(() => sim2.boundSessions === 1, 5_000, 'second connection bound');
      const [skId] = await send(['421905123459'], 'Ahoj Slovensko');
      await waitResult(skId!, 'delivered');
      assert.equal(sim2.submitted.filter((r) => r.destination_addr === '421905123459').length, 1);
      assert.equal(recordsTo('421905123459').length, 0);
      const [attempt] = await svc.sql<{ carrier: string }>(
        `SELECT a.carrier FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1`, [skId],
      );
      assert.equal(attempt?.carrier, 'smpp.sk');

      const bad = await svc.admin('POST', '/carriers', { name: 'x', url: 'smpp://u:hunter2@host:99999' });
      assert.equal(bad.status, 400);
      assert.match(bad.body.message, /^url: /);
      assert.ok(!bad.text.includes('hunter2'));
      assert.equal((await svc.admin('POST', '/carriers', { name: 'default', url })).status, 400);
      const unknown = await svc.admin('POST', '/carriers', { name: 'y', url, colour: 'red' });
      assert.equal(unknown.status, 400);
      assert.match(unknown.body.message, /colour/);
      const taken = await svc.admin('POST', '/carriers', { name: 'other', url, routes: ['421'] });
      assert.equal(taken.status, 409);
      assert.match(taken.body.message, /421/);
      const rx = await svc.admin('POST', '/carriers', { name: 'rx', url: `${url}&bind=receiver`, routes: ['48'] });
      assert.equal(rx.status, 400);

      const deleted = await svc.admin('DELETE', '/carriers/sk');
      assert.deepEqual(deleted.body, { deleted: 'sk' });
      assert.equal((await svc.admin('DELETE', '/carriers/sk')).status, 404);
      await waitFor(() => sim2.openSessions === 0, 5_000, 'second connection unbound');
      assert.ok(sim2.counters.unbinds >= 1, 'closed with a graceful unbind');
      const [backId] = await send(['421905123469'], 'Back to the default route');
      await waitResult(backId!, 'delivered');
      assert.equal(recordsTo('421905123469').length, 1);
    } finally {
      await sim2.stop();
    }
  });
});
