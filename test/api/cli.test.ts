import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { startTestService, type TestService } from '../support/harness.js';

let svc: TestService;
before(async () => {
  svc = await startTestService({ pools: [] });
});
after(async () => {
  await svc.stop();
});

function cli(...args: string[]) {
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/cli.ts', ...args], {
    env: { ...process.env, DATABASE_URL: svc.databaseUrl, LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 30_000,
  });
  return { status: result.status, out: result.stdout ? (JSON.parse(result.stdout) as any) : null, err: result.stderr }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

test('accounts:create prints a key that works on the API', async () => {
  const created = cli('accounts:create', '--currency', 'CZK', '--credit-czk', '25', '--name', 'From CLI');
  assert.equal(created.status, 0, created.err);
  assert.match(created.out.api_key, /^sb_/);
  const res = await svc.request('POST', '/v2/messages', { body: [{ body: 'hi', to: [{ phone_number: '420777300000' }] }], headers: { 'x-api-key': created.out.api_key } });
  assert.equal(res.status, 200);
  const got = cli('accounts:get', String(created.out.account_id));
  assert.equal(got.out.credit_czk, 25);
  assert.equal(got.out.name, 'From CLI');
});

test('credit:add, accounts:set, prices:set, keys:list', () => {
  const { out: account } = cli('accounts:create', '--json', '{"currency":"EUR","credit_eur":1}');
  assert.deepEqual(cli('credit:add', String(account.account_id), '--eur', '2.5').out, { credit_czk: 0, credit_eur: 3.5 });
  assert.equal(cli('accounts:set', String(account.account_id), '--json', '{"verification_attempts":4}').out.verification_attempts, 4);
  assert.deepEqual(cli('prices:set', '--json', '[{"channel":"viber","prefix":"421","price_czk":0.7,"price_eur":0.03}]').out, { updated: 1 });
  const keys = cli('keys:list', '--account', String(account.account_id)).out.keys;
  assert.equal(keys.length, 1);
  assert.equal(keys[0].is_primary, true);
  assert.ok(!('key_hash' in keys[0]));
});

test('bad input exits 2 with a message naming the field', () => {
  const bad = cli('accounts:create', '--currency', 'USD');
  assert.equal(bad.status, 2);
  assert.match(bad.err, /currency: must be one of/);
  const unknown = cli('nonsense');
  assert.equal(unknown.status, 2);
  assert.match(unknown.err, /unknown command/);
});
