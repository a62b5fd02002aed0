/**
 * The connector seam's admin contract (D12) with the SMPP kind over real TCP to the SMSC simulator:
 * connections stored with their secrets sealed (never in clear in Postgres, never in an answer),
 * the older SMPP body, live states, senders as their own resource, the generic callback route, and
 * the credentials key checked at start.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { SmscSimulator } from '../../scripts/smsc-simulator.js';
import { SecretBox } from '../../shared/secrets/sealed.js';
import { checkCredentialsKey } from '../../shared/secrets/key-check.js';
import { sealLegacyConnections } from '../../shared/carriers/store.js';
import { PROVIDERS } from '../../shared/carriers/providers.js';
import { startTestService, waitFor, type TestService } from '../support/harness.js';

const T = { timeout: 30_000 };
let sim: SmscSimulator;
let svc: TestService;
let port: number;
let accountId: number;
let apiKey: string;

before(async () => {
  sim = new SmscSimulator({ systemId: 'sb', password: 'pa55word', receiptDelayMs: 20 });
  ({ port } = await sim.start());
  svc = await startTestService();
  ({ accountId, apiKey } = await svc.createAccount());
  await svc.admin('PUT', '/prices', [{ channel: 'sms', prefix: '', price_czk: 1, price_eur: 0.04 }]);
});

after(async () => {
  await svc?.stop();
  await sim?.stop();
});

describe('carrier connections (D12)', () => {
  it('stores a connection of a kind with its password sealed, shows it masked with its live state, and routes to it', T, async () => {
    const url = `smpp://sb:pa55word@127.0.0.1:${port}?window=10`;
    const created = await svc.admin('POST', '/carriers', { name: 'main', kind: 'smpp', config: { url }, routes: ['420'] });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.kind, 'smpp');
    assert.equal(created.body.config.url, `smpp://sb:***@127.0.0.1:${port}?window=10`);
    assert.ok(!created.text.includes('pa55word'));
    const [row] = await svc.sql<{ url: string | null; config: { url: string }; secrets: Buffer }>(
      `SELECT url, config, secrets FROM carrier_connections WHERE name = 'main'`);
    assert.equal(row!.url, null);
    assert.ok(!row!.config.url.includes('pa55word'));
    assert.ok(row!.secrets.length > 0 && !row!.secrets.includes(Buffer.from('pa55word')), 'the password is sealed');

    await waitFor(() => sim.boundSessions === 1, 10_000, 'bound with the opened password');
    const list = await waitFor(async () => {
      const res = await svc.admin('GET', '/carriers');
      return res.body.carriers.find((c: { name: string; state: string }) => c.name === 'main' && c.state === 'bound') ? res : null;
    }, 10_000, 'state bound');
    assert.ok(!list.text.includes('pa55word'));

    const sent = await svc.request('POST', '/v2/message', {
      headers: { 'x-api-key': apiKey }, body: { body: 'Hi', to: [{ phone_number: '420777123488' }] },
    });
    assert.equal(sent.status, 200, sent.text);
    const id = sent.body.accepted[0].message_id as string;
    const [attempt] = await waitFor(() => svc.sql<{ carrier: string; state: string }>(
      `SELECT a.carrier, a.state FROM attempts a JOIN recipients r ON r.id = a.recipient_id WHERE r.public_id = $1 AND a.state = 'delivered'`, [id]).then((r) => r.length ? r : null),
    10_000, 'delivered');
    assert.equal(attempt!.carrier, 'smpp.main');
    assert.equal(sim.submitted.filter((s) => s.destination_addr === '420777123488').length, 1);
  });

  it('takes the older SMPP body, stores no routes as every destination, and names bad fields', T, async () => {
    const legacy = await svc.admin('POST', '/carriers', { name: 'spare', url: `smpp://sb:other@127.0.0.1:1?window=1`, enabled: false });
    assert.equal(legacy.status, 201, legacy.text);
    assert.deepEqual(legacy.body.routes, ['']);
    assert.equal(legacy.body.url, 'smpp://sb:***@127.0.0.1:1?window=1');
    assert.equal(legacy.body.state, 'disabled');
    const unknownKind = await svc.admin('POST', '/carriers', { name: 'x', kind: 'fax', config: {} });
    assert.equal(unknownKind.status, 400);
    assert.match(unknownKind.body.message, /^kind: /);
    const badUrl = await svc.admin('POST', '/carriers', { name: 'x', kind: 'smpp', config: { url: 'smpp://u:hunter2@host:99999' } });
    assert.equal(badUrl.status, 400);
    assert.match(badUrl.body.message, /^config\.url: /);
    assert.ok(!badUrl.text.includes('hunter2'));
    const extra = await svc.admin('POST', '/carriers', { name: 'x', kind: 'smpp', config: { url: 'smpp://a:b@h:1', colour: 'red' } });
    assert.equal(extra.status, 400);
    assert.match(extra.body.message, /^config\.colour: /);
    // `default` is SMPP_URL's, also while it is unset (set later, it would hide a stored one that could not be deleted).
    const reserved = await svc.admin('POST', '/carriers', { name: 'default', kind: 'smpp', config: { url: 'smpp://a:b@h:1' }, routes: ['44'] });
    assert.equal(reserved.status, 400, reserved.text);
    assert.match(reserved.body.message, /^name: "default" is reserved/);
    // The mask an answer shows, posted back, is not taken for the secret.
    for (const [body, field] of [
      [{ name: 'm1', kind: 'smpp', config: { url: 'smpp://sb:***@127.0.0.1:1?window=1' }, routes: ['49'] }, 'config.url'],
      [{ name: 'm2', url: 'smpp://sb:***@127.0.0.1:1?window=1', routes: ['49'] }, 'url'],
      [{ name: 'm3', kind: 'whatsapp', config: { app_secret: '***', verify_token: 'v' } }, 'config.app_secret'],
    ] as const) {
      const masked = await svc.admin('POST', '/carriers', body);
      assert.equal(masked.status, 400, masked.text);
      assert.ok(masked.body.message.startsWith(`${field}: holds the mask shown for a stored secret`), masked.text);
    }
    const conflict = await svc.admin('POST', '/carriers', { name: 'spare2', kind: 'smpp', config: { url: 'smpp://a:b@h:1' } });
    assert.equal(conflict.status, 409, 'a second connection for every destination conflicts with "spare"');
    assert.equal((await svc.admin('DELETE', '/carriers/spare')).status, 200);
  });

  it('keeps senders as their own resource, refusing families no connector routes by sender and unknown connections', T, async () => {
    const sms = await svc.admin('POST', '/senders', { account_id: accountId, family: 'sms', sender: 'Shop', connection: 'main' });
    assert.equal(sms.status, 400);
    assert.match(sms.body.message, /^family: /);
    const bad = await svc.admin('POST', '/senders', { account_id: accountId, family: 'fax', sender: 'Shop', connection: 'main' });
    assert.equal(bad.status, 400);
    assert.deepEqual((await svc.admin('GET', `/senders?account_id=${accountId}`)).body, { senders: [] });
    assert.equal((await svc.admin('DELETE', '/senders/999')).status, 404);
  });

  it('answers carrier callbacks only for kinds that take them and connections that exist', T, async () => {
    assert.equal((await svc.request('POST', '/callbacks/smpp/main', { raw: '{}' })).status, 404, 'SMPP has no HTTP callbacks');
    assert.equal((await svc.request('GET', '/callbacks/nope/main')).status, 404);
    assert.equal((await svc.request('PUT', '/callbacks/smpp/main')).status, 405);
  });
});

describe('credentials at rest', () => {
  it('seals what older versions stored in clear, once', T, async () => {
    const box = new SecretBox(svc.config.credentialsKey);
    const db = new pg.Pool({ connectionString: svc.databaseUrl, max: 1 });
    try {
      await db.query(`INSERT INTO carrier_connections (name, kind, url) VALUES ('old', 'smpp', 'smpp://sys:in-clear@127.0.0.1:2')`);
      assert.equal(await sealLegacyConnections(db as never, box, PROVIDERS), 1);
      assert.equal(await sealLegacyConnections(db as never, box, PROVIDERS), 0);
      const { rows } = await db.query<{ url: string | null; config: { url: string }; secrets: Buffer }>(`SELECT url, config, secrets FROM carrier_connections WHERE name = 'old'`);
      assert.equal(rows[0]!.url, null);
      assert.equal(rows[0]!.config.url, 'smpp://sys@127.0.0.1:2');
      assert.deepEqual(box.open(rows[0]!.secrets, 'carrier-connection:old'), { password: 'in-clear' });
      const listed = await svc.admin('GET', '/carriers');
      assert.equal(listed.body.carriers.find((c: { name: string }) => c.name === 'old').url, 'smpp://sys:***@127.0.0.1:2');
      await db.query(`DELETE FROM carrier_connections WHERE name = 'old'`);
    } finally {
      await db.end();
    }
  });

  it('refuses to start with another CREDENTIALS_KEY while sealed credentials exist', T, async () => {
    const db = new pg.Pool({ connectionString: svc.databaseUrl, max: 1 });
    try {
      assert.equal(await checkCredentialsKey(db, new SecretBox(svc.config.credentialsKey)), null);
      const problem = await checkCredentialsKey(db, new SecretBox(Buffer.alloc(32, 9)));
      assert.match(problem ?? '', /^CREDENTIALS_KEY is not the key/);
    } finally {
      await db.end();
    }
  });
});
