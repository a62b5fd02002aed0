/**
 * The one Postgres module: pool, transactions, database creation and migrations.
 * Hot paths write hand-written SQL (unnest batches); nothing else talks to Postgres directly.
 */
import pg from 'pg';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

export type Db = pg.Pool;
export type Tx = pg.PoolClient;
/** Anything that can run a query: the pool or a transaction's client. */
export type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

// bigint columns (ids, counters) are well below 2^53 in practice; read them as numbers.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));
// json (not jsonb) columns hold payloads whose exact text must come back: keep them as text.
pg.types.setTypeParser(114, (v) => v);
// numeric balances and prices: numbers in API answers; 4 decimal places fit a double exactly enough.
pg.types.setTypeParser(pg.types.builtins.NUMERIC, (v) => Number(v));

const statementNames = new Map<string, string>();

/**
 * A query to run as a named prepared statement: each connection has Postgres parse, analyse and
 * plan it once, and afterwards sends only the values (the hot statements are long CTEs over
 * arrays, costly to parse and plan for every batch). After five runs Postgres keeps a generic plan when it costs no more than the
 * ones made for the values; the hot statements look rows up by key, so that plan is the same.
 * The name is derived from the text, so two texts never share one.
 */
export function prepared(text: string, values: unknown[]): pg.QueryConfig {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `sb_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
    statementNames.set(text, name);
  }
  return { name, text, values };
}

export interface PoolOptions {
  /**
   * For the engine's connections, whose statements all look rows up by key:
   *
   * - Every statement is planned with sequential scans off (see `TxOptions.indexOnly`). A named
   *   prepared statement keeps its generic plan until the table is analysed again: made while a
   *   table is still small (a fresh database, the first seconds of a burst), that plan scanned the
   *   whole table on every later run, long after the table had grown. Statements that no index
   *   serves still scan; migrations plan with the defaults (`migrate`).
   * - Prepared statements run their generic plan from the first run (`plan_cache_mode =
   *   force_generic_plan`). Left to choose, Postgres compares the generic plan's estimate with
   *   the custom plans' after five runs, and a statement over array parameters (`= ANY($1)`,
   *   `unnest($1)`) never passes: the generic plan assumes arrays of some rows, a custom plan
   *   knows a priority message's one. So it planned every run again. Their plans are index
   *   lookups by key whatever the array's length.
   * - Without bitmap scans: for `id = ANY($1)` a generic plan assumes ten elements and picks a
   *   bitmap heap scan, which costs a one-element lookup (a priority message's) more than a plain
   *   index scan.
   * - Without JIT compilation (`jit = off`): with sequential scans off, a plan that has to scan
   *   (however small the table) costs 10^10, far above `jit_above_cost`, and was compiled again on
   *   every run: ~8 ms of backend CPU for a one-row read (`routing_config` before it had a
   *   `WHERE` an index serves). The engine's statements are lookups by key; none needs JIT.
   *
   * The measurements behind each of these are in docs/benchmarks.md.
   */
  indexOnly?: boolean;
  /** `IDLE_IN_TRANSACTION_MS` for this pool (tests). */
  idleInTransactionMs?: number;
}

/**
 * How long a connection may sit in an open transaction without a statement before Postgres ends
 * its session (`idle_in_transaction_session_timeout`), releasing its row locks. The service's
 * transactions wait for nothing but their own statements (milliseconds); a process that stops in
 * the middle of one (paused by SIGSTOP or a VM, hung) would otherwise block every process that
 * needs those rows (a dispatch taking over its job, the status batches of its attempts) until it
 * runs again. Its own next statement then fails as on a lost connection, and the job or batch is
 * retried.
 */
export const IDLE_IN_TRANSACTION_MS = 60_000;

/** The settings of `PoolOptions.indexOnly`, for every connection of such a pool. */
const INDEX_ONLY_OPTIONS = '-c enable_seqscan=off -c enable_bitmapscan=off -c plan_cache_mode=force_generic_plan -c jit=off';

export function createPool(databaseUrl: string, max = 10, opts: PoolOptions = {}): Db {
  const pool = new pg.Pool({
    connectionString: databaseUrl, max, connectionTimeoutMillis: 5000, idleTimeoutMillis: 30000,
    idle_in_transaction_session_timeout: opts.idleInTransactionMs ?? IDLE_IN_TRANSACTION_MS,
    ...(opts.indexOnly && { options: INDEX_ONLY_OPTIONS }),
  });
  // A server restart or a terminated backend must not crash the process. Idle clients report on
  // the pool; a client that is checked out reports on itself (after its query already failed),
  // and without a listener that error would be thrown. The pool drops the broken client when it
  // is released.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

/**
 * Run `fn` in a transaction; commits when it resolves, rolls back when it throws (options: see
 * `withTxEnding`). `ctx` is passed to `fn`: a hot path passes a module-level function and its
 * inputs instead of an arrow made per call, whose optimised code V8 would drop at every full
 * collection (docs/architecture.md, "Hot loops").
 */
export async function withTx<T, C = undefined>(db: Db, fn: (tx: Tx, ctx: C) => Promise<T>, opts: TxOptions = {}, ctx?: C): Promise<T> {
  return withTxEnding(db, withoutLastStatements<T, C>, opts, { fn, ctx: ctx as C });
}

async function withoutLastStatements<T, C>(tx: Tx, plain: { fn: (tx: Tx, ctx: C) => Promise<T>; ctx: C }): Promise<TxEnd<T>> {
  return { result: await plain.fn(tx, plain.ctx) };
}

export interface TxOptions {
  indexOnly?: boolean;
  timeoutMs?: number;
}

/** What a transaction of `withTxEnding` returns: its result and the statements to send with its COMMIT. */
export interface TxEnd<T> {
  result: T;
  /**
   * Parameterless statements sent in the same message as the COMMIT (simple query protocol), so
   * that the row locks they take are held only while the server runs them and flushes the commit,
   * not for a round trip to this process. When one fails, the rest and the COMMIT are skipped and
   * the transaction is rolled back. Build them only from values this process made (numbers,
   * fixed names): they are not parameters.
   */
  lastStatements?: string[];
}

/**
 * `withTx` whose last statements travel with the COMMIT (see `TxEnd.lastStatements`).
 *
 * `indexOnly`: the hot-path transactions (dispatch, status, outbox) touch a handful of rows of
 * large, fast-growing tables by key. Right after a burst of inserts their statistics are stale
 * (autovacuum analyses about once a minute) and the planner may then pick a sequential scan and a
 * hash join over the whole table for every batch. Turning sequential scans off for the
 * transaction keeps these statements on their indexes whatever the statistics say.
 */
export async function withTxEnding<T, C = undefined>(
  db: Db, fn: (tx: Tx, ctx: C) => Promise<TxEnd<T>>, opts: TxOptions = {}, ctx?: C,
): Promise<T> {
  const client = await db.connect();
  try {
    // `timeoutMs`: every statement (lock waits included) of a transaction that others wait for
    // ends by then, so a stuck one fails and its caller can take another way.
    const settings = [
      ...(opts.indexOnly ? ['SET LOCAL enable_seqscan = off'] : []),
      ...(opts.timeoutMs ? [`SET LOCAL statement_timeout = ${Math.trunc(opts.timeoutMs)}`] : []),
    ];
    await client.query(['BEGIN', ...settings].join('; '));
    const { result, lastStatements = [] } = await fn(client, ctx as C);
    await client.query([...lastStatements, 'COMMIT'].join('; '));
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** Create the database named in the URL when it does not exist (D11: "creates the database when it can"). */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!name) {
    return;
  }
  const probe = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: 5000 });
  try {
    await probe.connect();
    await probe.end();
    return;
  } catch (err) {
    await probe.end().catch(() => undefined);
    if ((err as { code?: string }).code !== '3D000') {
      throw err;
    }
  }
  url.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: url.toString(), connectionTimeoutMillis: 5000 });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } catch (err) {
    // Another process created it between our probe and now: 42P04 (duplicate_database) when it
    // had committed, 23505 on pg_database's name index when both CREATE DATABASEs ran at once
    // (every role of a fresh deployment starting together).
    const code = (err as { code?: string }).code;
    if (code !== '42P04' && code !== '23505') {
      throw err;
    }
  } finally {
    await admin.end();
  }
}

const MIGRATIONS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/**
 * Apply pending `NNN_name.sql` files in order, each in its own transaction, under an advisory
 * lock so that several processes starting at once migrate exactly once.
 */
/** The migration files this build brings, in order. */
export function migrationFiles(): string[] {
  return readdirSync(MIGRATIONS_DIR).filter((f) => /^\d{3}_.+\.sql$/.test(f)).sort();
}

export async function migrate(db: Db): Promise<string[]> {
  const files = migrationFiles();
  const client = await db.connect();
  const applied: string[] = [];
  try {
    await client.query('SELECT pg_advisory_lock(727001)');
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await client.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((r) => r.name));
    for (const file of files) {
      if (done.has(file)) {
        continue;
      }
      const sql = readFileSync(path.join(MIGRATIONS_DIR, file), 'utf8');
      // A migration that rewrites a table plans with the defaults, not with an engine pool's
      // `indexOnly` (a full scan is what it needs).
      await client.query('BEGIN; SET LOCAL enable_seqscan = on; SET LOCAL enable_bitmapscan = on');
      try {
        await client.query(sql);
        await client.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${file} failed: ${(err as Error).message}`, { cause: err });
      }
      applied.push(file);
    }
  } finally {
    await client.query('SELECT pg_advisory_unlock(727001)').catch(() => undefined);
    client.release();
  }
  return applied;
}
