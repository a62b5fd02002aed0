/**
 * Watching the service as an operator would: `/metrics` scraped after real traffic (SMS over SMPP
 * to the SMSC simulator, webhooks to local receivers, one of them failing until its batch is
 * dead-lettered, a verification) and parsed as the exposition format, with every family the
 * operations issue lists; `/health/live` and `/health/ready` with the carrier connections' states;
 * request logs with their request id, full and masked paths; webhook failures logged once per key
 * and origin; a worker's METRICS_PORT listener.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Writable } from 'node:stream';
import { SmscSimulator } from '../../scripts/smsc-simulator.js';
import { createLogger } from '../../shared/logger.js';
import { startReceiver, startTestService, waitFor, type Receiver, type TestService } from '../support/harness.js';
import { parseExposition, total } from '../support/exposition.js';

let sim: SmscSimulator;
let svc: TestService;
let ok: Receiver;
let failing: Receiver;
let apiKey: string;
const logLines: Array<Record<string, any>> = []; // eslint-disable-line @typescript-eslint/no-explicit-any
const rawLog: string[] = [];

before(async () => {
  sim = new SmscSimulator({ systemId: 'sb', password: 'pw', receiptDelayMs: 20 });
  const { port } = await sim.start();
  ok = await startReceiver();
  failing = await startReceiver();
  failing.respond = () => ({ status: 500 });
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) {
        rawLog.push(line);
        logLines.push(JSON.parse(line) as Record<string, unknown>);
      }
      done();
    },
  });
  svc = await startTestService({
    env: { SMPP_URL: `smpp://sb:pw@127.0.0.1:${port}?window=10`, WEBHOOK_RETRY_SCHEDULE_MS: '50' },
    logger: createLogger('debug', 'switchboard', sink),
  });
  ({ apiKey } = await svc.createAccount());
});

after(async () => {
  await svc?.stop();
  await ok?.close();
  await failing?.close();
  await sim?.stop();
});

async function scrape() {
  const res = await fetch(`${svc.url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

test('/metrics after real traffic has every family, with the traffic counted', { timeout: 60_000 }, async () => {
  const phones = ['420777100100', '420777100200', '420777100300'];
  const res = await svc.request('POST', '/v2/messages', {
    body: [{ body: 'metrics', to: phones.map((phone_number) => ({ phone_number })), callback: ok.url }], headers: { 'x-api-key': apiKey },
  });
  assert.equal(res.status, 200, res.text);
  const dead = await svc.request('POST', '/v2/message', {
    body: { body: 'to a failing receiver', to: [{ phone_number: '420777100400' }], callback: failing.url }, headers: { 'x-api-key': apiKey },
  });
  assert.equal(dead.status, 200, dead.text);
  const started = await svc.request('POST', '/v1/validations', { body: { phoneNumber: '420777100500' }, headers: { 'x-api-key': apiKey } });
  assert.equal(started.status, 200, started.text);
  const wrong = await svc.request('POST', `/v1/validations/${started.body.token}/verify`, { body: { code: 'abcdef' }, headers: { 'x-api-key': apiKey } });
  assert.equal(wrong.status, 400);
  // Refused REST calls: their error handlers are mounted on the routes' paths.
  assert.equal((await svc.request('GET', '/v1/credit')).status, 401);
  assert.equal((await svc.request('DELETE', '/v1/suppressions/420777100600')).status, 401);
  assert.equal((await svc.request('GET', '/v1/credit', { headers: { 'x-api-key': apiKey } })).status, 200);

  await waitFor(() => ok.events().filter((e) => e.result === 'delivered').length >= 3, 20_000, 'three delivered events');
  await waitFor(async () => (await svc.sql(`SELECT 1 FROM webhook_batches WHERE status = 'dead'`)).length > 0, 20_000, 'a dead-lettered batch');

  const m = await scrape();
  const expected: Record<string, string> = {
    switchboard_http_requests_total: 'counter',
    switchboard_http_request_duration_seconds: 'histogram',
    switchboard_recipients_accepted_total: 'counter',
    switchboard_attempts_total: 'counter',
    switchboard_carrier_submit_seconds: 'histogram',
    switchboard_carrier_window: 'gauge',
    switchboard_accept_large_call_turns: 'gauge',
    switchboard_carrier_reports_applied_total: 'counter',
    switchboard_dispatch_batches_total: 'counter',
    switchboard_dispatch_batch_jobs_total: 'counter',
    switchboard_webhook_deliveries_total: 'counter',
    switchboard_webhook_delivery_seconds: 'histogram',
    switchboard_webhook_batches_dead_total: 'counter',
    switchboard_queue_jobs: 'gauge',
    switchboard_queue_oldest_waiting_seconds: 'gauge',
    switchboard_verifications_started_total: 'counter',
    switchboard_verification_checks_total: 'counter',
    process_cpu_user_seconds_total: 'counter',
    nodejs_eventloop_lag_seconds: 'gauge',
  };
  for (const [name, type] of Object.entries(expected)) {
    assert.equal(m.get(name)?.type, type, `${name} is a ${type}`);
    assert.ok(m.get(name)!.help.length > 0, `${name} has help`);
  }

  assert.ok(total(m, 'switchboard_http_requests_total', { method: 'POST', route: '/v2/messages', status: '200' }) >= 1);
  assert.ok(total(m, 'switchboard_http_requests_total', { route: '/v1/validations/:token/verify', status: '400' }) >= 1, 'route patterns, not paths');
  // A route's refusals under the same label as its answers (they were `/v1/credit/v1/credit`).
  assert.ok(total(m, 'switchboard_http_requests_total', { method: 'GET', route: '/v1/credit', status: '401' }) >= 1);
  assert.ok(total(m, 'switchboard_http_requests_total', { method: 'GET', route: '/v1/credit', status: '200' }) >= 1);
  assert.ok(total(m, 'switchboard_http_requests_total', { method: 'DELETE', route: '/v1/suppressions/:phone', status: '401' }) >= 1);
  assert.ok(![...(m.get('switchboard_http_requests_total')?.samples ?? [])].some((s) => /(\/v1\/[a-z]+).*\1/.test(s.labels.route ?? '')), 'no doubled route');
  assert.ok(total(m, 'switchboard_http_request_duration_seconds', { route: '/v2/messages', le: '+Inf' }, 'switchboard_http_request_duration_seconds_bucket') >= 1);
  assert.ok(total(m, 'switchboard_recipients_accepted_total', { api: 'v2' }) >= 4);
  assert.ok(total(m, 'switchboard_recipients_accepted_total', { api: 'verify' }) >= 1);
  assert.ok(total(m, 'switchboard_attempts_total', { channel: 'sms', result: 'sent' }) >= 4);
  assert.ok(total(m, 'switchboard_attempts_total', { channel: 'sms', result: 'delivered' }) >= 3);
  assert.ok(total(m, 'switchboard_carrier_submit_seconds', { kind: 'smpp', connection: 'default' }, 'switchboard_carrier_submit_seconds_count') >= 1, 'the first submit is timed');
  assert.equal(total(m, 'switchboard_carrier_window', { kind: 'smpp', connection: 'default', measure: 'size' }), 10);
  assert.ok(m.get('switchboard_carrier_window')!.samples.some((s) => s.labels.measure === 'in_use'));
  assert.equal(total(m, 'switchboard_accept_large_call_turns', { measure: 'size' }), 2, 'small calls came: the narrow turns (ACCEPT_LARGE_CALL_CONCURRENCY)');
  assert.ok(total(m, 'switchboard_carrier_reports_applied_total') >= 6, 'submit responses and receipts');
  // Both sends went through a bulk lane's batches (the verification code, through the priority lane, alone).
  const batches = total(m, 'switchboard_dispatch_batches_total');
  assert.ok(batches >= 1 && batches <= 2, `the two calls' jobs ran in one or two batches (${batches})`);
  assert.equal(total(m, 'switchboard_dispatch_batch_jobs_total'), 2, 'two jobs, each in a batch once');
  assert.ok(total(m, 'switchboard_webhook_deliveries_total', { outcome: 'delivered' }) >= 1);
  assert.ok(total(m, 'switchboard_webhook_deliveries_total', { outcome: 'http_error' }) >= 2, 'the failing receiver, twice');
  assert.ok(total(m, 'switchboard_webhook_delivery_seconds', {}, 'switchboard_webhook_delivery_seconds_count') >= 3);
  assert.ok(total(m, 'switchboard_webhook_batches_dead_total') >= 1);
  assert.ok(total(m, 'switchboard_verifications_started_total') >= 1);
  assert.ok(total(m, 'switchboard_verification_checks_total', { outcome: 'invalid_code' }) >= 1);
  for (const [queue, family, lane] of [['sms.priority', 'sms', 'priority'], ['viber.promotional', 'viber', 'promotional'], ['status.0', 'status', ''], ['webhooks', 'webhooks', '']]) {
    const jobs = m.get('switchboard_queue_jobs')!.samples.filter((s) => s.labels.queue === queue);
    assert.deepEqual(new Set(jobs.map((s) => s.labels.state)), new Set(['waiting', 'prioritized', 'active', 'delayed', 'failed']), queue);
    assert.ok(jobs.every((s) => s.labels.family === family && s.labels.lane === lane), `${queue} labels`);
    const oldest = m.get('switchboard_queue_oldest_waiting_seconds')!.samples.find((s) => s.labels.queue === queue);
    assert.ok(oldest && oldest.value >= 0, `${queue} oldest waiting`);
  }
});

test('health: /health as documented, /health/live, /health/ready with each carrier connection\'s state', { timeout: 30_000 }, async () => {
  const health = await svc.request('GET', '/health');
  assert.deepEqual(health.body, { status: 'ok', postgres: 'ok', redis: 'ok' });
  const live = await svc.request('GET', '/health/live');
  assert.deepEqual([live.status, live.body], [200, { status: 'ok' }]);
  const ready = await waitFor(async () => {
    const r = await svc.request('GET', '/health/ready');
    return r.body.carriers?.default?.state === 'bound' ? r : null;
  }, 10_000, 'the env connection bound');
  assert.equal(ready.status, 200);
  assert.equal(ready.body.status, 'ok');
  assert.equal(ready.body.postgres, 'ok');
  assert.equal(ready.body.redis, 'ok');
  assert.deepEqual(ready.body.carriers.default, { kind: 'smpp', state: 'bound' });

  // A connection whose bind is refused: still ready (work waits), but degraded, with the reason in words.
  const stored = await svc.admin('POST', '/carriers', { name: 'badpw', kind: 'smpp', config: { url: `smpp://sb:wrong@127.0.0.1:${sim.port}` }, routes: ['999'] });
  assert.equal(stored.status, 201, stored.text);
  const degraded = await waitFor(async () => {
    const r = await svc.request('GET', '/health/ready');
    return r.body.carriers?.badpw?.state === 'error' ? r : null;
  }, 15_000, 'the refused bind reported');
  assert.equal(degraded.status, 200);
  assert.equal(degraded.body.status, 'degraded');
  assert.match(degraded.body.carriers.badpw.detail, /ESME_RINVPASWD/);
  assert.equal((await svc.admin('DELETE', '/carriers/badpw')).status, 200);
});

test('request logs: an id on every line of the request (echoed), the full path, tokens and keys never written', { timeout: 30_000 }, async () => {
  const given = await fetch(`${svc.url}/admin/api/accounts/999999`, { headers: { authorization: 'Bearer wrong', 'x-request-id': 'ops-test-1' } });
  assert.equal(given.headers.get('x-request-id'), 'ops-test-1');
  const generated = await fetch(`${svc.url}/health`);
  assert.match(generated.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  const odd = await fetch(`${svc.url}/health`, { headers: { 'x-request-id': 'no spaces or "quotes" please' } });
  assert.match(odd.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/, 'an unusable id is replaced');

  const started = await svc.request('POST', '/v1/validations', { body: { phoneNumber: '420777100600' }, headers: { 'x-api-key': apiKey } });
  const token = started.body.token as string;
  await svc.request('GET', `/v1/validations/${token}?trace=1`, { headers: { 'x-api-key': apiKey, 'x-request-id': 'ops-test-2' } });
  await fetch(`${svc.url}/callbacks/viber/nowhere/cb-secret-0123456789`, { method: 'POST', body: '{}', headers: { 'x-request-id': 'ops-test-3' } });
  await fetch(`${svc.url}/v2/simple/message?apikey=${apiKey}&phone_number=420777100700&message=hi`, { headers: { 'x-request-id': 'ops-test-4' } });
  await waitFor(() => logLines.some((l) => l.reqId === 'ops-test-4'), 5000, 'the last request logged');

  const ofRequest = (id: string) => logLines.filter((l) => l.reqId === id);
  const admin = ofRequest('ops-test-1');
  assert.equal(admin.length, 1);
  assert.equal(admin[0]!.req.path, '/admin/api/accounts/999999', 'the router prefix is kept');
  assert.equal(admin[0]!.res.status, 401);
  assert.equal(admin[0]!.msg, 'request refused');
  assert.equal(admin[0]!.level, 30);
  const verification = ofRequest('ops-test-2');
  assert.equal(verification[0]!.req.path, '/v1/validations/***');
  assert.equal(verification[0]!.level, 20, 'a success logs at debug');
  assert.equal(ofRequest('ops-test-3')[0]!.req.path, '/callbacks/viber/nowhere/***');
  assert.equal(ofRequest('ops-test-4')[0]!.req.path, '/v2/simple/message', 'no query string');
  const everything = rawLog.join('\n');
  for (const secret of [token, 'cb-secret-0123456789', apiKey]) {
    assert.ok(!everything.includes(secret), `${secret.slice(0, 6)}… is never logged`);
  }
});

test('a failing webhook receiver is logged at warn with its origin, status and next retry, once per key and origin per minute', async () => {
  await waitFor(() => logLines.some((l) => l.msg === 'webhook batch dead-lettered'), 20_000, 'the dead letter logged');
  const origin = new URL(failing.url).origin;
  const failures = logLines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('webhook delivery failed'));
  assert.equal(failures.length, 1, JSON.stringify(failures));
  const line = failures[0]!;
  assert.equal(line.level, 40);
  assert.equal(line.origin, origin, 'the origin only, no path');
  assert.equal(line.status, 500);
  assert.equal(line.msg, 'webhook delivery failed; retrying');
  assert.ok(line.next_retry_in_s >= 0 && typeof line.next_retry_at === 'string');
  assert.equal(typeof line.key_id, 'number');
  if (failing.url !== origin) assert.ok(!JSON.stringify(line).includes(failing.url), 'no path');
});

test('a worker\'s METRICS_PORT listener: /metrics behind METRICS_TOKEN, /health/live, /health/ready', { timeout: 30_000 }, async () => {
  const worker = await startTestService({ role: 'worker', pools: ['status'], env: { METRICS_PORT: '0', METRICS_TOKEN: 'metrics-token-0123456789' } });
  try {
    const base = `http://127.0.0.1:${worker.runtime.metricsPort}`;
    assert.equal((await fetch(`${base}/metrics`)).status, 401);
    const scraped = await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer metrics-token-0123456789' } });
    assert.equal(scraped.status, 200);
    const families = parseExposition(await scraped.text());
    assert.ok(families.has('switchboard_attempts_total'));
    assert.equal((await fetch(`${base}/health/live`)).status, 200);
    const ready = await fetch(`${base}/health/ready`);
    assert.equal(ready.status, 200);
    assert.deepEqual(((await ready.json()) as { postgres: string }).postgres, 'ok');
    assert.equal((await fetch(`${base}/elsewhere`)).status, 404);
  } finally {
    await worker.stop();
  }
});
