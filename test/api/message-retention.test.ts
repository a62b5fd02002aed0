/**
 * MESSAGE_RETENTION_DAYS (shared/engine/message-retention.ts), against a real database: messages
 * older than the retention whose work is over go with every row of them (recipients, attempts,
 * carrier refs, sandbox copies, events), newer ones stay, and so does, however old, a message with
 * work pending (scheduled, dispatch pending, a step due, a step not started, an attempt `sending`,
 * a Viber attempt `sent` waiting for its ttl, an attempt that changed within RECEIPT_WAIT_HOURS, a
 * pending sandbox script), and, without their message, events still owed a delivery (which the
 * relay still batches). Inbound messages and WhatsApp windows older than the retention go. A kept
 * message goes with the next full walk once its work is over; passes running at once (two sweeps,
 * and the event retention) delete each row once; a shutdown waits for the statement under way and
 * leaves no message in part. Rows are written with SQL as the engine writes them, their ages set
 * there. Then, through a running service: the lookup, the REST list and an idempotent replay once
 * a message is gone.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createPool, type Db } from '../../shared/db/pool.js';
import { relayOnce } from '../../shared/webhooks/relay.js';
import { MessageRetention } from '../../shared/engine/message-retention.js';
import { EventRetention } from '../../shared/webhooks/retention.js';
import { createLogger } from '../../shared/logger.js';
import type { AttemptState } from '../../shared/channels/index.js';
import { startTestService, waitFor, type TestService } from '../support/harness.js';
import { migratedDatabase, noQueues, takeAll } from '../support/relay-db.js';

let db: Db;
let drop: () => Promise<void>;
const logger = createLogger('silent');
const DAY = 86_400_000;
/** RECEIPT_WAIT_HOURS as the tests give it (the default). */
const RECEIPT_WAIT_HOURS = 72;

before(async () => {
  ({ db, drop } = await migratedDatabase());
});

after(() => drop());

interface AttemptSpec {
  state: AttemptState;
  channel?: 'sms' | 'viber';
  /** Its step (default: its place in the recipient's list). */
  step?: number;
  /** When its state last changed, in days ago (default: the message's age). */
  changedDays?: number;
  /** Its sandbox copy's scripted reports are still to come. */
  sandboxPending?: boolean;
}

interface RecipientSpec {
  /** 'test': a test number, never sent. */
  state?: 'queued' | 'test';
  /** Its current step (default: its last attempt's, or 0). */
  step?: number;
  /** Its step is due in this many days (`due_at`; scheduled, deferred, a fallback step). */
  dueInDays?: number;
  /** Default: one SMS `delivered`. */
  attempts?: AttemptSpec[];
}

interface MessageSpec {
  /** Accepted this many days ago. */
  days: number;
  recipients?: RecipientSpec[];
  /** Scheduled for this many days from now. */
  sendInDays?: number;
  dispatchPending?: boolean;
  /** The events' callback URL (null: kept, never sent); with one, the events get their outbox row. */
  callback?: string | null;
}

interface Written {
  id: string;
  recipients: number[];
  attempts: number[];
  events: number[];
}

const ago = (days: number): Date => new Date(Date.now() - days * DAY);
const phoneOf = (idx: number): string => `42077700${String(idx).padStart(4, '0')}`;

/**
 * Writes a message as acceptance, dispatch and the status path leave it: the message and its
 * recipients with one `created_at`, each attempt with one carrier ref, a sandbox copy and two
 * events (`sending`, then its state; with a callback URL, their outbox row).
 */
async function writeMessage(spec: MessageSpec): Promise<Written> {
  const id = randomBytes(10).toString('hex');
  const at = ago(spec.days);
  const recipientSpecs = spec.recipients ?? [{}];
  await db.query(
    `INSERT INTO messages (id, request_id, account_id, key_id, body, flow, tag, lane, send_at, source, dispatch_pending, created_at)
     VALUES ($1, gen_random_uuid(), 1, 1, 'Hello', '[{"sms": {}}, {"viber": {}}]', '', 1, $2, 'v2', $3, $4)`,
    [id, spec.sendInDays === undefined ? null : new Date(Date.now() + spec.sendInDays * DAY), spec.dispatchPending ?? false, at]);
  const written: Written = { id, recipients: [], attempts: [], events: [] };
  for (const [idx, r] of recipientSpecs.entries()) {
    const attempts = r.state === 'test' ? [] : r.attempts ?? [{ state: 'delivered' as const }];
    const step = r.step ?? Math.max(0, ...attempts.map((a, i) => a.step ?? i));
    const { rows: [recipient] } = await db.query<{ id: string }>(
      `INSERT INTO recipients (public_id, message_id, idx, account_id, key_id, tag, raw_phone, phone, state, step, due_at, created_at)
       VALUES ($1, $2, $3, 1, 1, '', $4, $4, $5, $6, $7, $8) RETURNING id`,
      [`${id}-${idx}`, id, idx, phoneOf(idx), r.state ?? 'queued', step, r.dueInDays === undefined ? null : new Date(Date.now() + r.dueInDays * DAY), at]);
    const recipientId = Number(recipient!.id);
    written.recipients.push(recipientId);
    for (const [i, a] of attempts.entries()) {
      const changed = ago(a.changedDays ?? spec.days);
      const { rows: [attempt] } = await db.query<{ id: string }>(
        `INSERT INTO attempts (recipient_id, step, channel, family, state, phone, sender, carrier, handed_at, created_at, updated_at)
         VALUES ($1, $2, $3, $3, $4, $5, 'Info', 'sandbox', $6, $6, $7) RETURNING id`,
        [recipientId, a.step ?? i, a.channel ?? 'sms', a.state, phoneOf(idx), at, changed]);
      const attemptId = Number(attempt!.id);
      written.attempts.push(attemptId);
      await db.query(`INSERT INTO carrier_refs (ref, carrier, attempt_id, created_at) VALUES ($1, 'sandbox', $2, $3)`, [`ref-${attemptId}`, attemptId, at]);
      await db.query(
        `INSERT INTO sandbox_messages (account_id, recipient_id, attempt_id, gateway, sender, phone_number, body, parts, pending, created_at)
         VALUES (1, $1, $2, 'sms', 'Info', $3, 'Hello', 1, $4, $5)`,
        [`${id}-${idx}`, attemptId, phoneOf(idx), a.sandboxPending ?? false, at]);
      const { rows: events } = await db.query<{ id: string }>(
        `WITH ev AS (INSERT INTO events (account_id, key_id, callback_url, recipient_id, kind, body, created_at)
                     SELECT 1, 1, $1, $2, 'sentMessage', '{"result": "' || s || '"}', t FROM unnest($3::text[], $4::timestamptz[]) AS u(s, t)
                     RETURNING id, callback_url),
              ob AS (INSERT INTO outbox (event_ids) SELECT array_agg(id ORDER BY id) FROM ev WHERE callback_url IS NOT NULL HAVING count(*) > 0)
         SELECT id FROM ev ORDER BY id`,
        [spec.callback ?? null, recipientId, ['sending', a.state], [at, changed]]);
      written.events.push(...events.map((e) => Number(e.id)));
    }
  }
  return written;
}

/** Which of the messages (by id) are still stored. */
const messagesLeft = async (ms: Written[]): Promise<string[]> =>
  (await db.query<{ id: string }>('SELECT id FROM messages WHERE id = ANY($1) ORDER BY id', [ms.map((m) => m.id)])).rows.map((r) => r.id);

/** Every row of the messages in each table, counted. */
async function rowsOf(ms: Written[]): Promise<Record<string, number>> {
  const recipients = ms.flatMap((m) => m.recipients);
  const attempts = ms.flatMap((m) => m.attempts);
  const { rows: [counts] } = await db.query<Record<string, number>>(
    `SELECT (SELECT count(*) FROM messages WHERE id = ANY($1))::int AS messages,
            (SELECT count(*) FROM recipients WHERE id = ANY($2) OR message_id = ANY($1))::int AS recipients,
            (SELECT count(*) FROM attempts WHERE id = ANY($3) OR recipient_id = ANY($2))::int AS attempts,
            (SELECT count(*) FROM carrier_refs WHERE attempt_id = ANY($3))::int AS carrier_refs,
            (SELECT count(*) FROM sandbox_messages WHERE attempt_id = ANY($3))::int AS sandbox_messages,
            (SELECT count(*) FROM events WHERE recipient_id = ANY($2))::int AS events`,
    [ms.map((m) => m.id), recipients, attempts]);
  return counts!;
}

const sorted = (ids: string[]): string[] => [...ids].sort();

test('old messages whose work is over go with all their rows; newer ones, and those with work pending, stay', async () => {
  // Written oldest first, as ids ascend with created_at in a running service.
  const done = [
    await writeMessage({ days: 40 }),
    // Two recipients, a fallback taken (SMS undelivered, then Viber delivered), and a test number.
    await writeMessage({ days: 40, recipients: [
      { attempts: [{ state: 'undelivered' }, { state: 'delivered', channel: 'viber' }] }, { state: 'test' }] }),
    // An SMS `sent` whose receipt never came, longer than RECEIPT_WAIT_HOURS ago: its step succeeded.
    await writeMessage({ days: 40, recipients: [{ attempts: [{ state: 'sent' }] }] }),
    // Refused before leaving, and ended by its ttl long ago.
    await writeMessage({ days: 35, recipients: [{ attempts: [{ state: 'rejected' }] }, { attempts: [{ state: 'undelivered', channel: 'viber' }] }] }),
  ];
  const pending = {
    // Scheduled for later (its send_at, its recipient's due_at and its step not started each keep it).
    scheduled: await writeMessage({ days: 40, sendInDays: 3, recipients: [{ dueInDays: 3, attempts: [] }] }),
    // Its attempts were written and settled, but the hand-over was never recorded (a crash between):
    // the flag, or a step's due_at, is what the recovery sweep finds it by, and clears.
    dispatchPending: await writeMessage({ days: 40, dispatchPending: true }),
    dueNotCleared: await writeMessage({ days: 40, recipients: [{ dueInDays: -39, attempts: [{ state: 'delivered' }] }] }),
    // A fallback step due (the SMS failed; the Viber step waits for its hour).
    stepDue: await writeMessage({ days: 40, recipients: [{ step: 1, dueInDays: 0.01, attempts: [{ state: 'undelivered' }] }] }),
    // A step with neither due_at nor attempt: not started, whatever lost it (the recovery sweep's to find).
    stepNotStarted: await writeMessage({ days: 40, recipients: [{ step: 1, attempts: [{ state: 'undelivered' }] }] }),
    sending: await writeMessage({ days: 40, recipients: [{ attempts: [{ state: 'sending' }] }] }),
    // Viber `sent` succeeds only at `delivered`: its ttl timer (or the sweep's waiting walk) ends it.
    viberSent: await writeMessage({ days: 40, recipients: [{ attempts: [{ state: 'sent', channel: 'viber' }] }] }),
    // An SMS `sent` an hour ago (a scheduled message sent late): its receipt may still come.
    smsSentRecently: await writeMessage({ days: 40, recipients: [{ attempts: [{ state: 'sent', changedDays: 1 / 24 }] }] }),
    // Ended by its ttl two days ago: a late receipt may still report it.
    ttlRecently: await writeMessage({ days: 40, recipients: [{ attempts: [{ state: 'undelivered', channel: 'viber', changedDays: 2 }] }] }),
    sandboxPending: await writeMessage({ days: 40, recipients: [{ attempts: [{ state: 'delivered', sandboxPending: true }] }] }),
    // One recipient done, the other still sending: the message stays whole.
    halfDone: await writeMessage({ days: 40, recipients: [{}, { attempts: [{ state: 'sending' }] }] }),
  };
  // Written last: ids ascend with created_at in a running service, and the walk stops at the first row within the retention.
  const young = await writeMessage({ days: 10 });
  const kept = [...Object.values(pending), young];
  const all = [...done, ...kept];
  const keptRows = await rowsOf(kept);
  const doneRows = await rowsOf(done);
  assert.deepEqual(doneRows, { messages: 4, recipients: 6, attempts: 6, carrier_refs: 6, sandbox_messages: 6, events: 12 });
  await db.query(
    `INSERT INTO inbound_messages (account_id, gateway, sender, recipient, body, sent_at, created_at)
     SELECT 1, 'sms', '420777000111', 'Info', 'Hi ' || d, now(), now() - make_interval(days => d) FROM unnest(ARRAY[40, 31, 20]) AS d`);
  await db.query(
    `INSERT INTO validations (token, account_id, key_id, phone, status, code_hash, attempts_remaining, started_at, expires_at, created_at)
     SELECT 'tok-' || d, 1, 1, '420777000222', 'verified', '\\x00', 3, now() - make_interval(days => d),
            now() - make_interval(days => d) + interval '10 minutes', now() - make_interval(days => d) FROM unnest(ARRAY[45, 35, 25]) AS d`);
  await db.query(
    `INSERT INTO whatsapp_windows (phone_number_id, user_number, last_inbound_at)
     SELECT 'pn' || (d % 2), '420777' || d, now() - make_interval(hours => d * 24 - 12) FROM generate_series(1, 40) AS d`);

  // 0 (the default): kept forever.
  assert.equal(await new MessageRetention(db, logger, 0, RECEIPT_WAIT_HOURS, 60_000, 2).once(), 0);
  assert.deepEqual(await messagesLeft(all), sorted(all.map((m) => m.id)));

  // Two recipients a statement, so that a pass takes many and messages cross their edges.
  const retention = new MessageRetention(db, logger, 30, RECEIPT_WAIT_HOURS, 60_000, 2);
  const deleted = await retention.once();
  assert.deepEqual(await messagesLeft(all), sorted(kept.map((m) => m.id)), 'the finished old messages went; the young one and those at work stayed');
  assert.deepEqual(await rowsOf(done), { messages: 0, recipients: 0, attempts: 0, carrier_refs: 0, sandbox_messages: 0, events: 0 },
    'every row of a deleted message went with it');
  assert.deepEqual(await rowsOf(kept), keptRows, 'every row of a kept message stayed');
  assert.deepEqual((await db.query<{ body: string }>('SELECT body FROM inbound_messages ORDER BY id')).rows.map((r) => r.body), ['Hi 20']);
  assert.equal((await db.query<{ n: number }>('SELECT count(*)::int AS n FROM whatsapp_windows')).rows[0]!.n, 30, 'windows 30.5 to 39.5 days old went');
  assert.deepEqual((await db.query<{ token: string }>('SELECT token FROM validations ORDER BY id')).rows.map((r) => r.token), ['tok-25'],
    'verification sessions started longer ago than the retention went');
  assert.deepEqual({ ...(retention as unknown as { detail(): Record<string, number> }).detail() }, {
    ...doneRows, inbound_messages: 2, validations: 2, whatsapp_windows: 10,
  }, 'what the pass logs');
  assert.equal(deleted, 4 + 6 + 6 + 6 + 6 + 12 + 2 + 2 + 10);

  // Run again (or by a second sweep): nothing more.
  assert.equal(await new MessageRetention(db, logger, 30, RECEIPT_WAIT_HOURS, 60_000, 2).once(), 0);
  assert.deepEqual(await messagesLeft(kept), sorted(kept.map((m) => m.id)));
});

test('events a delivery still needs stay when their message goes; the relay and the event rules still hold for them', async () => {
  await db.query('TRUNCATE messages, recipients, attempts, carrier_refs, sandbox_messages, events, outbox, webhook_batches, inbound_messages, validations');
  const url = (name: string) => `https://${name}.example.test/hooks`;
  const noCallback = await writeMessage({ days: 40 });
  const delivered = await writeMessage({ days: 40, callback: url('delivered') });
  const pendingBatch = await writeMessage({ days: 40, callback: url('pending') });
  const dead = await writeMessage({ days: 40, callback: url('dead') });
  const queued = await writeMessage({ days: 40, callback: url('queued') });
  // The relay makes a batch per URL of what is in the outbox; `queued`'s outbox row is written after.
  await db.query(`DELETE FROM outbox WHERE $1::bigint = ANY(event_ids)`, [queued.events[0]]);
  for (;;) {
    const pass = await relayOnce(db, noQueues, { batchMax: 100, lingerMs: 0, retries: 8 }, Date.now(), 0, takeAll);
    if (pass.doneThrough === null || pass.batches === 0) break;
  }
  await db.query(`INSERT INTO outbox (event_ids) VALUES ($1)`, [queued.events]);
  await db.query(`UPDATE webhook_batches SET status = 'delivered', delivered_at = now() - interval '40 days' WHERE url = $1`, [url('delivered')]);
  await db.query(`UPDATE webhook_batches SET status = 'dead', dead_at = now() - interval '1 day' WHERE url = $1`, [url('dead')]);
  const all = [noCallback, delivered, pendingBatch, dead, queued];
  assert.equal(await new MessageRetention(db, logger, 30, RECEIPT_WAIT_HOURS, 60_000, 3).once() > 0, true);
  assert.deepEqual(await messagesLeft(all), [], 'every message went: their work is over');
  const owed = [...pendingBatch.events, ...dead.events, ...queued.events].sort((x, y) => x - y);
  assert.deepEqual((await db.query<{ id: string }>('SELECT id FROM events ORDER BY id')).rows.map((r) => Number(r.id)), owed,
    'events in a pending or dead batch or in the outbox stay, without their message; the others went with it');

  // The relay still batches an event whose message is gone (it reads events by id).
  await relayOnce(db, noQueues, { batchMax: 100, lingerMs: 0, retries: 8 }, Date.now(), 0, takeAll);
  const { rows: [batch] } = await db.query<{ event_ids: string[] }>(`SELECT event_ids FROM webhook_batches WHERE url = $1`, [url('queued')]);
  assert.deepEqual(batch!.event_ids.map(Number), queued.events);
});

test('a message kept for its work goes on the next full walk once its work is over; sweeps at once delete each row once', async () => {
  await db.query('TRUNCATE messages, recipients, attempts, carrier_refs, sandbox_messages, events, outbox, webhook_batches');
  const sending = await writeMessage({ days: 40, recipients: [{ attempts: [{ state: 'sending' }] }] });
  const retention = new MessageRetention(db, logger, 30, RECEIPT_WAIT_HOURS, 60_000, 2, 3_600_000);
  assert.equal(await retention.once(), 0, 'still sending');
  await db.query(`UPDATE attempts SET state = 'failed', updated_at = now() - interval '5 days' WHERE id = ANY($1)`, [sending.attempts]);
  assert.equal(await retention.once(), 0, 'a pass between full walks reads on from where the last one stopped');
  assert.equal(await new MessageRetention(db, logger, 30, RECEIPT_WAIT_HOURS, 60_000, 2, 0).once(), 7, 'a full walk finds it (the message, its recipient, attempt, ref, sandbox copy and two events)');
  assert.deepEqual(await messagesLeft([sending]), []);

  const many: Written[] = [];
  for (let i = 0; i < 40; i++) many.push(await writeMessage({ days: 40, recipients: [{}, {}] }));
  // Two message retentions and the event retention (at the same age, as when EVENT_RETENTION_DAYS
  // is unset), each on a connection of its own, over the same rows: they wait for each other's
  // row locks, never deadlock, and each row goes once.
  const sweeps = [1, 2].map(() => new MessageRetention(db, logger, 30, RECEIPT_WAIT_HOURS, 60_000, 3));
  const events = new EventRetention(db, logger, 30, 60_000, 7);
  const [, , eventsDeleted] = await Promise.all([...sweeps.map((s) => s.once()), events.once()]);
  const deleted = sweeps.map((s) => (s as unknown as { detail(): Record<string, number> }).detail());
  const messages = deleted.map((d) => d.messages!);
  assert.equal(messages.reduce((x, y) => x + y, 0), many.length, `each message deleted once (${messages.join(' + ')})`);
  assert.equal(deleted.reduce((n, d) => n + d.events!, 0) + eventsDeleted!, many.length * 4, 'each event deleted once');
  assert.deepEqual(await rowsOf(many), { messages: 0, recipients: 0, attempts: 0, carrier_refs: 0, sandbox_messages: 0, events: 0 });
});

test('a shutdown waits for the statement under way, not for the rest of a long pass; no message is left in part', async () => {
  await db.query('TRUNCATE messages, recipients, attempts, carrier_refs, sandbox_messages, events, outbox, webhook_batches');
  // 3,000 messages of three recipients each, with an attempt, a ref, a sandbox copy and two events per recipient.
  await db.query(
    `WITH m AS (INSERT INTO messages (id, request_id, account_id, key_id, flow, tag, lane, source, created_at)
                SELECT lpad(to_hex(g), 20, '0'), gen_random_uuid(), 1, 1, '[{"sms": {}}]', '', 1, 'v2', now() - interval '40 days'
                  FROM generate_series(1, 3000) AS g
                RETURNING id, created_at),
          r AS (INSERT INTO recipients (public_id, message_id, idx, account_id, key_id, tag, raw_phone, phone, created_at)
                SELECT m.id || '-' || i, m.id, i, 1, 1, '', '420777000', '420777000', m.created_at FROM m, generate_series(0, 2) AS i
                RETURNING id, created_at),
          a AS (INSERT INTO attempts (recipient_id, step, channel, family, state, phone, sender, carrier, created_at, updated_at)
                SELECT r.id, 0, 'sms', 'sms', 'delivered', '420777000', 'Info', 'sandbox', r.created_at, r.created_at FROM r RETURNING id, recipient_id, created_at),
          c AS (INSERT INTO carrier_refs (ref, carrier, attempt_id) SELECT 'ref-' || a.id, 'sandbox', a.id FROM a),
          s AS (INSERT INTO sandbox_messages (account_id, recipient_id, attempt_id, gateway, sender, phone_number, body, parts)
                SELECT 1, 'x', a.id, 'sms', 'Info', '420777000', 'Hello', 1 FROM a)
     INSERT INTO events (account_id, key_id, recipient_id, kind, body, created_at)
     SELECT 1, 1, a.recipient_id, 'sentMessage', '{}', a.created_at FROM a, generate_series(1, 2)`);
  const count = async (table: string) => (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n;
  assert.equal(await count('recipients'), 9_000);
  // 30 recipients a statement: a pass takes 300 statements.
  const retention = new MessageRetention(db, logger, 30, RECEIPT_WAIT_HOURS, 10, 30);
  retention.start();
  await waitFor(async () => (await count('messages')) < 3_000, 10_000, 'the first pass deleting');
  await retention.stop();
  const left = await count('messages');
  assert.ok(left > 0, 'stop() returned before the pass had deleted every aged message');
  // Nothing more goes once stop() has returned, and every message left has all its rows.
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(await count('messages'), left);
  for (const [table, perMessage] of [['recipients', 3], ['attempts', 3], ['carrier_refs', 3], ['sandbox_messages', 3], ['events', 6]] as const) {
    assert.equal(await count(table), left * perMessage, `${table} of the messages left, all of them`);
  }
  // The next start reads on and takes the rest.
  assert.equal(await new MessageRetention(db, logger, 30, RECEIPT_WAIT_HOURS, 60_000, 1_000).once(), left * (1 + 3 * 4 + 6));
  assert.equal(await count('messages'), 0);
});

test('through the service: a deleted message is a 404, gone from the REST list; an idempotent replay still answers', { timeout: 90_000 }, async () => {
  let svc: TestService | undefined;
  try {
    svc = await startTestService();
    const s = svc;
    const { apiKey } = await s.createAccount();
    const headers = { 'x-api-key': apiKey };
    const send = async (body: string, idempotencyKey?: string) => {
      const res = await s.request('POST', '/v2/messages', {
        body: [{ body, to: [{ phone_number: '420777300100' }] }], headers: { ...headers, ...(idempotencyKey && { 'idempotency-key': idempotencyKey }) },
      });
      assert.equal(res.status, 200, res.text);
      return res.body as { accepted: Array<{ message_id: string }> };
    };
    const first = await send('old news', 'order-42');
    const oldId = first.accepted[0]!.message_id;
    const youngId = (await send('still news')).accepted[0]!.message_id;
    const settled = async () => {
      const [{ n }] = await s.sql<{ n: number }>(
        `SELECT (SELECT count(*) FROM recipient_states WHERE state NOT IN ('delivered', 'undelivered', 'failed', 'rejected', 'seen'))
              + (SELECT count(*) FROM sandbox_messages WHERE pending) + (SELECT count(*) FROM messages WHERE dispatch_pending) AS n`) as [{ n: number }];
      return Number(n) === 0;
    };
    await waitFor(settled, 30_000, 'both messages delivered');

    // The first message was accepted 40 days ago and settled then (ages set in SQL).
    await s.sql(`UPDATE messages SET created_at = created_at - interval '40 days' WHERE id = $1`, [oldId]);
    await s.sql(`UPDATE recipients SET created_at = created_at - interval '40 days' WHERE message_id = $1`, [oldId]);
    await s.sql(`UPDATE attempts SET created_at = created_at - interval '40 days', updated_at = updated_at - interval '40 days'
                  WHERE recipient_id IN (SELECT id FROM recipients WHERE message_id = $1)`, [oldId]);
    const dayOf = async (id: string) =>
      (await s.sql<{ day: string }>(`SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day FROM messages WHERE id = $1`, [id]))[0]!.day;
    const [oldDay, youngDay] = [await dayOf(oldId), await dayOf(youngId)];
    /** The message ids the REST list gives for a UTC day (a page is one day's recipients). */
    const listed = async (day: string) => {
      const res = await s.request('GET', `/v1/messages?date=${day}`, { headers });
      assert.equal(res.status, 200, res.text);
      return (res.body.messages as Array<{ message_id: string }>).map((m) => m.message_id.slice(0, 20));
    };
    assert.deepEqual(await listed(oldDay), [oldId]);
    assert.deepEqual(await listed(youngDay), [youngId]);
    const recipientIds = (await s.sql<{ id: string }>('SELECT id FROM recipients WHERE message_id = $1', [oldId])).map((r) => r.id);
    assert.ok((await s.sql('SELECT 1 FROM events WHERE recipient_id = ANY($1)', [recipientIds])).length > 0);

    const pool = createPool(s.databaseUrl, 1);
    try {
      assert.ok(await new MessageRetention(pool, logger, 30, RECEIPT_WAIT_HOURS).once() > 0);
    } finally {
      await pool.end();
    }
    assert.deepEqual(await s.sql('SELECT id FROM messages WHERE id = $1', [oldId]), []);

    for (const id of [oldId, `${oldId}-0`]) {
      const gone = await s.request('GET', `/v2/messages/${id}`, { headers });
      assert.equal(gone.status, 404, gone.text);
    }
    const kept = await s.request('GET', `/v2/messages/${youngId}`, { headers });
    assert.equal(kept.status, 200, kept.text);
    assert.equal(kept.body.recipients[0].result, 'delivered');
    assert.deepEqual(await listed(oldDay), [], 'the deleted message is no longer listed on its day');
    assert.deepEqual(await listed(youngDay), [youngId]);
    assert.deepEqual(await s.sql('SELECT 1 FROM events WHERE recipient_id = ANY($1)', [recipientIds]), [], 'its events went with it');
    const byId = await s.request('GET', `/v1/messages?message_id=${oldId}`, { headers });
    assert.deepEqual([byId.status, byId.body.messages], [200, []], byId.text);
    // The idempotency key (kept 24 hours, less than any retention) answers the same call as the
    // first time, with the ids it gave then, and sends nothing.
    const replay = await send('old news', 'order-42');
    assert.deepEqual(replay, first);
    assert.equal((await s.sql<{ n: number }>('SELECT count(*)::int AS n FROM messages'))[0]!.n, 1);
  } finally {
    await svc?.stop();
  }
});
