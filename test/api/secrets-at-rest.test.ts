/**
 * Secrets at rest (D12, migration 032): an account's verification secret, an API key's webhook
 * secret and the server's master secrets are stored sealed under CREDENTIALS_KEY, so a copy of the
 * database holds none of them; rows stored in clear before 032 are sealed by the next start and
 * keep working; another key is refused at start.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { startReceiver, startTestService, waitFor, type Receiver, type TestService } from '../support/harness.js';
import { generateWebhookSecret } from '../../shared/webhooks/sign.js';
import { SecretBox } from '../../shared/secrets/sealed.js';

const KEY = randomBytes(32).toString('hex');
let svc: TestService;
let rx: Receiver;
before(async () => {
  svc = await startTestService({ env: { CREDENTIALS_KEY: KEY } });
  rx = await startReceiver();
});
after(async () => {
  await rx.close();
  await svc.stop();
});

/** Every row of the tables that hold secrets, as Postgres prints it (what a dump holds), hex for bytes. */
async function dump(s: TestService): Promise<string> {
  const tables = ['accounts', 'api_keys', 'service_secrets', 'validations'];
  const rows = await Promise.all(tables.map((t) => s.sql<{ row: string }>(`SELECT t::text AS row FROM ${t} t`)));
  return rows.flat().map((r) => r.row).join('\n');
}

/** Starts a validation on `s`; returns its token, timestamp and the code the sandbox carried. */
async function startOne(s: TestService, apiKey: string, phoneNumber: string) {
  const started = await s.request('POST', '/v1/validations', { body: { phoneNumber }, headers: { 'x-api-key': apiKey } });
  assert.equal(started.status, 200, started.text);
  const code = await waitFor(async () => {
    const res = await s.request('GET', `/sandbox/messages?phone_number=${phoneNumber}&limit=1`, { headers: { 'x-api-key': apiKey } });
    return /(\d{6})/.exec(res.body?.messages?.[0]?.body ?? '')?.[1];
  }, 10_000, 'the code SMS');
  return { phoneNumber, token: started.body.token as string, code, timestamp: started.body.timestamp as string };
}

/** Verifies a started validation on `s`; returns what the proof covers, with the proof. */
async function verifyStarted(s: TestService, apiKey: string, p: Awaited<ReturnType<typeof startOne>>) {
  const verified = await s.request('POST', `/v1/validations/${p.token}/verify`, { body: { code: p.code }, headers: { 'x-api-key': apiKey } });
  assert.equal(verified.status, 200, verified.text);
  return { ...p, proof: verified.body.proof as string };
}

const verifyOnce = async (s: TestService, apiKey: string, phoneNumber: string) => verifyStarted(s, apiKey, await startOne(s, apiKey, phoneNumber));

const hmacProof = (secret: string, p: { phoneNumber: string; token: string; code: string; timestamp: string }) =>
  createHmac('sha256', secret).update(`${p.phoneNumber}|${p.token}|${p.code}|${p.timestamp}`, 'utf8').digest('hex');

test('verification and webhook secrets and the master secrets are nowhere in the database in clear, and work', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  const verificationSecret = 'a-verification-secret-0123456789';
  const webhookSecret = generateWebhookSecret();
  assert.equal((await svc.admin('PATCH', `/accounts/${accountId}`, { verification_secret: verificationSecret })).status, 200);
  const update = await svc.request('POST', '/v1/apikey/update', {
    body: { webhook_secret: webhookSecret, default_callback_url: `${rx.url}/signed` }, headers: { 'x-api-key': apiKey } });
  assert.equal(update.status, 200, update.text);
  assert.equal((await svc.admin('GET', `/accounts/${accountId}`)).body.verification_secret_set, true);

  const p = await verifyOnce(svc, apiKey, '420777301099');
  assert.equal(p.proof, hmacProof(verificationSecret, p));
  assert.deepEqual((await svc.request('POST', '/v1/verify-proof', { body: p })).body, { valid: true });
  await svc.request('POST', '/v2/message', { body: { body: 'signed', to: [{ phone_number: '420777301100' }] }, headers: { 'x-api-key': apiKey } });
  const [post] = await waitFor(() => rx.requests.filter((r) => r.path === '/signed').length > 0 && rx.requests.filter((r) => r.path === '/signed'), 10_000, 'a signed delivery');
  const headers = { 'webhook-id': String(post!.headers['webhook-id']), 'webhook-timestamp': String(post!.headers['webhook-timestamp']), 'webhook-signature': String(post!.headers['webhook-signature']) };
  assert.ok(Array.isArray(new Webhook(webhookSecret).verify(post!.body, headers)));

  const text = await dump(svc);
  for (const [name, secret] of [['verification secret', verificationSecret], ['webhook secret', webhookSecret], ['its key bytes', webhookSecret.slice(6)]] as const) {
    assert.ok(!text.includes(secret), `the ${name} is in the database in clear`);
    assert.ok(!text.includes(Buffer.from(secret).toString('hex')), `the ${name} is in the database as bytes`);
  }
  const masters = await svc.sql<{ name: string; sealed: boolean }>(`SELECT name, sealed FROM service_secrets WHERE name <> 'credentials-key-check'`);
  assert.ok(masters.some((m) => m.name === 'verification'));
  assert.deepEqual(masters.filter((m) => !m.sealed), [], 'every master secret sealed');
  // Cleared again: no sealed bytes left behind.
  assert.equal((await svc.admin('PATCH', `/accounts/${accountId}`, { verification_secret: null })).body.verification_secret_set, false);
  assert.deepEqual(await svc.sql('SELECT verification_secret, verification_secret_sealed FROM accounts WHERE id = $1', [accountId]),
    [{ verification_secret: null, verification_secret_sealed: null }]);
});

test('secrets stored in clear before migration 032 are sealed by the next start and keep working; another key is refused', async () => {
  const { accountId, apiKey } = await svc.createAccount();
  const [key] = await svc.sql<{ id: number }>('SELECT id FROM api_keys WHERE account_id = $1', [accountId]);
  // A session started before the upgrade: verified after it, so the master must be the same one.
  const before = await startOne(svc, apiKey, '420777301299');
  // As a database migrated from 031 holds them: the secrets in clear, the master as its bytes.
  const legacySecret = 'a-legacy-verification-secret-42';
  const legacyWebhookSecret = generateWebhookSecret();
  const [sealedMaster] = await svc.sql<{ secret: Buffer }>(`SELECT secret FROM service_secrets WHERE name = 'verification'`);
  const master = Buffer.from(new SecretBox(Buffer.from(KEY, 'hex')).open(sealedMaster!.secret, 'service_secrets:verification').secret!, 'base64');
  assert.equal(master.length, 32);
  await svc.sql('UPDATE accounts SET verification_secret = $2, verification_secret_sealed = NULL WHERE id = $1', [accountId, legacySecret]);
  await svc.sql('UPDATE api_keys SET webhook_secret = $2, webhook_secret_sealed = NULL, default_callback_url = $3 WHERE id = $1',
    [key!.id, legacyWebhookSecret, `${rx.url}/legacy`]);
  await svc.sql(`UPDATE service_secrets SET secret = $1, sealed = false WHERE name = 'verification'`, [master]);

  const next = await startTestService({ env: { CREDENTIALS_KEY: KEY }, database: { url: svc.databaseUrl, drop: async () => undefined } });
  try {
    assert.deepEqual(await next.sql('SELECT verification_secret, verification_secret_sealed IS NOT NULL AS sealed FROM accounts WHERE id = $1', [accountId]),
      [{ verification_secret: null, sealed: true }]);
    assert.deepEqual(await next.sql('SELECT webhook_secret, webhook_secret_sealed IS NOT NULL AS sealed FROM api_keys WHERE id = $1', [key!.id]),
      [{ webhook_secret: null, sealed: true }]);
    const [stored] = await next.sql<{ secret: Buffer; sealed: boolean }>(`SELECT secret, sealed FROM service_secrets WHERE name = 'verification'`);
    assert.equal(stored!.sealed, true);
    assert.ok(!stored!.secret.includes(master), 'the master is no longer stored as its bytes');
    const text = await dump(next);
    assert.ok(!text.includes(legacySecret) && !text.includes(legacyWebhookSecret.slice(6)));

    // The session of before verifies on the new start (the same master), with a proof of the sealed legacy secret.
    const p = await verifyStarted(next, apiKey, before);
    assert.equal(p.proof, hmacProof(legacySecret, p));
    // The sealed legacy webhook secret still signs.
    await next.request('POST', '/v2/message', { body: { body: 'legacy signed', to: [{ phone_number: '420777301300' }] }, headers: { 'x-api-key': apiKey } });
    const [post] = await waitFor(() => rx.requests.filter((r) => r.path === '/legacy').length > 0 && rx.requests.filter((r) => r.path === '/legacy'), 10_000, 'a delivery');
    const headers = { 'webhook-id': String(post!.headers['webhook-id']), 'webhook-timestamp': String(post!.headers['webhook-timestamp']), 'webhook-signature': String(post!.headers['webhook-signature']) };
    assert.ok(Array.isArray(new Webhook(legacyWebhookSecret).verify(post!.body, headers)));
  } finally {
    await next.stop();
  }

  await assert.rejects(
    startTestService({ env: { CREDENTIALS_KEY: randomBytes(32).toString('hex') }, database: { url: svc.databaseUrl, drop: async () => undefined } }),
    /CREDENTIALS_KEY is not the key the stored secrets were sealed with/);
});
