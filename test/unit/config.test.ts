import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { userInfo } from 'node:os';
import { loadConfig, ConfigError, eventRetentionDaysOf, metricsPortCollision } from '../../shared/config.js';

test('defaults for development', () => {
  const c = loadConfig({});
  assert.equal(c.port, 8080);
  assert.equal(c.databaseUrl, `postgres://${encodeURIComponent(userInfo().username)}@127.0.0.1:5432/switchboard`, 'the OS user, as psql would');
  assert.equal(loadConfig({ DATABASE_URL: 'postgres://app:pw@db:5432/x' }).databaseUrl, 'postgres://app:pw@db:5432/x');
  assert.equal(c.redisUrl, 'redis://127.0.0.1:6379');
  assert.equal(c.publicUrl, 'http://localhost:8080');
  assert.equal(c.sandbox, true);
  assert.equal(c.allowPrivateCallbacks, true);
  assert.equal(c.adminToken, null);
  assert.equal(c.webhookRetryScheduleMs.length, 9);
});

const KEY = 'ab'.repeat(32);

test('production turns the sandbox and private callbacks off unless set', () => {
  const c = loadConfig({ NODE_ENV: 'production', CREDENTIALS_KEY: KEY });
  assert.equal(c.sandbox, false);
  assert.equal(c.allowPrivateCallbacks, false);
  const on = loadConfig({ NODE_ENV: 'production', CREDENTIALS_KEY: KEY, SANDBOX: 'true', ALLOW_PRIVATE_CALLBACKS: '1' });
  assert.equal(on.sandbox, true);
  assert.equal(on.allowPrivateCallbacks, true);
});

test('CREDENTIALS_KEY: 32 bytes in hex or base64, required in production, a development default otherwise', () => {
  assert.deepEqual(loadConfig({ CREDENTIALS_KEY: KEY }).credentialsKey, Buffer.alloc(32, 0xab));
  assert.deepEqual(loadConfig({ CREDENTIALS_KEY: Buffer.alloc(32, 7).toString('base64') }).credentialsKey, Buffer.alloc(32, 7));
  const dev = loadConfig({});
  assert.equal(dev.credentialsKeyIsDevelopmentDefault, true);
  assert.equal(dev.credentialsKey.length, 32);
  for (const bad of ['abc', 'ab'.repeat(31), Buffer.alloc(16).toString('base64')]) {
    assert.throws(() => loadConfig({ CREDENTIALS_KEY: bad }), (err: unknown) => err instanceof ConfigError && /CREDENTIALS_KEY: must be 32 bytes/.test(err.message));
  }
  assert.throws(() => loadConfig({ NODE_ENV: 'production' }), (err: unknown) => err instanceof ConfigError && /CREDENTIALS_KEY: is required in production/.test(err.message));
});

test('every bad variable is named', () => {
  try {
    loadConfig({ PORT: 'eighty', DATABASE_URL: 'mysql://x', SANDBOX: 'maybe', ADMIN_TOKEN: 'short', WEBHOOK_RETRY_SCHEDULE_MS: '1,x' });
    assert.fail('expected a ConfigError');
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    const names = err.problems.map((p) => p.split(':')[0]);
    assert.deepEqual(names.sort(), ['ADMIN_TOKEN', 'DATABASE_URL', 'PORT', 'SANDBOX', 'WEBHOOK_RETRY_SCHEDULE_MS']);
    assert.match(err.message, /PORT: must be a number/);
  }
  // A delay past what a Node timer holds ran after 1 ms: the sweep spun ~100 times a second.
  assert.throws(() => loadConfig({ RECOVERY_SWEEP_MS: '3000000000' }), (err: unknown) => err instanceof ConfigError && /RECOVERY_SWEEP_MS: must be less than or equal to 86400000/.test(err.message));
  assert.throws(() => loadConfig({ SANDBOX_SLOW_DELIVERY_MS: '3000000000' }), (err: unknown) => err instanceof ConfigError && /SANDBOX_SLOW_DELIVERY_MS: /.test(err.message));
});

test('EVENT_RETENTION_DAYS: 0 (keep forever) by default, else days up to 3650, fractions as RECEIPT_WAIT_HOURS takes them', () => {
  assert.equal(loadConfig({}).eventRetentionDays, 0);
  assert.equal(loadConfig({ EVENT_RETENTION_DAYS: '30' }).eventRetentionDays, 30);
  assert.equal(loadConfig({ EVENT_RETENTION_DAYS: '0.5' }).eventRetentionDays, 0.5);
  assert.equal(loadConfig({ EVENT_RETENTION_DAYS: '3650' }).eventRetentionDays, 3650);
  for (const [bad, message] of [['-1', /must be greater than or equal to 0/], ['3651', /must be less than or equal to 3650/], ['a month', /must be a number/]] as const) {
    assert.throws(() => loadConfig({ EVENT_RETENTION_DAYS: bad }), (err: unknown) => err instanceof ConfigError && new RegExp(`EVENT_RETENTION_DAYS: ${message.source}`).test(err.message), bad);
  }
});

test('MESSAGE_RETENTION_DAYS: 0 (keep forever) by default, else at least 7 days and at least EVENT_RETENTION_DAYS; events follow it unless set', () => {
  const none = loadConfig({});
  assert.equal(none.messageRetentionDays, 0);
  assert.equal(eventRetentionDaysOf(none), 0, 'an upgrade deletes nothing');
  for (const [value, days] of [['0', 0], ['7', 7], ['30', 30], ['7.5', 7.5], ['3650', 3650]] as const) {
    assert.equal(loadConfig({ MESSAGE_RETENTION_DAYS: value }).messageRetentionDays, days, value);
  }
  // Events are kept no longer than messages: EVENT_RETENTION_DAYS when set, else the message retention.
  assert.equal(eventRetentionDaysOf(loadConfig({ MESSAGE_RETENTION_DAYS: '90' })), 90);
  assert.equal(eventRetentionDaysOf(loadConfig({ MESSAGE_RETENTION_DAYS: '90', EVENT_RETENTION_DAYS: '30' })), 30);
  assert.equal(eventRetentionDaysOf(loadConfig({ MESSAGE_RETENTION_DAYS: '30', EVENT_RETENTION_DAYS: '30' })), 30);
  assert.equal(eventRetentionDaysOf(loadConfig({ EVENT_RETENTION_DAYS: '30' })), 30);
  const refused: Array<[Record<string, string>, RegExp]> = [
    [{ MESSAGE_RETENTION_DAYS: '-1' }, /must be greater than or equal to 0/],
    [{ MESSAGE_RETENTION_DAYS: '3651' }, /must be less than or equal to 3650/],
    [{ MESSAGE_RETENTION_DAYS: 'a month' }, /must be a number/],
    [{ MESSAGE_RETENTION_DAYS: '6.9' }, /must be 0 \(keep forever\) or at least 7 \(days\): replies are matched/],
    [{ MESSAGE_RETENTION_DAYS: '0.5' }, /must be 0 \(keep forever\) or at least 7/],
    [{ MESSAGE_RETENTION_DAYS: '30', EVENT_RETENTION_DAYS: '60' }, /must be at least EVENT_RETENTION_DAYS \(60\) when both are set/],
  ];
  for (const [env, message] of refused) {
    assert.throws(() => loadConfig(env), (err: unknown) => err instanceof ConfigError && new RegExp(`MESSAGE_RETENTION_DAYS: ${message.source}`).test(err.message)
      && err.problems.length === 1, JSON.stringify(env));
  }
});

const run = (env: Record<string, string>, command = 'all') => spawnSync(process.execPath, ['--import', 'tsx', 'bin/switchboard.ts', command], {
  env: { ...process.env, LOG_LEVEL: 'silent', ...env }, encoding: 'utf8', timeout: 30_000,
});

test('a DATABASE_URL or REDIS_URL its driver cannot read is refused by name, its password never shown', () => {
  // Joi's uri() took a port beyond 65535 (and REDIS_URL's any path): the start then failed with
  // "TypeError: Invalid URL" or an uncaught "ERR value is not an integer" from SELECT NaN.
  const problems = (env: Record<string, string>) => {
    try {
      loadConfig(env);
    } catch (err) {
      assert.ok(err instanceof ConfigError, String(err));
      return err.problems;
    }
    return [];
  };
  for (const [name, value] of [['DATABASE_URL', 'postgres://u:hunter2@127.0.0.1:99999/db'], ['REDIS_URL', 'redis://:hunter2@127.0.0.1:99999'],
    ['PUBLIC_URL', 'http://u:hunter2@example.com:65536/'], ['WHATSAPP_GRAPH_URL', 'https://u:hunter2@graph.example:70000']] as const) {
    const found = problems({ [name]: value });
    assert.equal(found.length, 1, found.join('\n'));
    assert.match(found[0]!, new RegExp(`^${name}: is not a URL that can be read \\(a port of 0 to 65535`));
    assert.doesNotMatch(found[0]!, /hunter2/);
  }
  assert.deepEqual(problems({ REDIS_URL: 'redis://127.0.0.1:6379/cache' }), ['REDIS_URL: must name a database by its number as its path (redis://host:6379/0), or none']);
  assert.deepEqual(problems({ REDIS_URL: 'notaurl' }), ['REDIS_URL: must be a valid uri with a scheme matching the redis|rediss pattern']);
  for (const ok of ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379/', 'redis://:pw@127.0.0.1:6379/3']) assert.deepEqual(problems({ REDIS_URL: ok }), [], ok);
  // Through the entry: exit 1 with the variable's name, no stack.
  const result = run({ REDIS_URL: 'redis://127.0.0.1:6379/cache' });
  assert.equal(result.status, 1);
  assert.match(result.stderr, /REDIS_URL: must name a database by its number/);
  assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack');
});

test('a bad variable stops the process at start with its name', () => {
  const result = run({ PORT: '-1' });
  assert.equal(result.status, 1);
  assert.match(result.stderr, /PORT: must be greater than or equal to 0/);
});

test('unreachable Postgres or Redis is said plainly, with how to start it, and does not hang', () => {
  const pg = run({ DATABASE_URL: 'postgres://127.0.0.1:1/switchboard' });
  assert.equal(pg.status, 1);
  assert.match(pg.stderr, /Cannot reach PostgreSQL at postgres:\/\/\S*127\.0\.0\.1:1\/switchboard/);
  assert.match(pg.stderr, /pg_ctlcluster/);
  // The release step too (it printed a stack).
  const release = run({ DATABASE_URL: 'postgres://127.0.0.1:1/switchboard' }, 'migrate');
  assert.equal(release.status, 1);
  assert.match(release.stderr, /Cannot reach PostgreSQL at postgres:\/\/\S*127\.0\.0\.1:1\/switchboard/);
  assert.doesNotMatch(release.stderr, /\n\s+at /, 'no stack');
  const redis = run({ DATABASE_URL: 'postgres://root@127.0.0.1:5432/switchboard_cfgtest', REDIS_URL: 'redis://127.0.0.1:1' });
  assert.equal(redis.status, 1);
  assert.match(redis.stderr, /Cannot reach Redis at redis:\/\/127\.0\.0\.1:1/);
  assert.doesNotMatch(redis.stderr, /\.\.\n/, 'one period after the reason (it read "Connection is closed..")');
  assert.doesNotMatch(pg.stderr, /\.\.\n/);
  spawnSync('psql', ['-h', '127.0.0.1', '-U', 'root', '-d', 'postgres', '-c', 'DROP DATABASE IF EXISTS switchboard_cfgtest'], { encoding: 'utf8' });
});

test('a REDIS_URL database the server does not have stops the start naming REDIS_URL (ioredis went on in database 0)', () => {
  const result = run({ DATABASE_URL: 'postgres://root@127.0.0.1:5432/switchboard_cfgtest_db', REDIS_URL: 'redis://127.0.0.1:6379/99' });
  spawnSync('psql', ['-h', '127.0.0.1', '-U', 'root', '-d', 'postgres', '-c', 'DROP DATABASE IF EXISTS switchboard_cfgtest_db'], { encoding: 'utf8' });
  assert.equal(result.status, 1, result.stderr);
  assert.match(result.stderr, /REDIS_URL: Redis at redis:\/\/127\.0\.0\.1:6379\/99 cannot use database 99: ERR DB index is out of range\./);
  assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack');
});

test('production refuses a default or short ADMIN_TOKEN, naming it; unset or long and random is accepted', () => {
  const prod = (token?: string) => loadConfig({ NODE_ENV: 'production', CREDENTIALS_KEY: KEY, ...(token !== undefined && { ADMIN_TOKEN: token }) });
  for (const [token, why] of [
    ['change-me-to-a-long-random-token', /placeholder/],
    ['0123456789abcdef0123', /shorter than 32 characters/],
    ['a'.repeat(40), /too few distinct characters/],
  ] as const) {
    assert.throws(() => prod(token), (err: unknown) => err instanceof ConfigError && /^ADMIN_TOKEN: /.test(err.problems[0]!) && why.test(err.message), token);
  }
  assert.equal(prod().adminToken, null, 'unset: the admin API refuses every call');
  assert.equal(prod('3f9c1e0b7a6d5c4b3a29180f7e6d5c4b3a291807').adminToken, '3f9c1e0b7a6d5c4b3a29180f7e6d5c4b3a291807');
  // Development keeps its 16-character minimum and no placeholder rule (tests and demos use short tokens).
  assert.equal(loadConfig({ ADMIN_TOKEN: 'change-me-please-1234' }).adminToken, 'change-me-please-1234');
});

test('the sandbox in production only when SANDBOX=true is set there (and it is flagged for the start log)', () => {
  const off = loadConfig({ NODE_ENV: 'production', CREDENTIALS_KEY: KEY });
  assert.equal(off.sandbox, false);
  assert.equal(off.sandboxInProduction, false);
  const on = loadConfig({ NODE_ENV: 'production', CREDENTIALS_KEY: KEY, SANDBOX: 'true' });
  assert.equal(on.sandbox, true);
  assert.equal(on.sandboxInProduction, true);
  assert.equal(loadConfig({}).sandboxInProduction, false, 'development: on by default, nothing to flag');
});

test('who migrates at start: all, and every process outside production; MIGRATE_ON_START overrides', async () => {
  const { migratesOnStart } = await import('../../services/core.js');
  const prod = { NODE_ENV: 'production', CREDENTIALS_KEY: KEY };
  const table: Array<[Record<string, string>, 'all' | 'web' | 'worker', boolean]> = [
    [{}, 'all', true], [{}, 'web', true], [{}, 'worker', true],
    [prod, 'all', true], [prod, 'web', false], [prod, 'worker', false],
    [{ ...prod, MIGRATE_ON_START: 'true' }, 'web', true], [{ ...prod, MIGRATE_ON_START: '0' }, 'all', false],
    [{ MIGRATE_ON_START: 'false' }, 'worker', false],
  ];
  for (const [env, role, expected] of table) {
    assert.equal(migratesOnStart(loadConfig(env), role), expected, `${JSON.stringify(env)} ${role}`);
  }
});

test('REDIS_CLUSTER_NODES: seed nodes of a Redis Cluster as host:port or redis:// URLs; bad values named; not with REDIS_URL', () => {
  assert.equal(loadConfig({}).redisCluster, null, 'one Redis unless set');
  assert.equal(loadConfig({ REDIS_CLUSTER_NODES: '' }).redisCluster, null);
  assert.deepEqual(loadConfig({ REDIS_CLUSTER_NODES: '10.0.0.1:7000, 10.0.0.2:7001,[::1]:7002' }).redisCluster, {
    nodes: [{ host: '10.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7001 }, { host: '::1', port: 7002 }], tls: false,
  });
  assert.deepEqual(loadConfig({ REDIS_CLUSTER_NODES: 'rediss://app:p%40ss@a.example:6380,rediss://b.example' }).redisCluster, {
    nodes: [{ host: 'a.example', port: 6380 }, { host: 'b.example', port: 6379 }], username: 'app', password: 'p@ss', tls: true,
  });
  const bad: Array<[string, RegExp]> = [
    ['10.0.0.1', /names no port/],
    ['10.0.0.1:7000,,10.0.0.2:7000', /without empty entries/],
    ['http://10.0.0.1:7000', /scheme must be redis/],
    ['redis://10.0.0.1:7000/2', /no databases but 0/],
    ['redis://10.0.0.1:7000,rediss://10.0.0.2:7000', /same scheme/],
    ['redis://a:one@h1:1,redis://a:two@h2:2', /same ones/],
    ['host:notaport', /is not host:port/],
  ];
  for (const [value, problem] of bad) {
    assert.throws(() => loadConfig({ REDIS_CLUSTER_NODES: value }), (err: unknown) => err instanceof ConfigError && /REDIS_CLUSTER_NODES: /.test(err.message) && problem.test(err.message), value);
  }
  assert.throws(() => loadConfig({ REDIS_CLUSTER_NODES: 'redis://a:secret@h1:1,h2:2,redis://a:other@h3:3' }), (err: unknown) => err instanceof ConfigError && !err.message.includes('secret') && !err.message.includes('other'));
  assert.throws(() => loadConfig({ REDIS_CLUSTER_NODES: 'h1:7000', REDIS_URL: 'redis://h:6379' }), (err: unknown) => err instanceof ConfigError && /REDIS_URL: set REDIS_URL \(one Redis\) or REDIS_CLUSTER_NODES/.test(err.message));
});

test('ACCEPT_LARGE_CALL_CONCURRENCY_ALONE: 4 unless set, never below ACCEPT_LARGE_CALL_CONCURRENCY', () => {
  const c = loadConfig({});
  assert.equal(c.acceptLargeCallConcurrency, 2);
  assert.equal(c.acceptLargeCallConcurrencyAlone, 4);
  assert.equal(loadConfig({ ACCEPT_LARGE_CALL_CONCURRENCY: '6' }).acceptLargeCallConcurrencyAlone, 6, 'follows a larger narrow setting');
  assert.equal(loadConfig({ ACCEPT_LARGE_CALL_CONCURRENCY_ALONE: '2' }).acceptLargeCallConcurrencyAlone, 2, 'equal to the narrow turns: widening off');
  assert.throws(() => loadConfig({ ACCEPT_LARGE_CALL_CONCURRENCY: '3', ACCEPT_LARGE_CALL_CONCURRENCY_ALONE: '2' }),
    (err: unknown) => err instanceof ConfigError && /ACCEPT_LARGE_CALL_CONCURRENCY_ALONE: must be at least ACCEPT_LARGE_CALL_CONCURRENCY \(3\)/.test(err.message));
  assert.throws(() => loadConfig({ ACCEPT_LARGE_CALL_CONCURRENCY_ALONE: '0' }), (err: unknown) => err instanceof ConfigError && /ACCEPT_LARGE_CALL_CONCURRENCY_ALONE/.test(err.message));
});

test('BULK_WORKER_NICE: 10 unless set, 0 to 19', () => {
  assert.equal(loadConfig({}).bulkWorkerNice, 10);
  assert.equal(loadConfig({ BULK_WORKER_NICE: '0' }).bulkWorkerNice, 0);
  for (const bad of ['-1', '20', 'low']) {
    assert.throws(() => loadConfig({ BULK_WORKER_NICE: bad }), (err: unknown) => err instanceof ConfigError && /BULK_WORKER_NICE/.test(err.message), bad);
  }
});

test('METRICS_PORT equal to PORT (or, under switchboard start, PORT among its roles\' ports) is refused naming both, before anything listens', () => {
  const roles = ['web', 'worker_sms', 'worker_channels'];
  const at = (port: string, metrics?: string) => loadConfig({ PORT: port, ...(metrics !== undefined && { METRICS_PORT: metrics }) });
  assert.match(metricsPortCollision(at('9464', '9464'), ['all'])!, /^METRICS_PORT: 9464 is also PORT; /);
  assert.match(metricsPortCollision(at('9466', '9464'), roles)!, /^METRICS_PORT: .*\(9464 to 9466\), so worker_channels would take 9466, which is PORT; /);
  assert.equal(metricsPortCollision(at('9467', '9464'), roles), null, 'past the last role');
  assert.equal(metricsPortCollision(at('9463', '9464'), roles), null, 'below the first');
  assert.equal(metricsPortCollision(at('9465', '9464'), ['web']), null, 'one process takes METRICS_PORT alone');
  assert.equal(metricsPortCollision(at('0', '0'), roles), null, 'port 0: any free port, never the same');
  assert.equal(metricsPortCollision(at('0', '9464'), ['all']), null);
  assert.equal(metricsPortCollision(at('9464', '0'), ['all']), null);
  assert.equal(metricsPortCollision(at('9464'), ['all']), null, 'unset');
  // Through the command: the message names both variables and blames no other program. Postgres
  // is unreachable, so a start that went on would fail on it instead.
  const down = { DATABASE_URL: 'postgres://127.0.0.1:1/switchboard', MIGRATE_ON_START: 'false' };
  const all = run({ ...down, PORT: '47311', METRICS_PORT: '47311' });
  assert.equal(all.status, 1);
  assert.match(all.stderr, /METRICS_PORT: 47311 is also PORT; /);
  assert.doesNotMatch(all.stderr, /already in use|another program|Cannot reach/);
  const start = run({ ...down, PORT: '47313', METRICS_PORT: '47311' }, 'start');
  assert.equal(start.status, 1);
  assert.match(start.stderr, /METRICS_PORT: switchboard start gives each of its 6 roles METRICS_PORT \+ its place in the Procfile \(47311 to 47316\), so worker_channels would take 47313, which is PORT; /);
  assert.doesNotMatch(start.stderr, /already in use|another program|Cannot reach/);
  const worker = run({ ...down, PORT: '47311', METRICS_PORT: '47311' }, 'worker');
  assert.doesNotMatch(worker.stderr, /METRICS_PORT: 47311 is also PORT/, 'a worker does not listen on PORT');
});

test('under switchboard start, a METRICS_PORT whose roles\' ports run past 65535 is refused naming the range, before anything starts', () => {
  const roles = ['web', 'worker_sms', 'worker_channels'];
  const at = (port: string, metrics: string) => loadConfig({ PORT: port, METRICS_PORT: metrics });
  assert.equal(metricsPortCollision(at('8080', '65533'), roles), null, 'the last role takes 65535');
  assert.match(metricsPortCollision(at('8080', '65534'), roles)!,
    /^METRICS_PORT: switchboard start gives each of its 3 roles METRICS_PORT \+ its place in the Procfile \(65534 to 65536\), so worker_channels would take 65536, past the last port \(65535\); choose a METRICS_PORT of at most 65533$/);
  assert.match(metricsPortCollision(at('0', '65535'), roles)!, /\(65535 to 65537\), so worker_sms would take 65536, /, 'PORT 0 does not hide it');
  assert.equal(metricsPortCollision(at('8080', '65535'), ['all']), null, 'one process takes METRICS_PORT alone');
  assert.equal(metricsPortCollision(at('8080', '0'), roles), null, 'port 0: any free port');
  // Through the command: refused at once (Postgres is unreachable, so a start that went on would fail on it instead).
  const start = run({ DATABASE_URL: 'postgres://127.0.0.1:1/switchboard', MIGRATE_ON_START: 'false', PORT: '47313', METRICS_PORT: '65533' }, 'start');
  assert.equal(start.status, 1);
  assert.match(start.stderr, /METRICS_PORT: switchboard start gives each of its 6 roles METRICS_PORT \+ its place in the Procfile \(65533 to 65538\), so worker_priority would take 65536, past the last port \(65535\); choose a METRICS_PORT of at most 65530/);
  assert.doesNotMatch(start.stderr, /Cannot reach|could not start/);
});

test('DEFAULT_SENDER: what a step\'s sms.sender may be, else the start stops naming it', () => {
  assert.equal(loadConfig({}).defaultSender, 'Info');
  for (const good of ['Shop', 'My Shop 1', 'A&B_shop.cz', '420777000111', '123456789012345']) {
    assert.equal(loadConfig({ DEFAULT_SENDER: good }).defaultSender, good, good);
  }
  // The sending API refuses each of these as a sender (11 characters at most for a name, with a
  // letter; digits only, no +, for a number), so the default must not send with them either.
  for (const bad of ['ABCDEFGHIJKLM', '-----', '+420777000111', 'Shop!', '1234567890123456']) {
    assert.throws(() => loadConfig({ DEFAULT_SENDER: bad }),
      (err: unknown) => err instanceof ConfigError && /DEFAULT_SENDER: must be an alphanumeric name of at most 11 characters or a number of at most 15 digits without \+/.test(err.message), bad);
  }
});

test('a refused variable is named without repeating its value: SMPP_URL with another scheme does not print its password', () => {
  for (const bad of ['smtp://sys:S3cretPassw0rd@smsc.example:2775', 'http://sys:S3cretPassw0rd@smsc.example:2775']) {
    assert.throws(() => loadConfig({ SMPP_URL: bad }), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.match(err.message, /SMPP_URL: must start with smpp:\/\/, smpps:\/\/ or ssmpp:\/\//);
      assert.doesNotMatch(err.message, /S3cretPassw0rd/);
      return true;
    }, bad);
  }
  // Any pattern a variable must match: named, the value not quoted.
  assert.throws(() => loadConfig({ REDIS_PREFIX: 'S3cret value!' }), (err: unknown) =>
    err instanceof ConfigError && /REDIS_PREFIX: fails to match the required pattern/.test(err.message) && !/S3cret value/.test(err.message));
});
