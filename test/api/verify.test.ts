import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { startTestService, waitFor, type TestService, type TestResponse } from '../support/harness.js';
import { generateApiKey, invalidateKeyCache } from '../../shared/domain/keys.js';
import { createPool } from '../../shared/db/pool.js';
import { createLogger } from '../../shared/logger.js';
import { CodeCopyExpiry } from '../../shared/verification/hooks.js';

let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(async () => {
  await svc.stop();
});

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** A fresh Czech mobile number per call; `end` picks the sandbox outcome (D10: 99 = delivered). */
let seq = 0;
function newPhone(end = '99'): string {
  seq++;
  return `4207${String(process.pid % 100).padStart(2, '0')}${String(seq).padStart(4, '0')}${end}`;
}

function call(method: string, path: string, key?: string, body?: unknown): Promise<TestResponse> {
  return svc.request(method, path, { ...(body !== undefined && { body }), headers: key ? { 'x-api-key': key } : {} });
}

async function start(key: string, phoneNumber: string): Promise<{ token: string; status: string; expiresAt: string; timestamp: string }> {
  const res = await call('POST', '/v1/validations', key, { phoneNumber });
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** The code as the sandbox carried it (D10 read-back). */
async function readCode(key: string, phoneNumber: string): Promise<{ code: string; text: string }> {
  return waitFor(async () => {
    const res = await svc.request('GET', `/sandbox/messages?phone_number=${phoneNumber}&limit=1`, { headers: { 'x-api-key': key } });
    const text: string | undefined = res.body?.messages?.[0]?.body;
    const m = text ? /(\d{6})/.exec(text) : null;
    return m ? { code: m[1]!, text: text! } : undefined;
  }, 10_000, `code SMS to ${phoneNumber}`);
}

const otherCode = (code: string, n = 1) => String((Number(code) + n) % 1_000_000).padStart(6, '0');

async function session(token: string) {
  const [row] = await svc.sql<{ status: string; code_enc: string | null; code_hash: Buffer; token: string; sms_template: string | null; recipient_id: number; message_id: string }>(
    'SELECT * FROM validations WHERE token = $1', [token]);
  assert.ok(row, 'session row exists');
  return row;
}

/** The text kept of a recipient's current attempt (the attempt's own, else its message's) with its state. */
const STORED_TEXT = `SELECT COALESCE(a.body, m.body) AS body, rs.state, rs.phone
                       FROM recipient_states rs JOIN messages m ON m.id = rs.message_id LEFT JOIN attempts a ON a.id = rs.attempt_id
                      WHERE rs.id = $1`;

test('happy path: start, SMS through the sandbox, code_sent on the receipt, verify, masked storage', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  const phoneNumber = newPhone();
  const started = await start(apiKey, phoneNumber);
  assert.deepEqual(Object.keys(started).sort(), ['expiresAt', 'status', 'timestamp', 'token']);
  assert.equal(started.status, 'pending');
  assert.match(started.timestamp, ISO_MS);
  assert.match(started.expiresAt, ISO_MS);
  assert.equal(Date.parse(started.expiresAt) - Date.parse(started.timestamp), 600_000, 'default expiry 10 min');
  assert.ok(started.token.startsWith(`${accountId}.`));

  const { code, text } = await readCode(apiKey, phoneNumber);
  assert.equal(text, `Your verification code is ${code}`);
  const sent = await waitFor(async () => {
    const res = await call('GET', `/v1/validations/${started.token}`, apiKey);
    return res.body.status === 'code_sent' ? res : undefined;
  }, 10_000, 'code_sent');
  assert.deepEqual(sent.body, {
    token: started.token, status: 'code_sent', phoneNumber, expiresAt: started.expiresAt, timestamp: started.timestamp, attemptsRemaining: 6,
  });

  // Stored forms: the code only as a keyed hash; the encrypted copy gone after hand-over; bodies masked.
  const row = await session(started.token);
  assert.equal(row.code_enc, null);
  assert.equal(row.code_hash.length, 32);
  assert.ok(!row.code_hash.toString('hex').includes(code) && !row.code_hash.toString('latin1').includes(code));
  for (const value of [row.token, row.status, row.sms_template ?? '']) {
    assert.ok(!value.includes(code));
  }
  const [msg] = await svc.sql<{ body: string; tag: string; source: string; flow: unknown }>('SELECT body, tag, source, flow FROM messages WHERE id = $1', [row.message_id]);
  assert.deepEqual(msg, { body: 'Your verification code is ******', tag: 'priority', source: 'verify', flow: [{ sms: {} }] });
  const [rcp] = await svc.sql<{ body: string; state: string; phone: string }>(STORED_TEXT, [row.recipient_id]);
  assert.deepEqual(rcp, { body: 'Your verification code is ******', state: 'delivered', phone: phoneNumber });
  const events = await svc.sql<{ body: string }>('SELECT body FROM events WHERE recipient_id = $1', [row.recipient_id]);
  assert.ok(events.length >= 2 && events.every((e) => !e.body.includes(`is ${code}`)));
  // Billed like any SMS: one part to +420 at 0.90 CZK.
  const account = await svc.admin('GET', `/accounts/${accountId}`);
  assert.equal(account.body.credit_czk, 999.1);

  const ok = await call('POST', `/v1/validations/${started.token}/verify`, apiKey, { code });
  assert.equal(ok.status, 200, ok.text);
  assert.match(ok.body.verifiedAt, ISO_MS);
  assert.deepEqual(ok.body, { verified: true, phoneNumber, token: started.token, code, timestamp: started.timestamp, verifiedAt: ok.body.verifiedAt });
  assert.ok(!('proof' in ok.body), 'no proof without a verification secret');

  const after = await call('GET', `/v1/validations/${started.token}`, apiKey);
  assert.equal(after.body.status, 'verified');
  assert.equal(after.body.verifiedAt, ok.body.verifiedAt);

  // A retried verify (lost response) answers the same.
  const again = await call('POST', `/v1/validations/${started.token}/verify`, apiKey, { code });
  assert.equal(again.status, 200);
  assert.equal(again.body.verifiedAt, ok.body.verifiedAt);
});

test('a code is accepted while pending (no receipt), the copy is erased at hand-over, the start-time template is used', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  await svc.admin('PATCH', `/accounts/${accountId}`, { verification_template: 'Kód {code} ✓ ({code})' });
  const phoneNumber = newPhone('03'); // sandbox: sent, never a receipt
  const started = await start(apiKey, phoneNumber);
  await svc.admin('PATCH', `/accounts/${accountId}`, { verification_template: 'Changed {code}' });
  const { code, text } = await readCode(apiKey, phoneNumber);
  assert.equal(text, `Kód ${code} ✓ (${code})`);
  await waitFor(async () => (await session(started.token)).code_enc === null, 5000, 'copy erased after hand-over');
  const [rcp] = await svc.sql<{ body: string }>(STORED_TEXT, [(await session(started.token)).recipient_id]);
  assert.equal(rcp!.body, 'Kód ****** ✓ (******)');
  assert.equal((await call('GET', `/v1/validations/${started.token}`, apiKey)).body.status, 'pending');
  const ok = await call('POST', `/v1/validations/${started.token}/verify`, apiKey, { code });
  assert.equal(ok.status, 200, ok.text);
  assert.equal(ok.body.verified, true);
});

test('six wrong codes fail the session; the seventh call is 429 TOO_MANY_ATTEMPTS', async () => {
  const { apiKey } = await svc.createAccount();
  const phoneNumber = newPhone();
  const { token } = await start(apiKey, phoneNumber);
  const { code } = await readCode(apiKey, phoneNumber);
  const wrong = [otherCode(code, 1), otherCode(code, 2), 'abcdef', code.slice(0, 5), otherCode(code, 3), `${code}0`];
  for (let i = 0; i < wrong.length; i++) {
    const res = await call('POST', `/v1/validations/${token}/verify`, apiKey, { code: wrong[i] });
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(res.body, { error: 'INVALID_CODE', message: 'Invalid code', attemptsRemaining: 5 - i });
  }
  const state = await call('GET', `/v1/validations/${token}`, apiKey);
  assert.equal(state.body.status, 'failed');
  assert.equal(state.body.attemptsRemaining, 0);
  const seventh = await call('POST', `/v1/validations/${token}/verify`, apiKey, { code });
  assert.equal(seventh.status, 429);
  assert.equal(seventh.body.error, 'TOO_MANY_ATTEMPTS');
  assert.equal(seventh.body.message, 'Too many attempts');
});

test('concurrent wrong guesses never exceed the attempts', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  await svc.admin('PATCH', `/accounts/${accountId}`, { verification_attempts: 3 });
  const phoneNumber = newPhone();
  const { token } = await start(apiKey, phoneNumber);
  const { code } = await readCode(apiKey, phoneNumber);
  const results = await Promise.all(Array.from({ length: 12 }, (_, i) =>
    call('POST', `/v1/validations/${token}/verify`, apiKey, { code: otherCode(code, i + 1) })));
  assert.equal(results.filter((r) => r.status === 400).length, 3);
  assert.equal(results.filter((r) => r.status === 429).length, 9);
  assert.deepEqual(results.filter((r) => r.status === 400).map((r) => r.body.attemptsRemaining).sort(), [0, 1, 2]);
});

test('a session expires after the account expiry (verification_expiry_s)', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  const patched = await svc.admin('PATCH', `/accounts/${accountId}`, { verification_expiry_s: 1 });
  assert.equal(patched.status, 200);
  const phoneNumber = newPhone();
  const started = await start(apiKey, phoneNumber);
  assert.equal(Date.parse(started.expiresAt) - Date.parse(started.timestamp), 1000);
  const { code } = await readCode(apiKey, phoneNumber);
  await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(started.expiresAt) - Date.now()) + 50));
  const res = await call('POST', `/v1/validations/${started.token}/verify`, apiKey, { code });
  assert.equal(res.status, 400);
  assert.deepEqual(res.body, { error: 'EXPIRED', message: 'Validation expired' });
  const state = await call('GET', `/v1/validations/${started.token}`, apiKey);
  assert.equal(state.body.status, 'expired');
  assert.equal((await session(started.token)).code_enc, null);
});

test('unknown, forged and other accounts\' tokens are 404 NOT_FOUND', async () => {
  const a = await svc.createAccount();
  const b = await svc.createAccount();
  const { token } = await start(a.apiKey, newPhone());
  const [, random, mac] = token.split('.');
  const candidates = [
    '1.AAAAAAAAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA', // well formed, never minted
    'nope',
    `${b.accountId}.${random}.${mac}`, // a's token relabelled as b's
    token, // a's genuine token, presented by b
  ];
  for (const t of candidates) {
    for (const [method, path, body] of [
      ['GET', `/v1/validations/${t}`, undefined],
      ['POST', `/v1/validations/${t}/verify`, { code: '123456' }],
      ['PATCH', `/v1/validations/${t}`, { proof: 'a'.repeat(64) }],
    ] as const) {
      const res = await call(method, path, b.apiKey, body);
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
      assert.deepEqual(res.body, { error: 'NOT_FOUND', message: 'Validation not found' });
    }
  }
  // Still intact for its owner: b's guesses consumed nothing.
  assert.equal((await call('GET', `/v1/validations/${token}`, a.apiKey)).body.attemptsRemaining, 6);
});

test('proof round trip: verify returns the HMAC proof; PATCH and verify-proof check it; tampered and expired proofs fail', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  const secret = 'my-verification-secret-0123456789';
  assert.equal((await svc.admin('PATCH', `/accounts/${accountId}`, { verification_secret: secret })).status, 200);
  const phoneNumber = newPhone();
  const { token, timestamp } = await start(apiKey, phoneNumber);
  const { code } = await readCode(apiKey, phoneNumber);

  const early = await call('PATCH', `/v1/validations/${token}`, apiKey, { proof: 'a'.repeat(64) });
  assert.equal(early.status, 200);
  assert.deepEqual(early.body, { valid: false, phoneNumber, verifiedAt: null });

  const ok = await call('POST', `/v1/validations/${token}/verify`, apiKey, { code });
  assert.equal(ok.status, 200, ok.text);
  const expected = createHmac('sha256', secret).update(`${phoneNumber}|${token}|${code}|${timestamp}`, 'utf8').digest('hex');
  assert.equal(ok.body.proof, expected);
  const proof: string = ok.body.proof;
  const tampered = (proof[0] === '0' ? '1' : '0') + proof.slice(1);

  const stored = await call('PATCH', `/v1/validations/${token}`, apiKey, { proof });
  assert.equal(stored.status, 200);
  assert.deepEqual(stored.body, { valid: true, phoneNumber, verifiedAt: ok.body.verifiedAt });
  const bad = await call('PATCH', `/v1/validations/${token}`, apiKey, { proof: tampered });
  assert.deepEqual(bad.body, { valid: false, phoneNumber, verifiedAt: ok.body.verifiedAt });

  const offline = { phoneNumber, token, code, timestamp, proof };
  assert.deepEqual((await call('POST', '/v1/verify-proof', undefined, offline)).body, { valid: true });
  assert.deepEqual((await call('POST', '/v1/verify-proof', 'sb_not_a_key', offline)).body, { valid: true }, 'any key header is ignored');
  for (const changed of [
    { proof: tampered }, { code: otherCode(code) }, { phoneNumber: newPhone() },
    { timestamp: new Date(Date.parse(timestamp) + 1).toISOString() },
    { token: `${accountId + 1000}.${token.split('.').slice(1).join('.')}` },
  ]) {
    const res = await call('POST', '/v1/verify-proof', undefined, { ...offline, ...changed });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { valid: false }, JSON.stringify(changed));
  }
  // A genuine proof whose session started more than 24 h ago (offline: the timestamp says so).
  const oldTs = new Date(Date.now() - 25 * 3600e3).toISOString();
  const oldProof = createHmac('sha256', secret).update(`${phoneNumber}|${token}|${code}|${oldTs}`).digest('hex');
  assert.deepEqual((await call('POST', '/v1/verify-proof', undefined, { ...offline, timestamp: oldTs, proof: oldProof })).body,
    { valid: false, expired: true });
  // Stored check: move the session's start back by SQL.
  await svc.sql(`UPDATE validations SET started_at = started_at - interval '25 hours' WHERE token = $1`, [token]);
  const expired = await call('PATCH', `/v1/validations/${token}`, apiKey, { proof });
  assert.deepEqual(expired.body, { valid: false, expired: true, phoneNumber, verifiedAt: ok.body.verifiedAt });

  const missing = await call('POST', '/v1/verify-proof', undefined, { phoneNumber, token, code, timestamp });
  assert.equal(missing.status, 400);
  assert.deepEqual(missing.body, { error: 'MISSING_FIELD', message: 'proof is required' });
  const noProof = await call('PATCH', `/v1/validations/${token}`, apiKey, {});
  assert.equal(noProof.body.error, 'MISSING_FIELD');
});

test('tenant limit: exactly 10 of 50 concurrent starts for different numbers succeed', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  await svc.admin('PATCH', `/accounts/${accountId}`, { verify_account_per_min: 10 });
  const results = await Promise.all(Array.from({ length: 50 }, () => call('POST', '/v1/validations', apiKey, { phoneNumber: newPhone() })));
  assert.equal(results.filter((r) => r.status === 200).length, 10);
  const limited = results.filter((r) => r.status === 429);
  assert.equal(limited.length, 40);
  for (const r of limited) {
    assert.equal(r.body.error, 'TENANT_RATE_LIMIT');
    assert.equal(typeof r.body.message, 'string');
    const retry = Number(r.headers['retry-after']);
    assert.ok(Number.isInteger(retry) && retry >= 1 && retry <= 60, `Retry-After ${r.headers['retry-after']}`);
  }
  const [{ n }] = await svc.sql<{ n: number }>('SELECT count(*)::int AS n FROM validations WHERE account_id = $1', [accountId]) as [{ n: number }];
  assert.equal(n, 10);
});

test('phone limits: the 30 s cooldown admits 1 of 50; without cooldown 5 per hour admit exactly 5', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  const one = newPhone();
  const burst = await Promise.all(Array.from({ length: 50 }, () => call('POST', '/v1/validations', apiKey, { phoneNumber: one })));
  assert.equal(burst.filter((r) => r.status === 200).length, 1);
  const limited = burst.filter((r) => r.status === 429);
  assert.equal(limited.length, 49);
  for (const r of limited) {
    assert.equal(r.body.error, 'PHONE_RATE_LIMIT');
    const retry = Number(r.headers['retry-after']);
    assert.ok(retry >= 1 && retry <= 30, `Retry-After ${retry}`);
  }

  await svc.admin('PATCH', `/accounts/${accountId}`, { verify_phone_cooldown_s: 0, verify_phone_per_hour: 5 });
  const two = newPhone();
  const hourly = await Promise.all(Array.from({ length: 50 }, () => call('POST', '/v1/validations', apiKey, { phoneNumber: two })));
  assert.equal(hourly.filter((r) => r.status === 200).length, 5);
  const over = hourly.filter((r) => r.status === 429);
  assert.equal(over.length, 45);
  for (const r of over) {
    assert.equal(r.body.error, 'PHONE_RATE_LIMIT');
    const retry = Number(r.headers['retry-after']);
    assert.ok(retry > 3500 && retry <= 3600, `Retry-After ${retry}`);
  }
  // Limits are per (account, number): another account is not affected.
  const other = await svc.createAccount();
  await start(other.apiKey, two);
});

test('no credit: 402 INSUFFICIENT_CREDIT, no session, no message, and no rate-limit slot used', async () => {
  const { accountId, apiKey } = await svc.createAccount({ credit_czk: 0 });
  const phoneNumber = newPhone();
  for (let i = 0; i < 2; i++) {
    const res = await call('POST', '/v1/validations', apiKey, { phoneNumber });
    assert.equal(res.status, 402, res.text);
    assert.equal(res.body.error, 'INSUFFICIENT_CREDIT');
  }
  const rows = await svc.sql('SELECT 1 FROM validations WHERE account_id = $1 UNION ALL SELECT 1 FROM messages WHERE account_id = $1', [accountId]);
  assert.equal(rows.length, 0);
  await svc.admin('POST', `/accounts/${accountId}/credit`, { czk: 0.9 });
  await start(apiKey, phoneNumber); // the refused starts did not trigger the 30 s cooldown

  // An own-credit sub-key pays from its own balance, whatever the account holds.
  const sub = generateApiKey();
  const [{ id: keyId }] = await svc.sql<{ id: number }>(
    `INSERT INTO api_keys (account_id, is_primary, key_hash, key_prefix, shared, currency, balance)
     VALUES ($1, false, $2, $3, false, 'EUR', 0.03) RETURNING id`, [accountId, sub.hash, sub.prefix]) as [{ id: number }];
  await svc.admin('POST', `/accounts/${accountId}/credit`, { czk: 100 });
  const poor = await call('POST', '/v1/validations', sub.key, { phoneNumber: newPhone() });
  assert.equal(poor.status, 402);
  await svc.sql('UPDATE api_keys SET balance = 0.036 WHERE id = $1', [keyId]);
  const subPhone = newPhone();
  await start(sub.key, subPhone);
  await readCode(sub.key, subPhone);
  await waitFor(async () => {
    const [k] = await svc.sql<{ balance: number }>('SELECT balance FROM api_keys WHERE id = $1', [keyId]);
    return Number(k!.balance) === 0;
  }, 5000, 'sub-key charged 0.036 EUR');
});

test('the credit check at start uses a price stored a moment ago by another process, not the copy this one read before', async () => {
  const { accountId, apiKey } = await svc.createAccount({ credit_czk: 0 });
  await svc.admin('POST', `/accounts/${accountId}/credit`, { czk: 5 });
  await start(apiKey, newPhone()); // reads the price list into this process's copy
  // Another process (SQL here, as the CLI or another web process would write) makes the SMS dearer
  // than the account's credit. Nothing tells this process but the stored version.
  const raise = 'UPDATE prices SET price_czk = price_czk + $1 WHERE channel = \'sms\'';
  await svc.sql(raise, [1000]);
  try {
    const res = await call('POST', '/v1/validations', apiKey, { phoneNumber: newPhone() });
    assert.equal(res.status, 402, res.text);
    assert.equal(res.body.error, 'INSUFFICIENT_CREDIT');
  } finally {
    await svc.sql(raise, [-1000]);
  }
  await start(apiKey, newPhone()); // and back at the old price at once, too
});

test('missing and invalid keys: 401 MISSING_API_KEY / INVALID_API_KEY on every keyed endpoint', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  const { token } = await start(apiKey, newPhone());
  const calls = [
    ['POST', '/v1/validations', { phoneNumber: newPhone() }],
    ['GET', `/v1/validations/${token}`, undefined],
    ['POST', `/v1/validations/${token}/verify`, { code: '123456' }],
    ['PATCH', `/v1/validations/${token}`, { proof: 'a'.repeat(64) }],
  ] as const;
  for (const [method, path, body] of calls) {
    const none = await call(method, path, undefined, body);
    assert.equal(none.status, 401);
    assert.equal(none.body.error, 'MISSING_API_KEY');
    assert.equal(typeof none.body.message, 'string');
    const wrong = await call(method, path, 'sb_wrongwrongwrongwrongwrongwrongwr', body);
    assert.equal(wrong.status, 401);
    assert.equal(wrong.body.error, 'INVALID_API_KEY');
  }
  const [{ id }] = await svc.sql<{ id: number }>('UPDATE api_keys SET disabled = true WHERE account_id = $1 RETURNING id', [accountId]) as [{ id: number }];
  invalidateKeyCache(id);
  const disabled = await call('GET', `/v1/validations/${token}`, apiKey);
  assert.equal(disabled.status, 401);
  assert.equal(disabled.body.error, 'INVALID_API_KEY');
  // Wrong codes were never counted for unauthenticated calls.
  assert.equal((await svc.sql<{ attempts_remaining: number }>('SELECT attempts_remaining FROM validations WHERE token = $1', [token]))[0]!.attempts_remaining, 6);
});

test('phone numbers must match ^[1-9]\\d{6,14}$', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  const table: Array<[unknown, number, string]> = [
    ['0420777123456', 400, 'INVALID_PHONE'], // leading 0
    ['+420777123456', 400, 'INVALID_PHONE'], // digits only
    ['00420777123456', 400, 'INVALID_PHONE'],
    ['420 777 123 456', 400, 'INVALID_PHONE'],
    ['420-777-123-456', 400, 'INVALID_PHONE'],
    ['123456', 400, 'INVALID_PHONE'], // 6 digits: too short
    ['4207771234567890', 400, 'INVALID_PHONE'], // 16 digits: too long
    ['42077712345a', 400, 'INVALID_PHONE'],
    ['', 400, 'INVALID_PHONE'],
    ['４２０７７７１２３４５６', 400, 'INVALID_PHONE'], // full-width digits are not \d
    [420777123456, 400, 'INVALID_PHONE'], // a JSON number
    [['420777123456'], 400, 'INVALID_PHONE'],
    ['1234567', 400, 'INVALID_PHONE'], // the pattern fits, but +1 234567 is no possible number
    [undefined, 400, 'MISSING_FIELD'],
    [null, 400, 'MISSING_FIELD'],
  ];
  for (const [phoneNumber, status, error] of table) {
    const res = await call('POST', '/v1/validations', apiKey, phoneNumber === undefined ? {} : { phoneNumber });
    assert.equal(res.status, status, `${JSON.stringify(phoneNumber)}: ${res.text}`);
    assert.equal(res.body.error, error, JSON.stringify(phoneNumber));
    assert.equal(typeof res.body.message, 'string');
    // The message names the right cause: a number the pattern admits is refused as no possible number.
    if (phoneNumber === '1234567') assert.equal(res.body.message, 'phoneNumber is not a possible number for its country code');
    else if (error === 'INVALID_PHONE') assert.match(res.body.message, /\^\[1-9\]/);
  }
  const [{ n }] = await svc.sql<{ n: number }>('SELECT count(*)::int AS n FROM validations WHERE account_id = $1', [accountId]) as [{ n: number }];
  assert.equal(n, 0);
  // Shapes the pattern admits: 7 and 15 digits, any country code.
  for (const ok of ['4915112345699', '447911123499', '420777123499']) {
    assert.equal((await call('POST', '/v1/validations', apiKey, { phoneNumber: ok })).status, 200, ok);
  }
});

test('another path or method of the verification API is a 404 in its error shape', async () => {
  const { apiKey } = await svc.createAccount();
  for (const [method, path] of [['POST', '/v1/validations//verify'], ['DELETE', '/v1/validations/abc'], ['GET', '/v1/verify-proof'], ['PUT', '/v1/validations']]) {
    const res = await call(method!, path!, apiKey);
    assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
    assert.deepEqual(res.body, { error: 'NOT_FOUND', message: 'No such endpoint of the verification API' }, `${method} ${path}`);
  }
});

test('malformed requests answer 400 with a code, never 500', async () => {
  const { apiKey } = await svc.createAccount();
  const { token } = await start(apiKey, newPhone());
  const raw = (path: string, payload: string | Buffer, type = 'application/json') =>
    svc.request('POST', path, { raw: payload, headers: { 'x-api-key': apiKey, 'content-type': type } });
  for (const path of ['/v1/validations', `/v1/validations/${token}/verify`, '/v1/verify-proof']) {
    for (const [payload, type] of [
      ['{"phoneNumber": ', 'application/json'],
      [Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), 'application/json'],
      ['[]', 'application/json'],
      ['null', 'application/json'],
      ['phoneNumber=420777123456', 'application/x-www-form-urlencoded'],
      ['{"a":1,"a":2}', 'application/json'],
    ] as const) {
      const res = await raw(path, payload, type);
      assert.equal(res.status, 400, `${path} ${String(payload)}: ${res.text}`);
      assert.equal(res.body.error, 'INVALID_REQUEST');
      assert.equal(typeof res.body.message, 'string');
    }
  }
  const numeric = await call('POST', `/v1/validations/${token}/verify`, apiKey, { code: 123456 });
  assert.equal(numeric.status, 400);
  assert.equal(numeric.body.error, 'INVALID_REQUEST');
  const missing = await call('POST', `/v1/validations/${token}/verify`, apiKey, {});
  assert.deepEqual(missing.body, { error: 'MISSING_FIELD', message: 'code is required' });
  const badEscape = await call('GET', '/v1/validations/%E0%A4%A', apiKey);
  assert.equal(badEscape.status, 400);
  assert.equal(badEscape.body.error, 'INVALID_REQUEST');
  // None of these consumed an attempt.
  assert.equal((await call('GET', `/v1/validations/${token}`, apiKey)).body.attemptsRemaining, 6);
});

test('a code copy whose SMS never left (the test number) is erased by the sweep a day after its session expired, not before', async () => {
  const { apiKey } = await svc.createAccount();
  const never = await start(apiKey, '420777777777');
  const live = await start(apiKey, newPhone());
  await waitFor(async () => (await session(live.token)).code_enc === null, 10_000, 'the sent one erased at hand-over');
  // Two more such sessions, expired an hour and a day ago (copies of the row: the number's rate limit allows one start).
  const sessions = [never.token];
  for (const hoursAgo of [1, 25]) {
    const token = `${never.token}-${hoursAgo}h`;
    await svc.sql(`INSERT INTO validations (token, account_id, key_id, phone, status, code_hash, code_enc, attempts_remaining, started_at, expires_at)
                   SELECT $2, account_id, key_id, phone, status, code_hash, code_enc, attempts_remaining, started_at, now() - make_interval(hours => $3)
                     FROM validations WHERE token = $1`, [never.token, token, hoursAgo]);
    sessions.push(token);
  }
  for (const token of sessions) assert.notEqual((await session(token)).code_enc, null, 'the test number is never sent: its copy stays');
  const db = createPool(svc.databaseUrl, 1);
  try {
    assert.equal(await new CodeCopyExpiry(db, createLogger('silent')).once(), 1);
  } finally {
    await db.end();
  }
  const [current, expiredHourAgo, expiredDayAgo] = await Promise.all(sessions.map(session));
  assert.notEqual(current!.code_enc, null, 'a live session keeps its copy');
  assert.notEqual(expiredHourAgo!.code_enc, null, 'within the grace a late dispatch may still read it');
  assert.equal(expiredDayAgo!.code_enc, null, 'erased');
});
