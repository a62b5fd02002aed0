/**
 * AttemptFactsCache: what dispatch remembers of each attempt is exactly what Postgres stores (so a
 * status batch that takes the facts from memory writes the same events and refunds as one that
 * reads them), what a status batch reads on a miss, and the bounds.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { sendMessage, waitForTrail, type TrailEvent } from '../support/trails.js';
import { ATTEMPT_FACT_COLUMNS, AttemptFactsCache, type AttemptFacts } from '../../shared/engine/attempt-facts.js';

let svc: TestService;

before(async () => {
  svc = await startTestService();
});
after(async () => {
  await svc.stop();
});

const cache = (): AttemptFactsCache => svc.runtime.engine.deps.attemptFacts;

/** The facts of the attempts of `publicIds` as Postgres returns them. */
async function stored(publicIds: string[]): Promise<AttemptFacts[]> {
  return svc.sql<AttemptFacts>(
    `SELECT ${ATTEMPT_FACT_COLUMNS} FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = ANY($1) ORDER BY a.id`,
    [publicIds]);
}

test('dispatch remembers exactly what Postgres stores, for every kind of payer, currency, channel and part count', async () => {
  // Numbers ending in 03: the sandbox reports `sent` and never a receipt, so the attempts stay in
  // flight (their facts are let go only at a final state).
  const czk = await svc.createAccount({ currency: 'CZK', credit_czk: 1000 });
  const eur = await svc.createAccount({ currency: 'EUR', credit_eur: 100 });
  const own = await svc.request('POST', '/v1/apikey/add', { body: { shared: false, currency: 'EUR', note: 'own' }, headers: { 'x-api-key': czk.apiKey } });
  assert.equal(own.status, 200, own.text);
  assert.equal((await svc.admin('POST', `/keys/${own.body.id as number}/credit`, { amount: 5 })).status, 200);
  const long = 'Three parts of GSM-7 text, '.repeat(12); // 324 characters: 3 parts of 153
  const sends: Array<{ key: string; message: Record<string, unknown>; trail: string[] }> = [
    { key: czk.apiKey, message: { body: 'one part', to: [{ phone_number: '420777000103' }] }, trail: ['sms:sending', 'sms:sent'] },
    { key: czk.apiKey, message: { body: long, to: [{ phone_number: '420777001103' }] }, trail: ['sms:sending', 'sms:sent'] },
    // EUR: 0.036 per part, three parts: 0.10799999999999998 in binary before rounding
    { key: eur.apiKey, message: { body: long, to: [{ phone_number: '420777002103' }] }, trail: ['sms:sending', 'sms:sent'] },
    { key: own.body.apikey as string, message: { body: long, to: [{ phone_number: '420777003103' }] }, trail: ['sms:sending', 'sms:sent'] },
    { key: czk.apiKey, message: { body: 'viber', to: [{ phone_number: '420777004603' }], flow: [{ viber: { sender: 'Shop' } }] }, trail: ['viber:sending', 'viber:sent'] },
  ];
  const publicIds: string[] = [];
  for (const s of sends) {
    const id = await sendMessage(svc, s.key, s.message);
    await waitForTrail(svc, `${id}-0`, s.trail);
    publicIds.push(`${id}-0`);
  }
  const rows = await stored(publicIds);
  assert.equal(rows.length, sends.length);
  assert.deepEqual(new Set(rows.map((r) => r.parts)), new Set([1, 3]), 'one-part and three-part attempts');
  assert.ok(rows.some((r) => r.payer_kind === 'key') && rows.some((r) => r.payer_kind === 'account'), 'both kinds of payer');
  assert.ok(rows.some((r) => r.price_eur === 0.108 && r.charged_currency === 'EUR'), 'a price with a binary remainder before rounding');
  for (const row of rows) {
    assert.deepEqual(cache().get(row.id), row, `attempt ${row.id} (${row.channel}, ${row.parts} parts, payer ${row.payer_kind})`);
  }
});

type SmsEvent = TrailEvent & { to: { phone_number: string }; sms: Record<string, unknown> };

test('a status batch applies reports the same with its facts in memory or read back, and lets a final attempt go', async () => {
  const acc = await svc.createAccount({ credit_czk: 1000 });
  const id = await sendMessage(svc, acc.apiKey, { body: 'x', to: ['420777010103', '420777010203', '420777010303'].map((n) => ({ phone_number: n })) });
  const publicIds = [0, 1, 2].map((i) => `${id}-${i}`);
  for (const p of publicIds) await waitForTrail(svc, p, ['sms:sending', 'sms:sent']);
  const [known, forgotten, alone] = await stored(publicIds);
  assert.ok(cache().get(known!.id) && cache().get(forgotten!.id) && cache().get(alone!.id));
  // As after a restart, or for attempts another process dispatched: a batch that knows one of its
  // two attempts (the other's facts are read back), then one that knows none (the whole rows).
  cache().forget(forgotten!.id);
  cache().forget(alone!.id);
  const at = Date.now();
  await svc.runtime.engine.sink.report([
    { attemptId: known!.id, state: 'delivered', resultInfo: '[0] Delivered', at },
    { attemptId: forgotten!.id, state: 'undelivered', resultInfo: '[5] Undelivered', at },
  ]);
  const trails = [
    await waitForTrail<SmsEvent>(svc, publicIds[0]!, ['sms:sending', 'sms:sent', 'sms:delivered']),
    await waitForTrail<SmsEvent>(svc, publicIds[1]!, ['sms:sending', 'sms:sent', 'sms:undelivered']),
  ];
  assert.equal(cache().get(alone!.id), undefined);
  await svc.runtime.engine.sink.report([{ attemptId: alone!.id, state: 'delivered', resultInfo: '[0] Delivered', at }]);
  trails.push(await waitForTrail<SmsEvent>(svc, publicIds[2]!, ['sms:sending', 'sms:sent', 'sms:delivered']));
  // The events built from memory and from the rows carry the same facts as dispatch's own event.
  for (const evs of trails) {
    assert.deepEqual(evs[2]!.sms, evs[0]!.sms);
    assert.deepEqual(evs[2]!.to, evs[0]!.to);
  }
  await waitFor(async () => [known, forgotten, alone].every((a) => cache().get(a!.id) === undefined), 2_000, 'final attempts let go');
});

test('load reads only the misses, in one statement, and remembers them; the bound drops the oldest first', async () => {
  const acc = await svc.createAccount({ credit_czk: 1000 });
  const id = await sendMessage(svc, acc.apiKey, { body: 'x', to: [{ phone_number: '420777020103' }] });
  await waitForTrail(svc, `${id}-0`, ['sms:sending', 'sms:sent']);
  const [row] = await stored([`${id}-0`]);
  const fresh = new AttemptFactsCache(3);
  const loaded = await fresh.load(svc.runtime.db, [row!.id, 987_654_321]);
  assert.deepEqual([...loaded.keys()], [row!.id], 'an unknown attempt is simply not found');
  assert.deepEqual(loaded.get(row!.id), row);
  assert.deepEqual(fresh.get(row!.id), row, 'remembered');
  assert.equal(fresh.knowsAny([1, row!.id]), true);
  assert.equal(fresh.knowsAny([1, 2]), false);
  for (let i = 1; i <= 3; i++) fresh.remember({ ...row!, id: -i });
  assert.equal(fresh.size, 3);
  assert.equal(fresh.get(row!.id), undefined, 'the oldest went first');
  assert.ok(fresh.get(-3));
});
