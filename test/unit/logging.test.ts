import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { createLogger } from '../../shared/logger.js';
import { WebhookFailureLog } from '../../shared/webhooks/failure-log.js';
import { maskPath } from '../../api/middleware/request-log.js';
import { RepeatedFailureLog } from '../../shared/repeated-failure-log.js';

function capture() {
  const lines: Array<Record<string, any>> = []; // eslint-disable-line @typescript-eslint/no-explicit-any
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { lines, logger: createLogger('info', 'test', sink) };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

test('redaction hides secrets by name but keeps error codes', async () => {
  const { lines, logger } = capture();
  const err = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  logger.error({
    err, code: '40P01', password: 'pw', token: 't', apiKey: 'sb_x', otp: '123456',
    connection: { secret: 's', credentials: { password: 'p' }, code: 'ESME_RINVPASWD' },
    headers: { authorization: 'Bearer x', 'x-api-key': 'sb_y', accept: '*/*' },
  }, 'boom');
  await flush();
  const line = lines[0]!;
  assert.equal(line.err.code, 'ECONNREFUSED');
  assert.equal(line.code, '40P01');
  assert.equal(line.connection.code, 'ESME_RINVPASWD');
  for (const hidden of [line.password, line.token, line.apiKey, line.otp, line.connection.secret, line.connection.credentials, line.headers.authorization, line.headers['x-api-key']]) {
    assert.equal(hidden, '[redacted]');
  }
  assert.equal(line.headers.accept, '*/*');
});

test('paths with a secret in them are masked', () => {
  const table: Array<[string, string]> = [
    ['/callbacks/viber/shop-cz/0f3c9a', '/callbacks/viber/shop-cz/***'],
    ['/callbacks/whatsapp/main/token/deeper', '/callbacks/whatsapp/main/***'],
    ['/callbacks/whatsapp/main', '/callbacks/whatsapp/main'],
    ['/v1/validations/abc123', '/v1/validations/***'],
    ['/v1/validations/abc123/verify', '/v1/validations/***/verify'],
    ['/v2/messages', '/v2/messages'],
    ['/admin/api/accounts/7', '/admin/api/accounts/7'],
    // The router matches paths in any case: so does the mask.
    ['/CALLBACKS/viber/viber/ViberCbToken', '/CALLBACKS/viber/viber/***'],
    ['/V1/Validations/3.abc.def', '/V1/Validations/***'],
    ['//v1//validations/3.abc.def/verify', '//v1//validations/***/verify'],
  ];
  for (const [path, masked] of table) assert.equal(maskPath(path), masked, path);
});

test('webhook failures: one warning per key and origin per minute, counting what was left out', async () => {
  const { lines, logger } = capture();
  let now = Date.parse('2026-01-01T00:00:00Z');
  const log = new WebhookFailureLog(logger, 60_000, () => now);
  const fail = (url: string, keyId: number | null, nextRetryMs: number | null = 10_000) =>
    log.failed({ keyId, url, status: 503, reason: 'HTTP 503', attempts: 1, nextRetryMs });
  fail('https://user:pw@hooks.example.com/a/b?x=1', 7);
  fail('https://hooks.example.com/other', 7);
  fail('https://hooks.example.com/a', 8);
  fail('https://elsewhere.example.com/a', 7);
  now += 59_000;
  fail('https://hooks.example.com/a', 7, null);
  now += 2_000;
  fail('https://hooks.example.com/a', 7, 60_000);
  await flush();
  assert.deepEqual(lines.map((l) => [l.key_id, l.origin]), [
    [7, 'https://hooks.example.com'], [8, 'https://hooks.example.com'], [7, 'https://elsewhere.example.com'], [7, 'https://hooks.example.com'],
  ]);
  assert.equal(lines[0]!.level, 40);
  assert.equal(lines[0]!.next_retry_in_s, 10);
  assert.equal(lines[0]!.next_retry_at, '2026-01-01T00:00:10.000Z');
  assert.equal(lines[3]!.similar_failures_not_logged, 2);
  assert.equal(lines[3]!.next_retry_in_s, 60);
  assert.ok(!JSON.stringify(lines).includes('pw@') && !JSON.stringify(lines).includes('/a/b'), 'never the credentials or the path');
});

test('a failure that repeats on a timer is logged once per period, with how many were left out', async () => {
  const { lines, logger } = capture();
  let now = 0;
  const log = new RepeatedFailureLog(logger, 'outbox relay pass failed', 30_000, () => now);
  // A pass every 200 ms for 65 s: lines at 0, 30 and 60 s.
  for (; now <= 65_000; now += 200) log.failed(new Error('connect ECONNREFUSED'));
  await flush();
  assert.deepEqual(lines.map((l) => [l.msg, l.level, l.err, l.failures_not_logged]), [
    ['outbox relay pass failed', 50, 'connect ECONNREFUSED', undefined],
    ['outbox relay pass failed', 50, 'connect ECONNREFUSED', 149],
    ['outbox relay pass failed', 50, 'connect ECONNREFUSED', 149],
  ]);
});
