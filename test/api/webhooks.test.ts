/**
 * Webhook delivery and inbound messages through the real service: outbox relay → BullMQ webhook
 * pool → a real HTTP receiver on loopback. Retry delays are shortened by configuration.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import pg from 'pg';
import { startTestService, startReceiver, waitFor, type TestService, type Receiver } from '../support/harness.js';
import { generateWebhookSecret } from '../../shared/webhooks/sign.js';
import { holderKey } from '../../shared/webhooks/holders.js';

let svc: TestService;
let rx: Receiver;

before(async () => {
  svc = await startTestService({ env: { WEBHOOK_LINGER_MS: '1000', WEBHOOK_RETRY_SCHEDULE_MS: '150,300,450', WEBHOOK_RELAY_RESCAN_MS: '4000' } });
  rx = await startReceiver();
});
after(async () => {
  await rx.close();
  await svc.stop();
});

async function account(extra: Record<string, unknown> = {}) {
  const { apiKey, accountId } = await svc.createAccount({ credit_czk: 10000, ...extra });
  const [key] = await svc.sql<{ id: number }>('SELECT id FROM api_keys WHERE account_id = $1 AND is_primary', [accountId]);
  return { apiKey, accountId, keyId: key!.id };
}

async function send(apiKey: string, messages: Array<Record<string, unknown>>) {
  const res = await svc.request('POST', '/v2/messages', { body: messages, headers: { 'x-api-key': apiKey } });
  assert.equal(res.status, 200, res.text);
  assert.deepEqual(res.body.rejected, []);
  return res.body.accepted.map((a: { message_id: string }) => a.message_id) as string[];
}

const at = (path: string) => rx.requests.filter((r) => r.path === path);

test('150 events travel in 2 POSTs of JSON arrays, in order per recipient', async () => {
  const { apiKey } = await account();
  const to = Array.from({ length: 10 }, (_, i) => ({ phone_number: `4207772000${i}0` }));
  await send(apiKey, Array.from({ length: 5 }, () => ({ body: 'batch', to, callback: `${rx.url}/batch` })));
  const posts = await waitFor(() => at('/batch').reduce((n, r) => n + r.events.length, 0) === 150 && at('/batch'), 15000, '150 events');
  assert.equal(posts.length, 2, `POST sizes: ${posts.map((p) => p.events.length).join(', ')}`);
  assert.deepEqual(posts.map((p) => p.events.length).sort((a, b) => a - b), [50, 100]);
  for (const post of posts) {
    assert.equal(post.headers['content-type'], 'application/json');
    assert.equal(post.headers['user-agent'], 'switchboard-webhook/1.0');
    assert.ok(Array.isArray(JSON.parse(post.body)));
  }
  const order = ['sending', 'sent', 'delivered'];
  const byRecipient = new Map<string, string[]>();
  for (const e of posts.flatMap((p) => p.events)) {
    byRecipient.set(e.message_id, [...(byRecipient.get(e.message_id) ?? []), e.result]);
  }
  assert.equal(byRecipient.size, 50);
  for (const results of byRecipient.values()) {
    assert.deepEqual(results, order);
  }
  // The relay delivered them itself, as the holder its key in Redis says is alive while it runs
  // (shared/webhooks/holders.ts); once an attempt's outcome is recorded, the batch has no holder.
  // The receiver has the POSTs a moment before the relay has their answers recorded.
  const holders = await waitFor(async () => {
    const rows = await svc.sql<{ holder: string | null }>(`SELECT DISTINCT holder FROM webhook_batches WHERE url LIKE '%/batch'`);
    return rows.every((h) => h.holder === null) && rows;
  }, 5_000, 'both outcomes recorded');
  assert.deepEqual(holders.map((h) => h.holder), [null]);
  const keys = await svc.runtime.redis.keys(holderKey(svc.runtime.config.redisPrefix, '*'));
  assert.equal(keys.length, 1, 'this process\'s holder key');
});

test('a batch the relay is POSTing names its process as the holder until the outcome is recorded', async () => {
  const { apiKey } = await account();
  const prev = rx.respond;
  rx.respond = (req) => (req.url === '/held' ? { status: 200, delayMs: 1500 } : prev(req));
  try {
    await send(apiKey, [{ body: 'held', to: [{ phone_number: '420777209900' }], callback: `${rx.url}/held` }]);
    const [inFlight] = await waitFor(async () => {
      const rows = await svc.sql<{ holder: string | null; status: string }>(`SELECT holder, status FROM webhook_batches WHERE url LIKE '%/held'`);
      return rows.length > 0 ? rows : null;
    }, 10000, 'the batch made');
    assert.equal(inFlight!.status, 'pending');
    assert.ok(inFlight!.holder, 'the relay\'s holder id');
    assert.equal(await svc.runtime.redis.exists(holderKey(svc.runtime.config.redisPrefix, inFlight!.holder)), 1, 'its key alive');
    await waitFor(async () => (await svc.sql<{ holder: string | null }>(
      `SELECT holder FROM webhook_batches WHERE url LIKE '%/held' AND status = 'delivered' AND holder IS NULL`)).length > 0, 10000, 'delivered, holder cleared');
  } finally {
    rx.respond = prev;
  }
});

/** 400 recipients' events to one receiver that takes 300 ms per POST: each batch once, at its first attempt, at most 8 at a time. */
async function slowReceiverGetsEachBatchOnce(service: TestService, receiver: Receiver, path: string) {
  const { apiKey } = await service.createAccount({ credit_czk: 10000 });
  const prev = receiver.respond;
  const starts: number[] = [];
  receiver.respond = (req) => {
    if (req.url !== path) {
      return prev(req);
    }
    starts.push(Date.now());
    return { status: 200, delayMs: 300 };
  };
  const received = () => receiver.requests.filter((r) => r.path === path);
  try {
    // 3 events per recipient: at least 12 batches of <= 100 to one receiver, more than its 8 slots
    // (a quarter of WEBHOOK_CONCURRENCY 32), so some wait: in the relay's memory or in the queue.
    const requests = Array.from({ length: 4 }, (_, r) => service.request('POST', '/v2/messages', {
      body: Array.from({ length: 10 }, (_, m) => ({
        body: 'slow receiver', callback: `${receiver.url}${path}`,
        to: Array.from({ length: 10 }, (_, i) => ({ phone_number: `4207773${r}${m}${i}00` })),
      })),
      headers: { 'x-api-key': apiKey },
    }));
    const ids = (await Promise.all(requests)).flatMap((res) => {
      assert.equal(res.status, 200, res.text);
      return res.body.accepted.map((a: { message_id: string }) => a.message_id) as string[];
    });
    await waitFor(() => received().reduce((n, r) => n + r.events.length, 0) >= 1200, 30000, '1,200 events');
    const batches = await waitFor(async () => {
      const rows = await service.sql<{ attempts: number; status: string }>('SELECT attempts, status FROM webhook_batches WHERE url LIKE $1', [`%${path}`]);
      return rows.length > 0 && rows.every((b) => b.status === 'delivered') ? rows : null;
    }, 10000, 'every batch marked delivered');
    assert.ok(batches.length >= 12, `${batches.length} batches`);
    assert.ok(batches.every((b) => b.attempts === 1), 'one attempt per batch');
    const seen = new Set<string>();
    for (const e of received().flatMap((r) => r.events)) {
      const id = `${e.message_id} ${e.result}`;
      assert.ok(!seen.has(id), `event delivered twice: ${id}`);
      seen.add(id);
    }
    assert.equal(seen.size, 1200);
    assert.ok(ids.every((id) => seen.has(`${id}-9 delivered`)));
    // Requests overlapping at any one start (each takes 300 ms): never more than the receiver's slots.
    const overlap = Math.max(...starts.map((t) => starts.filter((u) => u <= t && u > t - 290).length));
    assert.ok(overlap <= 8, `${overlap} requests at once`);
  } finally {
    receiver.respond = prev;
  }
}

test('the relay delivers batches itself, those beyond a slow receiver\'s slots wait for one: each batch once, at most 8 at a time', async () => {
  await slowReceiverGetsEachBatchOnce(svc, rx, '/slowrx');
});

test('without room to wait in the relay, batches beyond the slots go through the queue: each once, at most 8 at a time', async () => {
  const noBacklog = await startTestService({ env: { WEBHOOK_DIRECT_BACKLOG_MB: '0', WEBHOOK_LINGER_MS: '1000' } });
  try {
    await slowReceiverGetsEachBatchOnce(noBacklog, rx, '/slowrx-queued');
  } finally {
    await noBacklog.stop();
  }
});

test('a single event still arrives as an array, with the spec fields of sentMessage', async () => {
  const { apiKey } = await account();
  const [id] = await send(apiKey, [{ body: 'one', to: [{ phone_number: '420777201002' }], callback: `${rx.url}/one`, payload: { z: 1, a: { b: [1, 'x'] } } }]);
  const events = await waitFor(() => at('/one').flatMap((r) => r.events).length >= 2 && at('/one').flatMap((r) => r.events), 10000);
  const failed = events.find((e) => e.result === 'failed');
  assert.ok(failed);
  assert.deepEqual(Object.keys(failed).sort(), ['gateway', 'message_id', 'payload', 'request_id', 'result', 'result_info', 'sms', 'timestamp', 'to', 'type'].sort());
  assert.equal(failed.message_id, `${id}-0`);
  assert.equal(failed.type, 'outgoing');
  assert.deepEqual(failed.to, { phone_number: '420777201002' });
  assert.equal(JSON.stringify(failed.payload), '{"z":1,"a":{"b":[1,"x"]}}');
  assert.deepEqual(Object.keys(failed.sms).sort(), ['count', 'country', 'gateway', 'operator', 'price_czk', 'price_eur', 'sender']);
  assert.ok(at('/one').every((r) => Array.isArray(JSON.parse(r.body))));
});

test('retries after a 500 and after a refused connection, then delivers', async () => {
  const { apiKey } = await account();
  let failures = 2;
  const prev = rx.respond;
  rx.respond = (req) => (req.url === '/flaky' && failures-- > 0 ? { status: 500 } : prev(req));
  await send(apiKey, [{ body: 'retry', to: [{ phone_number: '420777201103' }], callback: `${rx.url}/flaky` }]);
  // 03: sending, sent. Whatever the batching, both events arrive, after exactly two failed POSTs.
  await waitFor(() => at('/flaky').flatMap((r) => r.events).length >= 2, 15000, 'delivery after retries');
  const batches = await waitFor(async () => {
    const rows = await svc.sql<{ attempts: number; status: string }>(`SELECT attempts, status FROM webhook_batches WHERE url LIKE '%/flaky'`);
    return rows.every((b) => b.status === 'delivered') ? rows : null;
  }, 15000, 'every batch delivered');
  assert.equal(batches.reduce((n, b) => n + b.attempts, 0), batches.length + 2, 'two failed attempts, then success');
  rx.respond = prev;

  // A receiver that is not there yet: connection refused, then it appears on that port.
  const { createServer } = await import('node:http');
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as { port: number }).port;
  await new Promise<void>((r) => probe.close(() => r()));
  await send(apiKey, [{ body: 'refused', to: [{ phone_number: '420777201203' }], callback: `http://127.0.0.1:${port}/late` }]);
  await waitFor(async () => (await svc.sql<{ attempts: number }>(`SELECT attempts FROM webhook_batches WHERE url LIKE '%/late' AND attempts >= 1`)).length > 0, 10000, 'a refused attempt');
  const late: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      late.push(body);
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  await waitFor(() => late.length > 0, 10000, 'delivery once the receiver listens');
  await new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); });
  // The receiver has the body before the worker has its answer: wait for the batch to be marked.
  const [refused] = await waitFor(async () => {
    const rows = await svc.sql<{ status: string; attempts: number }>(`SELECT status, attempts FROM webhook_batches WHERE url LIKE '%/late' ORDER BY id LIMIT 1`);
    return rows[0]?.status === 'delivered' ? rows : null;
  }, 10000, 'the refused batch marked delivered');
  assert.ok(refused!.attempts >= 2);
});

test('Retry-After is honoured', async () => {
  const { apiKey } = await account();
  const times: number[] = [];
  const prev = rx.respond;
  rx.respond = (req) => {
    if (req.url !== '/slowdown') {
      return prev(req);
    }
    times.push(Date.now());
    return times.length === 1 ? { status: 503, headers: { 'retry-after': '2' } } : { status: 200 };
  };
  await send(apiKey, [{ body: 'ra', to: [{ phone_number: '420777201305' }], callback: `${rx.url}/slowdown` }]);
  await waitFor(() => times.length >= 2, 15000, 'second attempt');
  rx.respond = prev;
  assert.ok(times[1]! - times[0]! >= 1900, `waited ${times[1]! - times[0]!} ms (Retry-After: 2)`);
});

test('a batch that keeps failing is dead-lettered, listed and replayed', async () => {
  const { apiKey, keyId } = await account();
  const prev = rx.respond;
  let dead = true;
  rx.respond = (req) => (req.url?.startsWith('/dead') && dead ? { status: 500 } : prev(req));
  await send(apiKey, [{ body: 'dead', to: [{ phone_number: '420777201405' }], callback: `http://user:secret@127.0.0.1:${new URL(rx.url).port}/dead` }]);
  const list = await waitFor(async () => {
    const res = await svc.admin('GET', `/webhooks/dead?key_id=${keyId}`);
    return res.body.batches?.length ? res.body.batches : null;
  }, 15000, 'dead-lettered batch');
  assert.equal(list[0].attempts, 4);
  assert.ok(!String(list[0].url).includes('secret'), 'credentials never shown');
  dead = false;
  const replay = await svc.admin('POST', '/webhooks/replay', { id: list[0].id });
  assert.deepEqual(replay.body, { replayed: 1 });
  const got = await waitFor(() => at('/dead').length > 0 && at('/dead'), 10000, 'replayed delivery');
  const auth = got[0]!.headers.authorization;
  assert.equal(auth, `Basic ${Buffer.from('user:secret').toString('base64')}`);
  rx.respond = prev;
  const bad = await svc.admin('POST', '/webhooks/replay', { since: '2026-01-01T00:00:00Z' });
  assert.equal(bad.status, 400);
});

test('signed deliveries verify with the standardwebhooks library', async () => {
  const { apiKey, keyId } = await account();
  const secret = generateWebhookSecret();
  const res = await svc.admin('PATCH', `/keys/${keyId}`, { webhook_secret: secret, default_callback_url: `${rx.url}/signed` });
  assert.equal(res.status, 200, res.text);
  await send(apiKey, [{ body: 'sig', to: [{ phone_number: '420777201500' }] }]);
  const [post] = await waitFor(() => at('/signed').length > 0 && at('/signed'), 10000, 'signed delivery');
  const headers = { 'webhook-id': String(post!.headers['webhook-id']), 'webhook-timestamp': String(post!.headers['webhook-timestamp']), 'webhook-signature': String(post!.headers['webhook-signature']) };
  assert.match(headers['webhook-signature'], /^v1,/);
  const verified = new Webhook(secret).verify(post!.body, headers);
  assert.ok(Array.isArray(verified));
  assert.throws(() => new Webhook(secret).verify(post!.body.replace('outgoing', 'incoming'), headers));
  assert.throws(() => new Webhook(generateWebhookSecret()).verify(post!.body, headers));
  const bad = await svc.admin('PATCH', `/keys/${keyId}`, { webhook_secret: 'not-a-secret' });
  assert.equal(bad.status, 400);
});

test('an event whose transaction commits after later events were relayed is still delivered', async () => {
  const { accountId, keyId } = await account();
  const insert = `WITH e AS (INSERT INTO events (account_id, key_id, callback_url, kind, body) VALUES ($1, $2, $3, 'incomingMessage', $4) RETURNING id)
    INSERT INTO outbox (event_ids) SELECT array_agg(id) FROM e RETURNING event_ids[1] AS event_id`;
  const held = new pg.Client({ connectionString: svc.databaseUrl });
  await held.connect();
  try {
    await held.query('BEGIN');
    const early = (await held.query<{ event_id: number }>(insert, [accountId, keyId, `${rx.url}/straggler`, '{"n":"early"}'])).rows[0]!.event_id;
    const [later] = await svc.sql<{ event_id: number }>(insert, [accountId, keyId, `${rx.url}/straggler`, '{"n":"later"}']);
    assert.ok(later!.event_id > early);
    await waitFor(() => at('/straggler').some((r) => r.events.some((e) => e.n === 'later')), 10000, 'the later event');
    // Past the relay's floor lag: its passes now start above the held event's id.
    await new Promise((resolve) => setTimeout(resolve, 2500));
    await held.query('COMMIT');
  } finally {
    await held.end();
  }
  await waitFor(() => at('/straggler').some((r) => r.events.some((e) => e.n === 'early')), 10000, 'the early event');
  assert.equal(at('/straggler').flatMap((r) => r.events).length, 2);
});

test('callback precedence: message callback, else the key default; none keeps the events unsent', async () => {
  const { apiKey, keyId } = await account();
  const [none] = await send(apiKey, [{ body: 'kept', to: [{ phone_number: '420777201600' }] }]);
  await waitFor(async () => (await svc.sql(`SELECT 1 FROM events e JOIN recipients r ON r.id = e.recipient_id WHERE r.public_id = $1`, [`${none}-0`])).length === 3, 10000);
  const kept = await svc.sql<{ callback_url: string | null; queued: boolean }>(
    `SELECT e.callback_url, EXISTS (SELECT 1 FROM outbox o WHERE e.id = ANY(o.event_ids)) AS queued
       FROM events e JOIN recipients r ON r.id = e.recipient_id WHERE r.public_id = $1`, [`${none}-0`]);
  assert.ok(kept.every((e) => e.callback_url === null && !e.queued));
  await svc.admin('PATCH', `/keys/${keyId}`, { default_callback_url: `${rx.url}/default` });
  const [viaDefault] = await send(apiKey, [{ body: 'default', to: [{ phone_number: '420777201700' }] }]);
  const [viaOwn] = await send(apiKey, [{ body: 'own', to: [{ phone_number: '420777201800' }], callback: `${rx.url}/own` }]);
  await waitFor(() => at('/default').flatMap((r) => r.events).some((e) => e.message_id === `${viaDefault}-0` && e.result === 'delivered'), 10000, 'default callback');
  await waitFor(() => at('/own').flatMap((r) => r.events).some((e) => e.message_id === `${viaOwn}-0` && e.result === 'delivered'), 10000, 'own callback');
  assert.ok(!at('/default').flatMap((r) => r.events).some((e) => e.message_id === `${viaOwn}-0`));
});

test('replies within the reply window become incomingReplyMessage with the payload; older ones incomingMessage', async () => {
  const { apiKey, keyId } = await account();
  await svc.admin('PATCH', `/keys/${keyId}`, { default_callback_url: `${rx.url}/inbox` });
  const [id] = await send(apiKey, [{ body: 'Reply YES', to: [{ phone_number: '420777202000' }], flow: [{ sms: { sender: '420600100200' } }], callback: `${rx.url}/replies`, payload: { order: 42 } }]);
  await waitFor(async () => (await svc.sql(`SELECT 1 FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1`, [`${id}-0`])).length > 0, 10000);
  const inject = (body: string) => svc.request('POST', '/sandbox/inbound', { body: { gateway: 'sms', sender: '+420 777 202 000', recipient: '420600100200', body }, headers: { 'x-api-key': apiKey } });
  const reply = await inject('YES');
  assert.equal(reply.body.event, 'incomingReplyMessage');
  const [event] = await waitFor(() => at('/replies').flatMap((r) => r.events).filter((e) => e.type === 'incoming').length > 0 && at('/replies').flatMap((r) => r.events).filter((e) => e.type === 'incoming'), 10000, 'reply event');
  assert.deepEqual(Object.keys(event).sort(), ['body', 'gateway', 'message_id', 'payload', 'recipient', 'request_id', 'sender', 'timestamp', 'type']);
  assert.equal(event.message_id, `${id}-0`);
  assert.deepEqual(event.payload, { order: 42 });
  assert.equal(event.sender, '420777202000');
  assert.equal(event.recipient, '420600100200');
  assert.equal(event.body, 'YES');
  assert.equal(event.gateway, 'sms');

  await svc.sql(`UPDATE attempts SET created_at = now() - interval '8 days' WHERE recipient_id = (SELECT id FROM recipients WHERE public_id = $1)`, [`${id}-0`]);
  const late = await inject('late');
  assert.equal(late.body.event, 'incomingMessage');
  const [unsolicited] = await waitFor(() => at('/inbox').flatMap((r) => r.events).length > 0 && at('/inbox').flatMap((r) => r.events), 10000, 'incomingMessage');
  assert.deepEqual(Object.keys(unsolicited).sort(), ['body', 'gateway', 'recipient', 'sender', 'timestamp', 'type']);
  assert.equal(unsolicited.body, 'late');

  // Another account cannot inject a reply into this account's conversation.
  const other = await account();
  const foreign = await svc.request('POST', '/sandbox/inbound', { body: { gateway: 'sms', sender: '420777202000', recipient: '420600100200', body: 'x' }, headers: { 'x-api-key': other.apiKey } });
  assert.equal(foreign.body.event, 'incomingMessage');
});

test('a WhatsApp or Viber sender written with + and spaces matches the replies to its digits (D5)', async () => {
  const { apiKey } = await account();
  // The sandbox carries both families; the senders are the customer's words, not registered rows.
  const cases = [
    { gateway: 'whatsapp', step: { whatsapp_text: { sender: '+420 777 123 456' } }, written: '+420 777 123 456', digits: '420777123456', phone: '420777202410' },
    { gateway: 'viber', step: { viber: { sender: '+420 (777) 123-457' } }, written: '+420 (777) 123-457', digits: '420777123457', phone: '420777202411' },
  ];
  for (const c of cases) {
    const [id] = await send(apiKey, [{ body: 'Reply YES', to: [{ phone_number: c.phone }], flow: [c.step], callback: `${rx.url}/replies-${c.gateway}`, payload: { family: c.gateway } }]);
    const sent = await waitFor(() => at(`/replies-${c.gateway}`).flatMap((r) => r.events).find((e) => e.message_id === `${id}-0` && e.result === 'delivered'), 10000, `${c.gateway}: delivered`);
    // The carrier names the number that was written; a reply to it (as digits, or as written) answers the message.
    for (const recipient of [c.digits, c.written]) {
      const body = `YES to ${recipient}`;
      const reply = await svc.request('POST', '/sandbox/inbound', { body: { gateway: c.gateway, sender: c.phone, recipient, body }, headers: { 'x-api-key': apiKey } });
      assert.equal(reply.body.event, 'incomingReplyMessage', `${c.gateway} ${recipient}: ${reply.text}`);
      const event = await waitFor(() => at(`/replies-${c.gateway}`).flatMap((r) => r.events).find((e) => e.type === 'incoming' && e.body === body), 10000, `${c.gateway}: the reply event`);
      assert.equal(event.message_id, `${id}-0`);
      assert.deepEqual(event.payload, { family: c.gateway });
      assert.equal(event.recipient, c.digits);
      assert.equal(event.gateway, c.gateway);
    }
    // The attempt and every event of it (sending, sent, delivered) give the sender as a reply names
    // it; the carrier (the sandbox's record) was given it as written.
    const channelObject = c.gateway === 'viber' ? 'viber' : 'whatsapp_body';
    const outgoing = at(`/replies-${c.gateway}`).flatMap((r) => r.events).filter((e) => e.message_id === `${id}-0` && e.type === 'outgoing');
    assert.ok(outgoing.some((e) => e.result === 'sending') && outgoing.some((e) => e.result === 'sent'), JSON.stringify(outgoing));
    assert.deepEqual(outgoing.map((e) => e[channelObject].sender), outgoing.map(() => c.digits), JSON.stringify(sent));
    const [row] = await svc.sql<{ sender: string }>('SELECT a.sender FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1', [`${id}-0`]);
    assert.equal(row!.sender, c.digits);
    const carried = await svc.request('GET', `/sandbox/messages?phone_number=${c.phone}`, { headers: { 'x-api-key': apiKey } });
    assert.equal(carried.body.messages[0].sender, c.written);
  }
});

test('a reply answers the latest message sent to the number, not a later one refused before it left ([304])', async () => {
  const { apiKey, keyId } = await account();
  await svc.admin('PATCH', `/keys/${keyId}`, { default_callback_url: `${rx.url}/inbox-refused` });
  const flow = [{ sms: { sender: '420600100300' } }];
  const attemptOf = async (publicId: string) =>
    (await svc.sql<{ result_info: string }>(`SELECT a.result_info FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1`, [publicId]))[0];
  const inject = (phone: string, body: string) =>
    svc.request('POST', '/sandbox/inbound', { body: { gateway: 'sms', sender: phone, recipient: '420600100300', body }, headers: { 'x-api-key': apiKey } });
  const incoming = (path: string, body: string) => at(path).flatMap((r) => r.events).filter((e) => e.type === 'incoming' && e.body === body);

  // Sent, then the number opts out, then a promotional message to it is refused before it leaves.
  const phone = '420777202100';
  const [sent] = await send(apiKey, [{ body: 'Reply YES', to: [{ phone_number: phone }], flow, callback: `${rx.url}/replies-sent`, payload: { order: 1 } }]);
  await waitFor(async () => (await attemptOf(`${sent}-0`)) !== undefined, 10000, 'the sent attempt');
  assert.equal((await inject(phone, 'STOP')).body.keyword, 'opt-out');
  const [refused] = await send(apiKey, [{ body: 'Sale!', to: [{ phone_number: phone }], flow, callback: `${rx.url}/replies-refused`, payload: { order: 2 } }]);
  await waitFor(async () => (await attemptOf(`${refused}-0`))?.result_info === '[304] Recipient opted out', 10000, 'the refused attempt');
  const reply = await inject(phone, 'What is this?');
  assert.equal(reply.body.event, 'incomingReplyMessage');
  const [event] = await waitFor(() => incoming('/replies-sent', 'What is this?').length > 0 && incoming('/replies-sent', 'What is this?'), 10000, 'the reply event');
  assert.equal(event.message_id, `${sent}-0`);
  assert.deepEqual(event.payload, { order: 1 });
  assert.deepEqual(incoming('/replies-refused', 'What is this?'), [], 'nothing to the refused message\'s callback');

  // A number that was only ever refused has received nothing: what it sends is an incomingMessage.
  const never = '420777202200';
  await inject(never, 'STOP');
  const [onlyRefused] = await send(apiKey, [{ body: 'Sale!', to: [{ phone_number: never }], flow, callback: `${rx.url}/replies-refused`, payload: { order: 3 } }]);
  await waitFor(async () => (await attemptOf(`${onlyRefused}-0`))?.result_info === '[304] Recipient opted out', 10000, 'the refused attempt');
  assert.equal((await inject(never, 'Who are you?')).body.event, 'incomingMessage');
  await waitFor(() => incoming('/inbox-refused', 'Who are you?').length > 0, 10000, 'the incomingMessage event');
});

test('a reply is not matched to a message that could not reach the person (not a Viber user): it is an incomingMessage', async () => {
  const { apiKey, keyId } = await account();
  await svc.admin('PATCH', `/keys/${keyId}`, { default_callback_url: `${rx.url}/inbox-unreached` });
  // The sandbox's 04: not a user of the channel, undelivered without anything sent (and refunded).
  const phone = '420777202304';
  const [unreached] = await send(apiKey, [{ body: 'Hi', to: [{ phone_number: phone }], flow: [{ viber: { sender: 'Shop' } }], callback: `${rx.url}/replies-unreached`, payload: { order: 4 } }]);
  await waitFor(async () => (await svc.sql<{ state: string }>(
    `SELECT a.state FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1`, [`${unreached}-0`]))[0]?.state === 'undelivered', 10000, 'the undelivered attempt');
  const answer = await svc.request('POST', '/sandbox/inbound', { body: { gateway: 'viber', sender: phone, recipient: 'Shop', body: 'first words' }, headers: { 'x-api-key': apiKey } });
  assert.equal(answer.body.event, 'incomingMessage', answer.text);
  await waitFor(() => at('/inbox-unreached').flatMap((r) => r.events).some((e) => e.type === 'incoming' && e.body === 'first words'), 10000, 'the incomingMessage event');
  assert.deepEqual(at('/replies-unreached').flatMap((r) => r.events).filter((e) => e.type === 'incoming'), []);
});

test('private callback destinations are refused when ALLOW_PRIVATE_CALLBACKS is off', async () => {
  const strict = await startTestService({ env: { ALLOW_PRIVATE_CALLBACKS: '0', WEBHOOK_RETRY_SCHEDULE_MS: '50' } });
  try {
    const { apiKey, accountId } = await strict.createAccount();
    const res = await strict.request('POST', '/v2/messages', { body: [
      { body: 'x', to: [{ phone_number: '420777203000' }], callback: `${rx.url}/private` },
      { body: 'x', to: [{ phone_number: '420777203000' }], callback: 'http://[::1]:80/x' },
      { body: 'x', to: [{ phone_number: '420777203000' }], callback: 'ftp://example.com/x' },
      // Accepted; the test number keeps it from producing events (and any traffic to example.com).
      { body: 'x', to: [{ phone_number: '420777777777' }], callback: 'https://example.com/hook' },
    ], headers: { 'x-api-key': apiKey } });
    assert.deepEqual(res.body.rejected.map((r: { key: string }) => r.key), ['0', '1', '2']);
    assert.match(res.body.rejected[0].message, /^callback: /);
    const [key] = await strict.sql<{ id: number }>('SELECT id FROM api_keys WHERE account_id = $1', [accountId]);
    const update = await strict.admin('PATCH', `/keys/${key!.id}`, { default_callback_url: 'http://10.0.0.1/hook' });
    assert.equal(update.status, 400);
    // A stored destination that is private by now is refused again at connection time.
    const before = rx.requests.length;
    await strict.sql(`WITH e AS (INSERT INTO events (account_id, key_id, callback_url, kind, body) VALUES ($1, $2, $3, 'incomingMessage', '{}') RETURNING id)
      INSERT INTO outbox (event_ids) SELECT array_agg(id) FROM e`, [accountId, key!.id, `${rx.url}/private`]);
    const [batch] = await waitFor(async () => {
      const rows = await strict.sql<{ status: string; last_error: string }>(`SELECT status, last_error FROM webhook_batches WHERE status = 'dead' AND url LIKE '%/private'`);
      return rows.length ? rows : null;
    }, 10000, 'refused batch');
    assert.match(batch!.last_error, /refused|non-public|private|loopback/i);
    assert.equal(rx.requests.length, before, 'nothing reached the private receiver');
  } finally {
    await strict.stop();
  }
});
