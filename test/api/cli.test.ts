import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createTestDatabase, startTestService, type TestService } from '../support/harness.js';

let svc: TestService;
before(async () => {
  svc = await startTestService({ pools: [] });
});
after(async () => {
  await svc.stop();
});

function cliIn(databaseUrl: string, ...args: string[]) {
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/cli.ts', ...args], {
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' }, encoding: 'utf8', timeout: 30_000,
  });
  const json = (): any => (result.stdout ? JSON.parse(result.stdout) : null); // eslint-disable-line @typescript-eslint/no-explicit-any
  return { status: result.status, get out() { return json(); }, err: result.stderr, raw: result.stdout };
}
const cli = (...args: string[]) => cliIn(svc.databaseUrl, ...args);

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
  assert.equal(keys[0].scope, 'full', 'a key listing says what the key may use, as the REST list does');
  assert.ok(!('key_hash' in keys[0]));
});

test('bad input exits 2 with a message naming the field', () => {
  const bad = cli('accounts:create', '--currency', 'USD');
  assert.equal(bad.status, 2);
  assert.match(bad.err, /currency: must be one of/);
  const unknown = cli('nonsense');
  assert.equal(unknown.status, 2);
  assert.match(unknown.err, /unknown command/);
  // A fifth decimal is refused as the admin API refuses it (it was rounded to 0 and the command exited 0).
  const tiny = cli('credit:add', '1', '--czk', '0.00001');
  assert.equal(tiny.status, 2, tiny.err);
  assert.match(tiny.err, /czk: must have no more than 4 decimal places/);
  // An id past what a number holds exactly was rounded to another account's, or failed in Postgres (exit 1).
  for (const id of ['99999999999999999999', '9007199254740993', '0']) {
    const far = cli('accounts:get', id);
    assert.equal(far.status, 2, `${id}: ${far.err}`);
    assert.match(far.err, /account_id: give a numeric id \(1 to 9007199254740991\)/);
  }
});

test('stdout is the JSON alone; stderr says which database (password masked)', () => {
  const listed = cliIn(svc.databaseUrl.replace('postgres://root@', 'postgres://root:s3cret@'), 'prices:list');
  assert.equal(listed.status, 0, listed.err);
  assert.ok(Array.isArray(JSON.parse(listed.raw).prices), 'pipeable JSON');
  assert.match(listed.err, /prices:list: database postgres:\/\/root:\*\*\*@127\.0\.0\.1:5432\/sb_test_/);
  assert.doesNotMatch(listed.err, /s3cret/);
});

test('--help needs no database; unknown flags and extra arguments are refused by name', () => {
  const nowhere = 'postgres://127.0.0.1:1/nowhere';
  const help = cliIn(nowhere, 'credit:add', '--help');
  assert.equal(help.status, 0, help.err);
  assert.match(help.raw, /^usage: npm run cli -- credit:add <account_id> \[--czk N\] \[--eur N\]/);
  const all = cliIn(nowhere, '--help');
  assert.equal(all.status, 0);
  assert.match(all.raw, /accounts:create/);
  const flag = cliIn(nowhere, 'accounts:create', '--currency', 'CZK', '--credit', '5');
  assert.equal(flag.status, 2);
  assert.match(flag.err, /Unknown option '--credit'/);
  const extra = cliIn(nowhere, 'prices:list', 'now');
  assert.equal(extra.status, 2);
  assert.match(extra.err, /unexpected argument \\"now\\"/);
});

test('the CLI never migrates: a database without the schema is refused with the command that applies it', async () => {
  const empty = await createTestDatabase();
  try {
    const refused = cliIn(empty.url, 'prices:list');
    assert.equal(refused.status, 1);
    assert.match(refused.err, /SCHEMA_NOT_READY.*lacks migrations 001_init\.sql … .*switchboard migrate/);
    const tables = spawnSync('psql', [empty.url, '-Atc', "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"], { encoding: 'utf8' });
    assert.equal(tables.stdout.trim(), '0', 'nothing was created');
  } finally {
    await empty.drop();
  }
});

test('webhooks:dead lists dead-lettered batches and webhooks:replay makes them pending again, as the admin API does (D11)', async () => {
  const { accountId } = await svc.createAccount();
  const [key] = await svc.sql<{ id: number }>('SELECT id FROM api_keys WHERE account_id = $1 AND is_primary', [accountId]);
  const [dead] = await svc.sql<{ id: number }>(
    `INSERT INTO webhook_batches (webhook_id, account_id, key_id, url, event_ids, status, attempts, last_status, dead_at)
     VALUES ('msg_cli_dead', $1, $2, 'https://u:pw@hooks.example/x', '{1}', 'dead', 9, 500, now() - interval '1 hour') RETURNING id`, [accountId, key!.id]);
  const listed = cli('webhooks:dead', '--key-id', String(key!.id));
  assert.equal(listed.status, 0, listed.err);
  assert.deepEqual(listed.out.batches.map((b: { id: number }) => Number(b.id)), [Number(dead!.id)]);
  assert.ok(!listed.raw.includes(':pw@'), 'the URL without its credentials');
  const since = cli('webhooks:dead', '--since', new Date().toISOString());
  assert.equal(since.status, 0, since.err);
  assert.ok(!since.out.batches.some((b: { id: number }) => Number(b.id) === Number(dead!.id)), 'dead-lettered before --since');
  const bad = cli('webhooks:replay', '--key-id', String(key!.id));
  assert.equal(bad.status, 2);
  assert.match(bad.err, /give id, or key_id and since/);
  const replayed = cli('webhooks:replay', '--id', String(dead!.id));
  assert.equal(replayed.status, 0, replayed.err);
  assert.equal(replayed.out.replayed, 1);
  const [row] = await svc.sql<{ status: string; attempts: number }>('SELECT status, attempts FROM webhook_batches WHERE id = $1', [dead!.id]);
  assert.deepEqual(row, { status: 'pending', attempts: 0 });
  assert.equal(cli('webhooks:replay', '--id', String(dead!.id)).out.replayed, 0, 'no longer dead');
});
