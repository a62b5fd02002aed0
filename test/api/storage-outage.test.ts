/**
 * Storage outages at the HTTP level (issue 22 item 4): with Postgres stopped (immediate mode) every
 * API family answers 503 with `Retry-After` and its own "nothing was accepted" body, nothing of
 * those calls is stored, and the service answers normally once Postgres is back; with Redis killed,
 * a call that needs it (a verification start: its rate limiter) answers 503 at once.
 *
 * The Postgres cluster and the Redis server are this file's own, on free ports, so they can be
 * stopped without touching the shared ones; both are removed at the end, also when a test fails.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, chownSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { startTestService, createTestDatabase, ADMIN_TOKEN, waitFor, type TestService, type TestResponse } from '../support/harness.js';
import { OpenApiChecker } from '../support/openapi.js';
import { createLogger } from '../../shared/logger.js';

const PG_BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
const UNAVAILABLE = 'Service temporarily unavailable: nothing was accepted; retry later';

let dir = '';
let pgPort = 0;
let redisPort = 0;
let redis: ChildProcess | null = null;
let svc: TestService | null = null;
let sendKey = '';
let restKey = '';
let verifyKey = '';
let accountId = 0;
let adminDocument: OpenApiChecker | null = null;

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** pg_ctl as the postgres user (Postgres refuses to run as root). */
function pgCtl(...args: string[]): void {
  execFileSync('runuser', ['-u', 'postgres', '--', `${PG_BIN}/pg_ctl`, '-D', path.join(dir, 'data'), ...args], { stdio: 'ignore', timeout: 30_000 });
}
const startPostgres = () => pgCtl('-o', `-p ${pgPort} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off`, '-l', path.join(dir, 'log'), '-w', '-t', '30', 'start');
const stopPostgres = () => pgCtl('-m', 'immediate', 'stop');

function startRedis(): ChildProcess {
  return spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
}
async function redisAnswers(): Promise<boolean> {
  const probe = new Redis({ port: redisPort, host: '127.0.0.1', lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    return (await probe.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    probe.disconnect();
  }
}

/** Last resort when the runner ends this process (a timeout): nothing of ours may outlive it. */
function removeEverything(): void {
  if (redis && redis.exitCode === null) redis.kill('SIGKILL');
  try {
    stopPostgres();
  } catch {
    // not running
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
}
process.once('exit', removeEverything);
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => process.exit(1));
}

before(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'sb-outage-'));
  chownSync(dir, Number(execFileSync('id', ['-u', 'postgres']).toString().trim()), Number(execFileSync('id', ['-g', 'postgres']).toString().trim()));
  execFileSync('runuser', ['-u', 'postgres', '--', `${PG_BIN}/initdb`, '-D', path.join(dir, 'data'), '-A', 'trust', '-U', 'root', '--no-sync', '-E', 'UTF8'], { stdio: 'ignore', timeout: 60_000 });
  pgPort = await freePort();
  startPostgres();
  redisPort = await freePort();
  redis = startRedis();
  await waitFor(redisAnswers, 10_000, 'the test Redis');
  const database = await createTestDatabase(`postgres://root@127.0.0.1:${pgPort}/postgres`);
  // Every line the service logs is kept (with the service's own redaction), to be read by the tests.
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logLines.push(line);
      done();
    },
  });
  svc = await startTestService({ role: 'web', database, env: { REDIS_URL: `redis://127.0.0.1:${redisPort}` }, logger: createLogger('info', 'switchboard', sink) });
  // BullMQ prints every reconnect failure of a queue without an error listener (issue 22 item 5,
  // not this file's subject): keep this file's output readable.
  for (const queue of svc.runtime.queues.all()) {
    queue.on('error', () => undefined);
  }
  const send = await svc.createAccount({ country: 'CZ' });
  const rest = await svc.createAccount({ country: 'CZ' });
  const verify = await svc.createAccount({ country: 'CZ' });
  ({ apiKey: sendKey, accountId } = send);
  restKey = rest.apiKey;
  verifyKey = verify.apiKey;
  adminDocument = new OpenApiChecker({ admin: (await svc.request('GET', '/openapi/admin.json')).body });
});

after(async () => {
  // Everything this file started goes, whatever state a failed test left it in.
  try {
    startPostgres(); // the database is dropped through it; a no-op failure when it already runs
  } catch {
    // already running
  }
  if (redis && redis.exitCode === null) redis.kill('SIGKILL');
  redis = startRedis();
  await waitFor(redisAnswers, 5_000, 'the test Redis').catch(() => undefined);
  await svc?.stop().catch(() => undefined);
  removeEverything();
  dir = '';
});

const logLines: string[] = [];

const json = (key: string) => ({ 'x-api-key': key, 'content-type': 'application/json' });
const form = { 'content-type': 'application/x-www-form-urlencoded' };
const message = { body: 'Hello', to: [{ phone_number: '420777123456' }] };
const xmlDoc = '<?xml version="1.0" encoding="UTF-8"?><RequestDocument><RequestList><Request Type="high"><Message Type="Text">Hi</Message>'
  + '<NumbersList><Number>420777123456</Number></NumbersList></Request></RequestList></RequestDocument>';

/** One call of each family and what its 503 body must be. */
function calls(): Array<{ name: string; call: () => Promise<TestResponse>; body: (r: TestResponse) => void }> {
  const s = svc!;
  const raw = (method: string, p: string, headers: Record<string, string>, body?: unknown) =>
    s.request(method, p, { headers, ...(body !== undefined && { raw: typeof body === 'string' ? body : JSON.stringify(body) }) });
  const sending = (r: TestResponse) => assert.deepEqual(r.body, { Message: UNAVAILABLE });
  const rest = (r: TestResponse) => assert.deepEqual(r.body, { success: false, message: UNAVAILABLE });
  const errorShape = (r: TestResponse) => assert.deepEqual(r.body, { error: 'SERVICE_UNAVAILABLE', message: UNAVAILABLE });
  // The admin document lists the 503 with the body actually sent.
  const adminShape = (method: string, p: string) => (r: TestResponse) => {
    errorShape(r);
    adminDocument!.check('admin', method, p, r.status, r.headers['content-type'], r.body);
  };
  return [
    { name: 'POST /v2/message', call: () => raw('POST', '/v2/message', json(sendKey), message), body: sending },
    { name: 'POST /v2/messages', call: () => raw('POST', '/v2/messages', json(sendKey), [message]), body: sending },
    { name: 'POST /v1/messages', call: () => raw('POST', '/v1/messages', json(sendKey), [message]), body: sending },
    { name: 'GET /v2/simple/message', call: () => raw('GET', `/v2/simple/message?apikey=${sendKey}&phone_number=420777123456&message=Hi`, {}), body: sending },
    { name: 'POST /v2/simple/message', call: () => raw('POST', '/v2/simple/message', { ...form, 'x-api-key': sendKey }, 'phone_number=420777123456&message=Hi'), body: sending },
    { name: 'POST /xml', call: () => raw('POST', '/xml', form, new URLSearchParams({ apikey: sendKey, XMLDATA: xmlDoc }).toString()),
      body: (r) => assert.equal(r.text, '<?xml version="1.0" encoding="UTF-8"?>\n<Result><ResultHeader><Interface Version="2.0"/></ResultHeader><Response Type="ERROR" ID="901"/></Result>') },
    { name: 'GET /v1/credit', call: () => raw('GET', '/v1/credit', { 'x-api-key': restKey }), body: rest },
    { name: 'POST /v1/apikey/update', call: () => raw('POST', '/v1/apikey/update', json(restKey), { note: 'x' }), body: rest },
    { name: 'POST /v1/validations', call: () => raw('POST', '/v1/validations', json(verifyKey), { phoneNumber: '420777123456' }), body: errorShape },
    { name: 'POST /v1/verify-proof', call: () => raw('POST', '/v1/verify-proof', json(''), { phoneNumber: '420777123456', token: 'x', code: '1', timestamp: 't', proof: 'p' }), body: errorShape },
    { name: 'POST /sandbox/inbound', call: () => raw('POST', '/sandbox/inbound', json(sendKey), { gateway: 'sms', sender: '420777000111', recipient: '420700000001', body: 'hi' }), body: rest },
    { name: 'GET /sandbox/messages', call: () => raw('GET', '/sandbox/messages?phone_number=420777123456', { 'x-api-key': sendKey }), body: rest },
    { name: 'GET /admin/api/accounts/:id', call: () => raw('GET', `/admin/api/accounts/${accountId}`, { authorization: `Bearer ${ADMIN_TOKEN}` }), body: adminShape('GET', `/admin/api/accounts/${accountId}`) },
    { name: 'POST /admin/api/accounts/:id/credit', call: () => raw('POST', `/admin/api/accounts/${accountId}/credit`, { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, { czk: 5 }),
      body: adminShape('POST', `/admin/api/accounts/${accountId}/credit`) },
    { name: 'GET /admin/api/keys', call: () => raw('GET', '/admin/api/keys', { authorization: `Bearer ${ADMIN_TOKEN}` }), body: adminShape('GET', '/admin/api/keys') },
  ];
}

test('with Redis down a verification start answers 503 at once and a sending call is still accepted', { timeout: 30_000 }, async () => {
  const s = svc!;
  redis!.kill('SIGKILL');
  await waitFor(async () => !(await redisAnswers()), 5_000, 'Redis to be gone');
  const started = Date.now();
  const v = await s.request('POST', '/v1/validations', { body: { phoneNumber: '420777123456' }, headers: { 'x-api-key': verifyKey } });
  assert.equal(v.status, 503, v.text);
  assert.equal(v.headers['retry-after'], '5');
  assert.deepEqual(v.body, { error: 'SERVICE_UNAVAILABLE', message: UNAVAILABLE });
  assert.ok(Date.now() - started < 2_000, 'answered without waiting for Redis');
  assert.equal((await s.sql('SELECT 1 FROM validations')).length, 0, 'no session was stored');
  // Accepting a message needs Postgres only: it is stored, and the recovery sweep queues it later.
  const sent = await s.request('POST', '/v2/message', { body: message, headers: { 'x-api-key': sendKey } });
  assert.equal(sent.status, 200, sent.text);
  // So does a replay of dead letters: committed pending in Postgres, answered as replayed (not a 503
  // saying nothing was accepted: a retry would replay nothing), queued later by the recovery sweep.
  const [restAccount] = await s.sql<{ account_id: string; id: string }>('SELECT account_id, id FROM api_keys WHERE account_id <> $1 ORDER BY id LIMIT 1', [accountId]);
  const dead = await s.sql<{ id: string }>(
    `INSERT INTO webhook_batches (webhook_id, account_id, key_id, url, event_ids, status, dead_at)
     SELECT 'msg_outage' || g, $1, $2, 'https://receiver.example.test/hooks', ARRAY[g]::bigint[], 'dead', now() FROM generate_series(1, 2) AS g RETURNING id`,
    [restAccount!.account_id, restAccount!.id]);
  const [restBatch, adminBatch] = dead.map((r) => Number(r.id));
  const restReplay = await s.request('POST', '/v1/webhooks/replay', { body: { id: restBatch }, headers: { 'x-api-key': restKey } });
  assert.equal(restReplay.status, 200, restReplay.text);
  assert.deepEqual(restReplay.body, { success: true, replayed: 1, ids: [restBatch] });
  const adminReplay = await s.request('POST', '/admin/api/webhooks/replay', { body: { id: adminBatch }, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  assert.equal(adminReplay.status, 200, adminReplay.text);
  assert.deepEqual(adminReplay.body, { replayed: 1 });
  assert.deepEqual((await s.sql<{ status: string }>('SELECT status FROM webhook_batches WHERE id = ANY($1) ORDER BY id', [[restBatch, adminBatch]])).map((r) => r.status),
    ['pending', 'pending']);
  // Readiness says so within its one 2 s check (the stores and the carriers' states at once: it took 4 s).
  const probed = Date.now();
  const ready = await s.request('GET', '/health/ready');
  assert.equal(ready.status, 503);
  assert.equal(ready.body.redis, 'down');
  assert.ok(Date.now() - probed < 3_000, `answered after ${Date.now() - probed} ms`);
  redis = startRedis();
  await waitFor(redisAnswers, 10_000, 'Redis back');
});

test('with Postgres stopped every API family answers 503 with Retry-After, and stores nothing', { timeout: 45_000 }, async () => {
  const s = svc!;
  const before = await s.sql<{ m: number; r: number; i: number; c: number }>(
    `SELECT (SELECT count(*)::int FROM messages) m, (SELECT count(*)::int FROM recipients) r, (SELECT count(*)::int FROM inbound_messages) i,
            (SELECT credit_czk::float FROM accounts WHERE id = $1) c`, [accountId]);
  stopPostgres();
  for (const { name, call, body } of calls()) {
    const started = Date.now();
    const r = await call();
    assert.equal(r.status, 503, `${name}: ${r.status} ${r.text}`);
    assert.equal(r.headers['retry-after'], '5', name);
    body(r);
    assert.ok(Date.now() - started < 6_000, `${name} answered within the pool's connect timeout`);
  }
  const health = await s.request('GET', '/health');
  assert.equal(health.status, 503);
  startPostgres();
  // Back: the same calls work again, and none of the refused ones left a row behind.
  await waitFor(async () => (await s.request('GET', '/v1/credit', { headers: { 'x-api-key': restKey } })).status === 200, 15_000, 'the service to recover');
  const afterRows = await s.sql<{ m: number; r: number; i: number; c: number }>(
    `SELECT (SELECT count(*)::int FROM messages) m, (SELECT count(*)::int FROM recipients) r, (SELECT count(*)::int FROM inbound_messages) i,
            (SELECT credit_czk::float FROM accounts WHERE id = $1) c`, [accountId]);
  assert.deepEqual(afterRows, before);
  const sent = await s.request('POST', '/v2/messages', { body: [message], headers: { 'x-api-key': sendKey } });
  assert.equal(sent.status, 200, sent.text);
  assert.equal(sent.body.accepted.length, 1);
});

test('with Postgres stopped, the 503 lines carry the request id and mask the tokens of the path', { timeout: 45_000 }, async () => {
  const s = svc!;
  const from = logLines.length;
  stopPostgres();
  try {
    const verify = await s.request('POST', '/v1/validations/SessionToken0123456789/verify', {
      body: { code: '123456' }, headers: { 'x-api-key': verifyKey, 'x-request-id': 'outage-verify-1' },
    });
    assert.equal(verify.status, 503, verify.text);
    const callback = await s.request('POST', '/callbacks/viber/some-connection/CallbackToken0123456789', {
      body: {}, headers: { 'x-request-id': 'outage-callback-1' },
    });
    assert.equal(callback.status, 503, callback.text);
  } finally {
    startPostgres();
  }
  await waitFor(async () => (await s.request('GET', '/v1/credit', { headers: { 'x-api-key': restKey } })).status === 200, 15_000, 'the service to recover');
  const lines = logLines.slice(from);
  const leaked = lines.filter((l) => l.includes('SessionToken0123456789') || l.includes('CallbackToken0123456789'));
  assert.deepEqual(leaked, [], 'no line names a token of the path');
  const outage = lines.map((l) => JSON.parse(l) as { msg: string; reqId?: string; path?: string }).filter((l) => l.msg === 'storage unavailable; answered 503');
  assert.deepEqual(outage.map((l) => [l.reqId, l.path]), [
    ['outage-verify-1', '/v1/validations/***/verify'],
    ['outage-callback-1', '/callbacks/viber/some-connection/***'],
  ]);
});
