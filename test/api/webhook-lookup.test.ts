/**
 * Where each event's webhook went (lookup/webhooks.ts), against a real database: batches written
 * by the real relay for receivers whose events interleave (their id spans overlap), every status a
 * batch can have, an event still in the outbox, one without a callback URL, one nowhere, and a
 * batch written long after its events (the relay was down). The lookup must use the span indexes
 * of migrations 024 and 025.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import type { Db } from '../../shared/db/pool.js';
import { relayOnce } from '../../shared/webhooks/relay.js';
import { webhookStatuses, WHERE_EVENTS_WENT_SQL, type WebhookStatus } from '../../shared/lookup/webhooks.js';
import { migratedDatabase, noQueues, takeAll } from '../support/relay-db.js';

let db: Db;
let drop: () => Promise<void>;

before(async () => {
  ({ db, drop } = await migratedDatabase());
});

after(() => drop());

/** Writes events (one outbox row for them, as a statement of the engine does); returns their ids in order. */
async function writeEvents(urls: Array<string | null>, createdAt = 'now()'): Promise<number[]> {
  const { rows } = await db.query<{ id: number }>(
    `WITH ev AS (
       INSERT INTO events (account_id, key_id, callback_url, recipient_id, kind, body, created_at)
       SELECT 1, 1, u.url, u.n, 'sentMessage', '{}', ${createdAt} FROM unnest($1::text[]) WITH ORDINALITY AS u(url, n) ORDER BY u.n
       RETURNING id, callback_url),
     ob AS (INSERT INTO outbox (event_ids) SELECT array_agg(id ORDER BY id) FROM ev WHERE callback_url IS NOT NULL HAVING count(*) > 0)
     SELECT id FROM ev ORDER BY id`,
    [urls]);
  return rows.map((r) => r.id);
}

async function relayAll(): Promise<void> {
  for (let i = 0; i < 20; i++) {
    const pass = await relayOnce(db, noQueues, { batchMax: 100, lingerMs: 0, retries: 8 }, Date.now(), 0, takeAll);
    if (pass.doneThrough === null) return;
  }
  throw new Error('the outbox did not drain');
}

const refs = (ids: number[], urls: Array<string | null>) => ids.map((id, i) => ({ id, callbackUrl: urls[i]! }));

test('events of receivers whose batches overlap in id each find their own batch, with its status', async () => {
  // Three receivers take turns, 900 events: each receiver's 300 fall into 3 batches of 100, and
  // every batch's span covers ids of the other two receivers' batches.
  const receivers = ['https://a.example.test/hooks', 'https://user:secret@b.example.test/hooks', 'https://c.example.test/hooks'];
  const urls = Array.from({ length: 900 }, (_, i) => receivers[i % 3]!);
  const ids = await writeEvents(urls);
  await relayAll();
  const { rows } = await db.query<{ id: number; url: string; event_ids: string[] }>('SELECT id, url, event_ids FROM webhook_batches ORDER BY id');
  const batches = rows.map((b) => ({ ...b, event_ids: b.event_ids.map(Number) })); // bigint[] elements arrive as text
  assert.equal(batches.length, 9);
  for (const b of batches) {
    assert.deepEqual(b.event_ids, [...b.event_ids].sort((x, y) => x - y), 'the relay writes a batch\'s ids ascending (the span index relies on it)');
  }
  // One delivered, one dead, the rest pending.
  await db.query(`UPDATE webhook_batches SET status = 'delivered', delivered_at = now(), attempts = 1, last_status = 200 WHERE id = $1`, [batches[0]!.id]);
  await db.query(`UPDATE webhook_batches SET status = 'dead', dead_at = now(), attempts = 9, last_status = 500 WHERE id = $1`, [batches[1]!.id]);
  const batchOf = new Map<number, { id: number; url: string }>();
  for (const b of batches) for (const e of b.event_ids) batchOf.set(e, b);

  const found = await webhookStatuses(db, refs(ids, urls));
  for (const id of ids) {
    const status = found.get(id) as Extract<WebhookStatus, { batch_id: number }>;
    const batch = batchOf.get(id)!;
    assert.equal(status.batch_id, batch.id, `event ${id}`);
    assert.equal(status.url, batch.url.replace('user:secret@', ''), 'shown without credentials');
    const expected = batch.id === batches[0]!.id ? 'delivered' : batch.id === batches[1]!.id ? 'dead' : 'pending';
    assert.equal(status.status, expected);
  }
  const delivered = found.get(batches[0]!.event_ids[0]!) as Extract<WebhookStatus, { batch_id: number }>;
  assert.equal(delivered.attempts, 1);
  assert.equal(delivered.last_status, 200);
  assert.match(delivered.delivered_at!, /^\d{4}-\d\d-\d\dT/);
  assert.equal(delivered.dead_at, null);
});

test('an event still in the outbox is queued, one without a callback URL none, one nowhere unknown', async () => {
  const urls = ['https://q.example.test/hooks', null, 'https://q.example.test/hooks'];
  const ids = await writeEvents(urls);
  // The third event's outbox row is lost (as if written before the outbox existed).
  await db.query('UPDATE outbox SET event_ids = array_remove(event_ids, $1::bigint) WHERE $1::bigint = ANY(event_ids)', [ids[2]]);
  const found = await webhookStatuses(db, refs(ids, urls));
  assert.deepEqual(found.get(ids[0]!), { status: 'queued', url: 'https://q.example.test/hooks' });
  assert.deepEqual(found.get(ids[1]!), { status: 'none' });
  assert.deepEqual(found.get(ids[2]!), { status: 'unknown', url: 'https://q.example.test/hooks' });
  await relayAll();
  const later = await webhookStatuses(db, refs(ids, urls));
  assert.equal(later.get(ids[0]!)!.status, 'pending', 'once relayed, in its batch');
});

test('a batch written long after its events (a relay that was down for an hour) is still found', async () => {
  const urls = Array.from({ length: 5 }, () => 'https://late.example.test/hooks');
  const ids = await writeEvents(urls, `now() - interval '1 hour'`);
  await relayAll();
  const { rows } = await db.query<{ id: number }>('SELECT id FROM webhook_batches WHERE event_ids && $1::bigint[]', [ids]);
  assert.equal(rows.length, 1, 'the five events travel in one batch');
  const found = await webhookStatuses(db, refs(ids, urls));
  for (const id of ids) {
    const status = found.get(id) as Extract<WebhookStatus, { batch_id: number }>;
    assert.equal(status.status, 'pending', `event ${id}`);
    assert.equal(status.batch_id, rows[0]!.id);
  }
});

test('a batch or an outbox row without events is refused (its span would cover every id)', async () => {
  await assert.rejects(
    db.query(`INSERT INTO webhook_batches (webhook_id, account_id, key_id, url, event_ids) VALUES ('msg_empty', 1, 1, 'https://x.example.test', '{}')`),
    /webhook_batches_some_events/);
  await assert.rejects(db.query(`INSERT INTO outbox (event_ids) VALUES ('{}')`), /outbox_some_events/);
});

test('the lookup finds batches and outbox rows through the span indexes of migrations 024 and 025', async () => {
  const client = await db.connect();
  try {
    // Planned as for a large table (this one is small enough to scan): the statement's span must
    // be the indexed expression word for word, or no index could serve it.
    await client.query('BEGIN; SET LOCAL enable_seqscan = off');
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${WHERE_EVENTS_WENT_SQL}`, [[1, 2, 3]]);
    const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    assert.match(plan, /Index Scan (using|on) webhook_batches_event_span/, plan);
    assert.match(plan, /Index Scan (using|on) outbox_event_span/, plan);
    await client.query('ROLLBACK');
  } finally {
    client.release();
  }
});
