/**
 * Starting and stopping as an operator would: a taken port stops the process with a message naming
 * it (in-process and through the entry), production `web`/`worker` processes wait for the schema
 * the release step (`switchboard migrate`) applies instead of migrating themselves, and the entry's
 * `--help` answers without a database.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { loadConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { startRuntime, StartupError } from '../../services/runtime.js';
import { ensureDatabase } from '../../shared/db/pool.js';
import { createTestDatabase, deleteRedisPrefix, uniqueName, REDIS_URL, PG_BASE } from '../support/harness.js';

const dbs: Array<{ drop(): Promise<void> }> = [];
const prefixes: string[] = [];
after(async () => {
  for (const db of dbs) await db.drop();
  for (const prefix of prefixes) await deleteRedisPrefix(prefix);
});

async function takenPort(): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return { port, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

async function freshDatabase(): Promise<string> {
  const db = await createTestDatabase();
  dbs.push(db);
  return db.url;
}

function env(databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  const prefix = uniqueName('sbt');
  prefixes.push(prefix);
  return { NODE_ENV: 'test', DATABASE_URL: databaseUrl, REDIS_URL, REDIS_PREFIX: prefix, LOG_LEVEL: 'silent', ...extra };
}

test('processes starting together on a missing database all find it created (none fails on the race)', async () => {
  // Every role of a fresh deployment starts at once and each creates the database when missing:
  // simultaneous CREATE DATABASEs fail with 23505 on pg_database's name index, not only 42P04.
  const name = uniqueName('sb_test');
  const url = new URL(PG_BASE);
  url.pathname = `/${name}`;
  dbs.push({
    drop: async () => {
      const c = new pg.Client({ connectionString: PG_BASE });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  });
  const results = await Promise.allSettled(Array.from({ length: 8 }, () => ensureDatabase(url.toString())));
  const failed = results.flatMap((r) => (r.status === 'rejected' ? [`${(r.reason as { code?: string }).code}: ${(r.reason as Error).message}`] : []));
  assert.deepEqual(failed, []);
  const c = new pg.Client({ connectionString: url.toString() });
  await c.connect();
  await c.end();
});

test('a taken port is a StartupError naming the port, and nothing is left running', async () => {
  const taken = await takenPort();
  const url = await freshDatabase();
  const config = loadConfig(env(url, { PORT: String(taken.port) }));
  await assert.rejects(startRuntime({ role: 'all', config, logger: createLogger('silent') }), (err: unknown) =>
    err instanceof StartupError && err.message.includes(`port ${taken.port} is already in use`) && /^PORT: /.test(err.message));
  // The workers it had started are closed again: their Postgres connections are gone.
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const { rows } = await client.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
  await client.end();
  assert.equal(rows[0]!.n, 0);
  await taken.close();
});

test('through the entry, a taken port exits 1 at once with the port in the message', async () => {
  const taken = await takenPort();
  const url = await freshDatabase();
  const result = spawnSync(process.execPath, ['--import', 'tsx', 'bin/switchboard.ts', 'web'], {
    env: { ...process.env, ...env(url, { PORT: String(taken.port) }) }, encoding: 'utf8', timeout: 60_000,
  });
  await taken.close();
  assert.equal(result.status, 1, result.stderr);
  assert.match(result.stderr, new RegExp(`PORT: port ${taken.port} is already in use`));
  assert.doesNotMatch(result.stderr, /\n\s+at /, 'a message, not a stack trace');
});

test('a production web process waits for the release step instead of migrating, then starts', async () => {
  const url = await freshDatabase();
  const production = { NODE_ENV: 'production', CREDENTIALS_KEY: randomBytes(32).toString('hex'), PORT: '0' };
  // Without the release step it gives up after SCHEMA_WAIT_SECONDS, saying what to run.
  const config = loadConfig(env(url, { ...production, SCHEMA_WAIT_SECONDS: '1' }));
  await assert.rejects(startRuntime({ role: 'web', config, logger: createLogger('silent') }), (err: unknown) =>
    err instanceof StartupError && /lacks migrations 001_init\.sql … /.test(err.message) && /switchboard migrate/.test(err.message));

  // Started before the release step, it waits, logging what it waits for, and starts once migrations are in.
  const child = spawn(process.execPath, ['--import', 'tsx', 'bin/switchboard.ts', 'web'], {
    env: { ...process.env, ...env(url, { ...production, LOG_LEVEL: 'info' }) }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d: Buffer) => {
    output += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    output += d.toString();
  });
  const until = async (re: RegExp, what: string) => {
    const deadline = Date.now() + 60_000;
    while (!re.test(output)) {
      if (Date.now() > deadline || child.exitCode !== null) assert.fail(`${what} not seen:\n${output}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  try {
    await until(/waiting for migrations 001_init\.sql/, 'the waiting message');
    const release = spawnSync(process.execPath, ['--import', 'tsx', 'bin/switchboard.ts', 'migrate'], {
      env: { ...process.env, ...env(url, production) }, encoding: 'utf8', timeout: 60_000,
    });
    assert.equal(release.status, 0, release.stderr);
    const applied = JSON.parse(release.stdout) as { applied: string[] };
    assert.equal(applied.applied[0], '001_init.sql', 'stdout is the JSON alone');
    assert.match(release.stderr, /switchboard migrate: database postgres:\/\//);
    await until(/HTTP listening/, 'the start once the schema is there');
    const again = spawnSync(process.execPath, ['--import', 'tsx', 'bin/switchboard.ts', 'migrate'], {
      env: { ...process.env, ...env(url, production) }, encoding: 'utf8', timeout: 60_000,
    });
    assert.deepEqual(JSON.parse(again.stdout), { applied: [] }, 'a second release step applies nothing');
  } finally {
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    assert.equal(await exited, 0, `SIGTERM drains and exits 0:\n${output.slice(-2000)}`);
  }
});

test('switchboard --help and <command> --help print usage without a database; unknown flags are refused by name', () => {
  const noDb = { ...process.env, DATABASE_URL: 'postgres://127.0.0.1:1/nowhere', REDIS_URL: 'redis://127.0.0.1:1' };
  const run = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'bin/switchboard.ts', ...args], { env: noDb, encoding: 'utf8', timeout: 30_000 });
  const help = run('--help');
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /^usage: switchboard <command>/);
  assert.match(help.stdout, /migrate/);
  assert.match(help.stdout, /accounts:create/);
  for (const command of ['start', 'web', 'worker', 'all', 'migrate', 'accounts:create', 'prices:set']) {
    const one = run(command, '--help');
    assert.equal(one.status, 0, `${command}: ${one.stderr}`);
    assert.match(one.stdout, new RegExp(`^usage: switchboard ${command}`));
    assert.equal(one.stderr, '');
  }
  const bad = run('worker', '--pool=sms');
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /Unknown option '--pool'/);
  const badPools = run('worker', '--pools=sms,fax');
  assert.equal(badPools.status, 2);
  assert.match(badPools.stderr, /unknown pools: fax/);
  const unknown = run('serve');
  assert.equal(unknown.status, 2);
  assert.match(unknown.stderr, /unknown command "serve"/);
});

test('npm run smsc -- --help prints usage, an unknown option is named', () => {
  const help = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/smsc.ts', '--help'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /^usage: npm run smsc/);
  const bad = spawnSync(process.execPath, ['--import', 'tsx', 'scripts/smsc.ts', '--prot', '1'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /Unknown option '--prot'/);
  assert.doesNotMatch(bad.stderr, /\n\s+at /);
});
