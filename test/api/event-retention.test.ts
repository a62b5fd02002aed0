/**
 * EVENT_RETENTION_DAYS (shared/webhooks/retention.ts), against a real database: events and webhook
 * batches older than the retention go, newer ones stay, and so do, however old, events still in the
 * outbox or in a pending batch and dead letters (with their events) until the retention has passed
 * since they died. Batches are written by the real relay; ages are set with SQL. Then, through a
 * running service: the lookup, the deliveries list and the dead-letter calls once rows are gone, and
 * a replayed batch whose events are gone is never POSTed as an empty array.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createPool, type Db } from '../../shared/db/pool.js';
import { relayOnce } from '../../shared/webhooks/relay.js';
import { EventRetention } from '../../shared/webhooks/retention.js';
import { markDead } from '../../shared/webhooks/deliver.js';
import { createLogger } from '../../shared/logger.js';
import { startReceiver, startTestService, waitFor, type Receiver, type TestService } from '../support/harness.js';
import { sendMessage } from '../support/trails.js';
import { migratedDatabase, noQueues, takeAll } from '../support/relay-db.js';

let db: Db;
let drop: () => Promise<void>;
const logger = createLogger('silent');

before(async () => {
  ({ db, drop } = await migratedDatabase());
});

after(() => drop());

/**
 * Writes `n` events for `url` (null: no callback URL) created `days` ago, with their outbox row as
 * the engine writes it; returns their ids.
 */
async function writeEvents(n: number, url: string | null, days: number): Promise<number[]> {
  const { rows } = await db.query<{ id: string }>(
    `WITH ev AS (
       INSERT INTO events (account_id, key_id, callback_url, recipient_id, kind, body, created_at)
       SELECT 1, 1, $2, g, 'sentMessage', '{}', now() - make_interval(days => $3) FROM generate_series(1, $1) AS g ORDER BY g
       RETURNING id, callback_url),
     ob AS (INSERT INTO outbox (event_ids) SELECT array_agg(id ORDER BY id) FROM ev WHERE callback_url IS NOT NULL HAVING count(*) > 0)
     SELECT id FROM ev ORDER BY id`,
    [n, url, days]);
  return rows.map((r) => Number(r.id));
}

/** The relay's batch of `url`, given the outcome and ages (in days ago) it ends with. */
async function settleBatch(url: string, status: 'pending' | 'delivered' | 'dead', createdDays: number, outcomeDays: number | null = null): Promise<number> {
  const { rows } = await db.query<{ id: string }>(
    `UPDATE webhook_batches SET status = $2, created_at = now() - make_interval(days => $3),
            delivered_at = CASE WHEN $2 = 'delivered' THEN now() - make_interval(days => $4) END,
            dead_at = CASE WHEN $2 = 'dead' THEN now() - make_interval(days => $4) END
      WHERE url = $1 RETURNING id`,
    [url, status, createdDays, outcomeDays ?? 0]);
  assert.equal(rows.length, 1, `one batch for ${url}`);
  return Number(rows[0]!.id);
}

const idsIn = async (table: 'events' | 'webhook_batches', ids: number[]): Promise<number[]> =>
  (await db.query<{ id: string }>(`SELECT id FROM ${table} WHERE id = ANY($1) ORDER BY id`, [ids])).rows.map((r) => Number(r.id));

const url = (name: string) => `https://${name}.example.test/hooks`;

test('rows older than the retention go; newer ones, and those a delivery still needs, stay', async () => {
  // Written oldest first, as ids ascend with created_at in a running service.
  const noCallback = await writeEvents(5, null, 40);
  const deliveredLongAgo = await writeEvents(3, url('c'), 40);
  const pending = await writeEvents(3, url('d'), 40);
  const deadRecently = await writeEvents(3, url('e'), 40);
  const deadLongAgo = await writeEvents(3, url('f'), 40);
  const queued = await writeEvents(3, url('g'), 0); // lingers in the outbox below; aged after the relay
  const deliveredRecently = await writeEvents(3, url('h'), 40);
  const young = await writeEvents(3, url('b'), 10);
  for (;;) {
    const pass = await relayOnce(db, noQueues, { batchMax: 100, lingerMs: 3_600_000, retries: 8 }, Date.now(), 0, takeAll);
    if (pass.doneThrough === null || pass.batches === 0) break;
  }
  await db.query(`UPDATE events SET created_at = now() - interval '40 days' WHERE id = ANY($1)`, [queued]);
  const batch = {
    c: await settleBatch(url('c'), 'delivered', 40, 40),
    d: await settleBatch(url('d'), 'pending', 40),
    e: await settleBatch(url('e'), 'dead', 40, 10),
    f: await settleBatch(url('f'), 'dead', 40, 35),
    h: await settleBatch(url('h'), 'delivered', 40, 10),
    b: await settleBatch(url('b'), 'delivered', 10, 10),
  };
  assert.equal((await db.query(`SELECT 1 FROM outbox WHERE $1::bigint = ANY(event_ids)`, [queued[0]])).rowCount, 1, 'the young group stayed in the outbox');
  const allEvents = [...noCallback, ...deliveredLongAgo, ...pending, ...deadRecently, ...deadLongAgo, ...queued, ...deliveredRecently, ...young];
  const allBatches = Object.values(batch);

  // 0 (the default): kept forever.
  assert.equal(await new EventRetention(db, logger, 0, 60_000, 2).once(), 0);
  assert.deepEqual(await idsIn('events', allEvents), allEvents.sort((x, y) => x - y));
  assert.deepEqual(await idsIn('webhook_batches', allBatches), allBatches);

  // A few rows a statement, so that a pass takes many.
  const deleted = await new EventRetention(db, logger, 30, 60_000, 2).once();
  assert.deepEqual(await idsIn('webhook_batches', allBatches), [batch.d, batch.e, batch.h, batch.b],
    'delivered 40 days ago and dead 35 days ago go; pending, dead 10 days ago and delivered 10 days ago stay');
  assert.deepEqual(await idsIn('events', allEvents), [...pending, ...deadRecently, ...queued, ...young],
    'old events go unless a pending or dead batch or the outbox holds them; young ones stay');
  assert.equal(deleted, 2 + noCallback.length + deliveredLongAgo.length + deadLongAgo.length + deliveredRecently.length);

  // A fraction of a day counts (as RECEIPT_WAIT_HOURS's fractions do): 9.5 days takes the rows of 10 days ago.
  assert.equal(await new EventRetention(db, logger, 9.5, 60_000, 2).once() > 0, true);
  assert.deepEqual(await idsIn('events', young), [], 'older than 9.5 days');
});

test('later passes: newly aged rows at once, kept rows on the next full walk (a dead letter with its events)', async () => {
  await db.query('TRUNCATE events, outbox, webhook_batches');
  const dead = await writeEvents(3, url('dead'), 40);
  const delivered = await writeEvents(3, url('later'), 20);
  await relayOnce(db, noQueues, { batchMax: 100, lingerMs: 0, retries: 8 }, Date.now(), 0, takeAll);
  const deadBatch = await settleBatch(url('dead'), 'dead', 40, 5);
  const deliveredBatch = await settleBatch(url('later'), 'delivered', 20, 20);
  const retention = new EventRetention(db, logger, 30, 60_000, 2, 3_600_000);
  assert.equal(await retention.once(), 0, 'the dead letter died 5 days ago: kept with its events');
  // A delivery that finds its events gone dead-letters only a pending batch (deliver.ts): a batch
  // that another delivery settled meanwhile keeps its outcome and is not counted twice.
  assert.equal(await markDead(db, deadBatch, 'its events are no longer stored'), false);
  assert.equal((await db.query(`SELECT 1 FROM webhook_batches WHERE id = $1 AND dead_at < now() - interval '4 days'`, [deadBatch])).rowCount, 1);

  // Both age: the next pass (not a full walk) reads on from where the last one stopped.
  await db.query(`UPDATE events SET created_at = now() - interval '40 days' WHERE id = ANY($1)`, [delivered]);
  await db.query(`UPDATE webhook_batches SET created_at = now() - interval '40 days', delivered_at = now() - interval '40 days' WHERE id = $1`, [deliveredBatch]);
  await db.query(`UPDATE webhook_batches SET dead_at = now() - interval '31 days' WHERE id = $1`, [deadBatch]);
  assert.equal(await retention.once(), 4, 'the newly aged batch and its events');
  assert.deepEqual(await idsIn('webhook_batches', [deadBatch]), [deadBatch], 'a row kept before waits for the next full walk');

  // The next full walk (here: every pass) takes the dead letter and its events together.
  assert.equal(await new EventRetention(db, logger, 30, 60_000, 2, 0).once(), 4);
  assert.deepEqual(await idsIn('events', [...dead, ...delivered]), []);
  assert.deepEqual(await idsIn('webhook_batches', [deadBatch, deliveredBatch]), []);
});

test('a shutdown waits for the statement under way, not for the rest of a long pass; a retention under a second still deletes', async () => {
  await db.query('TRUNCATE events, outbox, webhook_batches');
  const old = await writeEvents(30_000, null, 40);
  // 100 rows a statement: the pass takes 300 statements.
  const retention = new EventRetention(db, logger, 30, 10, 100);
  retention.start();
  await waitFor(async () => (await idsIn('events', old)).length < old.length, 10_000, 'the first pass deleting');
  await retention.stop();
  const left = (await idsIn('events', old)).length;
  assert.ok(left > 0, 'stop() returned before the pass had deleted every aged row');
  // Nothing more goes once stop() has returned; the next start reads on and takes the rest.
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal((await idsIn('events', old)).length, left);
  assert.equal(await new EventRetention(db, logger, 30, 60_000, 5_000).once(), left);

  // 0.000001 days is 0.09 s: counted as a second, not rounded to 0 (which would delete nothing).
  const recent = await writeEvents(2, null, 1);
  assert.equal(await new EventRetention(db, logger, 0.000001, 60_000, 100).once(), recent.length);
});

test('through the service: lookups and dead-letter calls once rows are gone; a replay never POSTs an empty array', { timeout: 90_000 }, async () => {
  let svc: TestService | undefined;
  let ok: Receiver | undefined;
  let failing: Receiver | undefined;
  try {
    ok = await startReceiver();
    failing = await startReceiver();
    failing.respond = () => ({ status: 503 });
    // One retry after 1 s, then a failing batch is dead-lettered.
    svc = await startTestService({ env: { WEBHOOK_RETRY_SCHEDULE_MS: '1000' } });
    const s = svc;
    const { apiKey } = await s.createAccount();
    const headers = { 'x-api-key': apiKey };
    const deliveries = async (query = '') => {
      const res = await s.request('GET', `/v1/webhooks/deliveries${query}`, { headers });
      assert.equal(res.status, 200, res.text);
      return res.body.deliveries as Array<{ id: number; status: string; last_error: string | null }>;
    };
    const settled = async () => {
      const [{ n }] = await s.sql<{ n: number }>(
        `SELECT (SELECT count(*) FROM recipient_states WHERE state NOT IN ('delivered', 'undelivered', 'failed', 'rejected')) + (SELECT count(*) FROM outbox)
              + (SELECT count(*) FROM webhook_batches WHERE status = 'pending') AS n`) as [{ n: number }];
      return Number(n) === 0;
    };

    const deliveredId = await sendMessage(s, apiKey, { body: 'kept a while', to: [{ phone_number: '420777300100' }], callback: ok.url });
    const deadId = await sendMessage(s, apiKey, { body: 'dead letter', to: [{ phone_number: '420777300200' }], callback: failing.url });
    await waitFor(settled, 30_000, 'every event delivered or dead-lettered');
    const before = await s.request('GET', `/v2/messages/${deliveredId}`, { headers });
    assert.equal(before.status, 200, before.text);
    assert.ok(before.body.recipients[0].events.length > 0);
    const deadBatches = (await deliveries('?status=dead')).map((d) => d.id);
    assert.ok(deadBatches.length > 0);

    // Everything is 40 days old, dead letters died 40 days ago.
    await s.sql(`UPDATE events SET created_at = now() - interval '40 days'`);
    await s.sql(`UPDATE webhook_batches SET created_at = now() - interval '40 days', delivered_at = delivered_at - interval '40 days', dead_at = dead_at - interval '40 days'`);
    const pool = createPool(s.databaseUrl, 1);
    try {
      assert.ok(await new EventRetention(pool, logger, 30).once() > 0);
    } finally {
      await pool.end();
    }
    assert.deepEqual(await s.sql('SELECT id FROM events'), []);

    // The lookup still answers, with the attempts and without the events.
    for (const id of [deliveredId, deadId]) {
      const res = await s.request('GET', `/v2/messages/${id}`, { headers });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body.recipients[0].events, []);
      assert.ok(res.body.recipients[0].attempts.length > 0);
    }
    assert.deepEqual(await deliveries(), []);
    const deadList = await s.admin('GET', '/webhooks/dead');
    assert.equal(deadList.status, 200, deadList.text);
    assert.deepEqual(deadList.body.batches, []);
    const replayGone = await s.request('POST', '/v1/webhooks/replay', { body: { id: deadBatches[0] }, headers });
    assert.equal(replayGone.status, 400, replayGone.text);
    assert.equal(replayGone.body.message, `id: batch ${deadBatches[0]} is not one of your dead-lettered batches`);
    const adminReplay = await s.admin('POST', '/webhooks/replay', { id: deadBatches[0] });
    assert.deepEqual([adminReplay.status, adminReplay.body.replayed], [200, 0]);

    // A dead letter whose events were deleted some other way (by hand): replayed, it is not POSTed
    // (an empty array), but dead-lettered again with the reason.
    await sendMessage(s, apiKey, { body: 'another', to: [{ phone_number: '420777300300' }], callback: failing.url });
    await waitFor(settled, 30_000, 'the second dead letter');
    const [batch] = await deliveries('?status=dead');
    assert.ok(batch);
    await s.sql('DELETE FROM events e USING webhook_batches b WHERE b.id = $1 AND e.id = ANY(b.event_ids)', [batch.id]);
    failing.respond = () => ({ status: 200 });
    const posted = failing.requests.length;
    const replayed = await s.request('POST', '/v1/webhooks/replay', { body: { id: batch.id }, headers });
    assert.deepEqual([replayed.status, replayed.body.replayed], [200, 1], replayed.text);
    const again = await waitFor(async () => (await deliveries('?status=dead')).find((d) => d.id === batch.id), 15_000, 'dead-lettered again');
    assert.equal(again.last_error, 'its events are no longer stored');
    assert.equal(failing.requests.length, posted, 'nothing POSTed');
  } finally {
    await svc?.stop();
    await ok?.close();
    await failing?.close();
  }
});
