/**
 * `createPool({ indexOnly })`: a prepared statement whose generic plan was made while its table was
 * small keeps that plan after the table has grown (until the table is analysed again). On the
 * engine's connections that plan must still use the index; on default connections it scans. And
 * the engine's connections run that generic plan from the first run, with plain index scans.
 * Every connection ends a transaction left idle past `IDLE_IN_TRANSACTION_MS`, releasing its locks.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createPool, migrate, IDLE_IN_TRANSACTION_MS, type Db } from '../../shared/db/pool.js';
import { readRoutingConfigVersion } from '../../shared/domain/routing-config.js';
import { createTestDatabase } from '../support/harness.js';

let database: Awaited<ReturnType<typeof createTestDatabase>>;

before(async () => {
  database = await createTestDatabase();
});

after(async () => {
  await database.drop();
});

/** The plan a connection of `db` runs `id = ANY($1)` with after 5,000 inserts, when its generic plan was made while it held 20 (analysed) rows. */
async function planAfterGrowth(db: Db, table: string): Promise<string> {
  const client = await db.connect();
  try {
    await client.query(`CREATE TABLE ${table} (id text PRIMARY KEY, n int NOT NULL)`);
    // Postgres settles on the generic plan itself after five runs when it costs no more than the
    // custom ones; forcing it makes the first run the one that plans.
    await client.query('SET plan_cache_mode = force_generic_plan');
    await client.query(`INSERT INTO ${table} SELECT 'first' || i, i FROM generate_series(1, 20) i`);
    await client.query(`ANALYZE ${table}`); // as autovacuum does once a table has its first rows
    await client.query(`PREPARE lookup_${table}(text[]) AS SELECT n FROM ${table} WHERE id = ANY($1)`);
    await client.query(`EXECUTE lookup_${table}('{a,b}')`);
    await client.query(`INSERT INTO ${table} SELECT 'id' || i, i FROM generate_series(1, 5000) i`);
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN EXECUTE lookup_${table}('{id1,id2}')`);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  } finally {
    client.release();
  }
}

test('engine connections keep a statement planned on a small table on its index; default ones scan', async () => {
  const engine = createPool(database.url, 2, { indexOnly: true });
  const plain = createPool(database.url, 2);
  try {
    const { rows } = await engine.query<{ enable_seqscan: string }>('SHOW enable_seqscan');
    assert.equal(rows[0]!.enable_seqscan, 'off');
    assert.match(await planAfterGrowth(engine, 'grown_engine'), /Index/);
    assert.match(await planAfterGrowth(plain, 'grown_plain'), /Seq Scan/, 'the default planner scans: the case indexOnly is for');
  } finally {
    await engine.end();
    await plain.end();
  }
});

test('engine connections plan a prepared statement once, generically, with a plain index scan; default ones plan each run for its values', async () => {
  const engine = createPool(database.url, 1, { indexOnly: true });
  const plain = createPool(database.url, 1);
  try {
    const { rows: settings } = await engine.query<{ plan_cache_mode: string }>('SHOW plan_cache_mode');
    assert.equal(settings[0]!.plan_cache_mode, 'force_generic_plan');
    const { rows: bitmaps } = await engine.query<{ enable_bitmapscan: string }>('SHOW enable_bitmapscan');
    assert.equal(bitmaps[0]!.enable_bitmapscan, 'off');
    await plain.query('CREATE TABLE by_ids (id bigint PRIMARY KEY, n int NOT NULL)');
    await plain.query('INSERT INTO by_ids SELECT i, i FROM generate_series(1, 2000) i');
    await plain.query('ANALYZE by_ids');
    const plans: string[] = [];
    for (const db of [engine, plain]) {
      const client = await db.connect();
      try {
        await client.query('PREPARE by_ids_lookup(bigint[]) AS SELECT n FROM by_ids WHERE id = ANY($1)');
        const { rows } = await client.query<{ 'QUERY PLAN': string }>("EXPLAIN EXECUTE by_ids_lookup('{7}')");
        plans.push(rows.map((r) => r['QUERY PLAN']).join('\n'));
      } finally {
        client.release();
      }
    }
    const [generic, custom] = plans as [string, string];
    assert.match(generic, /ANY \(\$1\)/, `the engine's plan is the generic one, made once for any array:\n${generic}`);
    assert.match(generic, /Index Scan/);
    assert.doesNotMatch(generic, /Bitmap/);
    assert.match(custom, /'\{7\}'/, `the default plan is made for the values of this run:\n${custom}`);
  } finally {
    await engine.end();
    await plain.end();
  }
});

test('an engine pool migrates a fresh database (identifiers in the C collation), and its connections stay index-only afterwards', async () => {
  const engine = createPool(database.url, 1, { indexOnly: true });
  try {
    const applied = await migrate(engine);
    assert.ok(applied.length > 0);
    // Migration 014: identifiers compare byte by byte.
    const identifiers = ['attempts.family', 'attempts.phone', 'attempts.sender', 'carrier_refs.carrier', 'carrier_refs.ref',
      'messages.id', 'recipients.message_id', 'recipients.phone'];
    const { rows: collations } = await engine.query<{ column: string; collation: string }>(
      `SELECT c.relname || '.' || a.attname AS column, co.collname AS collation
         FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_collation co ON co.oid = a.attcollation
        WHERE c.relname || '.' || a.attname = ANY($1) AND c.relkind = 'r'
        ORDER BY 1`, [identifiers]);
    assert.deepEqual(collations, identifiers.map((column) => ({ column, collation: 'C' })));
    // The migration's own SET LOCAL ended with its transaction: the connection is index-only again.
    const { rows } = await engine.query<{ enable_seqscan: string }>('SHOW enable_seqscan');
    assert.equal(rows[0]!.enable_seqscan, 'off');
    const { rows: bitmaps } = await engine.query<{ enable_bitmapscan: string }>('SHOW enable_bitmapscan');
    assert.equal(bitmaps[0]!.enable_bitmapscan, 'off');
  } finally {
    await engine.end();
  }
});

test('engine connections never JIT-compile a plan, and read the routing configuration version through its key', async () => {
  const engine = createPool(database.url, 1, { indexOnly: true });
  try {
    await migrate(engine); // a no-op when the test above migrated already
    const { rows: jit } = await engine.query<{ jit: string }>('SHOW jit');
    assert.equal(jit[0]!.jit, 'off');
    // A scan under enable_seqscan=off costs 10^10: with JIT on it was compiled on every run.
    const { rows: scan } = await engine.query<{ 'QUERY PLAN': string }>('EXPLAIN (ANALYZE, FORMAT TEXT) SELECT version FROM routing_config');
    assert.doesNotMatch(scan.map((r) => r['QUERY PLAN']).join('\n'), /JIT/);
    const { rows: read } = await engine.query<{ 'QUERY PLAN': string }>('EXPLAIN SELECT version FROM routing_config WHERE only_row');
    assert.match(read.map((r) => r['QUERY PLAN']).join('\n'), /Index Scan using routing_config_pkey/);
    assert.equal(await readRoutingConfigVersion(engine) >= 1, true);
  } finally {
    await engine.end();
  }
});

test('a transaction left idle (its process paused mid-transaction) is ended by Postgres and its row locks released', async () => {
  const stalled = createPool(database.url, 1, { idleInTransactionMs: 500 });
  const other = createPool(database.url, 1);
  try {
    const [{ setting }] = (await other.query<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'`)).rows as [{ setting: string }];
    assert.equal(Number(setting), IDLE_IN_TRANSACTION_MS, 'the service default on every connection');
    await other.query('CREATE TABLE idle_locks (id int PRIMARY KEY)');
    await other.query('INSERT INTO idle_locks VALUES (1)');
    const client = await stalled.connect();
    await client.query('BEGIN');
    await client.query('SELECT id FROM idle_locks WHERE id = 1 FOR UPDATE');
    // Paused here: another connection waits for the row only until the idle transaction is ended.
    const started = Date.now();
    const locked = await other.query('SELECT id FROM idle_locks WHERE id = 1 FOR UPDATE NOWAIT').then(() => 'free', () => 'locked');
    assert.equal(locked, 'locked', 'held while the transaction is open');
    await other.query(`SET lock_timeout = 5000`);
    await other.query('BEGIN; SELECT id FROM idle_locks WHERE id = 1 FOR UPDATE; COMMIT');
    const waited = Date.now() - started;
    assert.ok(waited >= 400 && waited < 4_000, `released after ${waited} ms`);
    await assert.rejects(client.query('SELECT 1'), 'the paused transaction is gone: its next statement fails');
    client.release(true);
  } finally {
    await stalled.end();
    await other.end();
  }
});
