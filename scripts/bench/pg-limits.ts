/**
 * The limits of one Postgres (issue 23, docs/scaling.md): each hot statement of the send path in
 * its real batched form, called through the project's own functions, timed for a fixed number of
 * recipients against a throwaway database.
 *
 *   node --import tsx scripts/bench/pg-limits.ts [--recipients 40000] [--runs 3] [--concurrency 4]
 *
 * Per run: creates a database on BENCH_DATABASE_URL's cluster (default
 * postgres://root@127.0.0.1:5432/postgres), migrates it with `migrate` (shared/db/pool.ts), makes
 * one account, and then runs the stages in the order the pipeline does, each over every recipient:
 *
 * - accept: `insertObjects` (sending/accept.ts), messages + recipients in one statement, calls of
 *   10 objects × 10 recipients (the `accept` scenario's shape), on a pool like the API's;
 * - dispatch: each call's job (100 recipients) through a `DispatchBatcher` as a dispatch pool's
 *   lane runs them (engine/dispatch-batches.ts: the jobs that wait meanwhile go together, so with
 *   `--concurrency` 4 most batches hold several): `dispatchRuns`' two reads, the transaction writing
 *   attempts + events + outbox, the debit sent with the COMMIT, and the hand-over's update; the
 *   carrier takes the attempts and does nothing (no network, no Redis);
 * - status sent / status delivered: `applyReports` (engine/status.ts), batches of submit responses
 *   (attempt id + ref: registers the refs) and then of receipts (by ref only), 500 reports each;
 * - relay: `relayOnce` (webhooks/relay.ts) with direct delivery, draining the outbox the stages
 *   above wrote (three events per recipient): claims, reads the events with their bodies, writes
 *   the webhook batches of 100; the direct delivery takes every batch and posts nothing;
 * - webhook outcomes: `recordOutcomes` (webhooks/deliver.ts), 50 delivered batches per statement;
 * - lookup: `lookupMessage` (lookup/timeline.ts, GET /v2/messages/{id}) of 2,000 messages;
 * - list: `listMessages` (rest/messages.ts, GET /v1/messages) page by page (1,000 rows) over the day.
 *
 * `--concurrency` calls run at once in every stage but the relay and the list, which run one at a
 * time as they do in the service (one relay loop per process; pages follow their cursor). Redis
 * is never touched: nothing here enqueues (the functions that would are given no-ops, and the
 * relay's direct delivery takes every batch). Each run's database is dropped at its end (also on
 * errors and Ctrl-C). Prints one JSON line per run and stage, then a Markdown table of the ranges.
 * Before each run it logs the machine probe (machine-probe.ts: the VM's speed at that moment).
 */
import { randomUUID, randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import os from 'node:os';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createPool, migrate, type Db } from '../../shared/db/pool.js';
import { loadConfig, type Config } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { createAccount } from '../../shared/domain/accounts.js';
import { authenticateKey, type ApiKeyRecord } from '../../shared/domain/keys.js';
import { insertObjects, prepareMessage, type AcceptedObject } from '../../shared/sending/accept.js';
import { newId } from '../../shared/sending/ids.js';
import { dispatchRuns } from '../../shared/engine/dispatch.js';
import { DispatchBatcher } from '../../shared/engine/dispatch-batches.js';
import { applyReports } from '../../shared/engine/status.js';
import { MessageFactsCache } from '../../shared/engine/message-facts.js';
import { AttemptFactsCache } from '../../shared/engine/attempt-facts.js';
import { CarrierRegistry } from '../../shared/engine/routing.js';
import type { EngineDeps } from '../../shared/engine/types.js';
import type { Carrier, StatusReport } from '../../shared/carriers/types.js';
import { relayOnce } from '../../shared/webhooks/relay.js';
import type { DirectDelivery, ReadyBatch } from '../../shared/webhooks/direct.js';
import { recordOutcomes } from '../../shared/webhooks/deliver.js';
import { lookupMessage } from '../../shared/lookup/timeline.js';
import { listMessages } from '../../shared/rest/messages.js';
import type { DispatchJob, Queues } from '../../shared/queues.js';
import { machineCpuSeconds, postgresProcesses } from './procs.js';
import { describeProbe, probeMachine } from './machine-probe.js';

const BASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/postgres';
const OBJECTS_PER_CALL = 10;
const RECIPIENTS_PER_OBJECT = 10;
const STATUS_BATCH = 500;
const OUTCOMES_PER_STATEMENT = 50;
const LOOKUPS = 2000;
const LIST_PAGE = 1000;
const CARRIER = 'smpp.bench';

const log = (message: string): void => {
  process.stderr.write(`[pg-limits] ${message}\n`);
};

interface Options {
  recipients: number;
  runs: number;
  concurrency: number;
  /** Before each run, wait up to this many seconds for the machine to be quiet (< 0.3 cores busy over 3 s). */
  waitQuiet: number;
}

function parseOptions(): Options {
  const { values } = parseArgs({
    options: {
      recipients: { type: 'string', default: '40000' },
      runs: { type: 'string', default: '3' },
      concurrency: { type: 'string', default: '4' },
      'wait-quiet': { type: 'string', default: '60' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write('node --import tsx scripts/bench/pg-limits.ts [--recipients 40000 (1,000-200,000)] [--runs 3 (1-5)] [--concurrency 4 (1-16)] [--wait-quiet 60 (s, 0-600)]\n');
    process.exit(0);
  }
  const int = (name: string, text: string, min: number, max: number): number => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < min || n > max) {
      throw new Error(`--${name}: must be an integer from ${min} to ${max}`);
    }
    return n;
  };
  const recipients = int('recipients', values.recipients, 1000, 200_000);
  const perCall = OBJECTS_PER_CALL * RECIPIENTS_PER_OBJECT;
  return {
    recipients: Math.ceil(recipients / perCall) * perCall,
    runs: int('runs', values.runs, 1, 5),
    concurrency: int('concurrency', values.concurrency, 1, 16),
    waitQuiet: int('wait-quiet', values['wait-quiet'], 0, 600),
  };
}

/** What one stage did: calls of the project's function, rows they handled, client round trips. */
interface StageResult {
  stage: string;
  /** What a row is in this stage. */
  rows: string;
  calls: number;
  rowCount: number;
  roundTrips: number;
  seconds: number;
  /** CPU seconds of this database's Postgres backends (autovacuum included), of this process, and of everything else on the machine. */
  pgCpu: number;
  ownCpu: number;
  otherCpu: number;
}

/** The database being measured (its backends' CPU is counted as Postgres's). */
const measured = { database: '' };

interface CpuSample {
  busy: number;
  own: number;
  pg: Map<number, { kind: string; cpu: number }>;
}

function cpuSample(): CpuSample {
  const pg = new Map<number, { kind: string; cpu: number }>();
  for (const p of postgresProcesses(new Set([measured.database]))) pg.set(p.pid, { kind: p.kind, cpu: p.cpu });
  const own = process.cpuUsage();
  return { busy: machineCpuSeconds().busy, own: (own.user + own.system) / 1e6, pg };
}

/**
 * CPU used between two samples: this database's backends (autovacuum workers included; the
 * cluster's WAL writer and checkpointer, which also work for other databases, are not), this
 * process, and the rest of the machine (other users, and those shared Postgres processes).
 */
function cpuBetween(a: CpuSample, b: CpuSample): { pgCpu: number; ownCpu: number; otherCpu: number } {
  let pgCpu = 0;
  for (const [pid, p] of b.pg) {
    if (p.kind === 'bench') pgCpu += p.cpu - (a.pg.get(pid)?.cpu ?? 0);
  }
  const ownCpu = b.own - a.own;
  return { pgCpu, ownCpu, otherCpu: Math.max(0, b.busy - a.busy - pgCpu - ownCpu) };
}

/** Round trips to Postgres (every `query` of a client: a BEGIN, a statement, statements sent with a COMMIT). */
const roundTrips = { n: 0 };

function counted(pool: Db): Db {
  pool.on('connect', (client) => {
    const query = client.query;
    // A wrapper per connection, made once: every query of the pool's clients passes through it.
    client.query = function countedQuery(this: pg.PoolClient, ...args: unknown[]) {
      roundTrips.n++;
      return Reflect.apply(query, this, args) as unknown;
    } as unknown as typeof client.query;
  });
  return pool;
}

/** Runs `count` tasks, at most `concurrency` at once. */
async function inParallel(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) {
      const i = next++;
      await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

async function timed(stage: string, rows: string, fn: () => Promise<{ calls: number; rowCount: number }>): Promise<StageResult> {
  const before = roundTrips.n;
  const cpuBefore = cpuSample();
  const started = performance.now();
  const { calls, rowCount } = await fn();
  const seconds = (performance.now() - started) / 1000;
  return { stage, rows, calls, rowCount, roundTrips: roundTrips.n - before, seconds, ...cpuBetween(cpuBefore, cpuSample()) };
}

/** A carrier that takes attempts and reports nothing (the status stages report for it). */
const quietCarrier: Carrier = { name: CARRIER, settlesOnSend: true, send: async () => undefined, close: async () => undefined };

/** Nothing here may enqueue: dispatch and status get no-op enqueue functions, the relay a direct delivery that takes every batch. */
const noQueues = new Proxy({}, {
  get(): never {
    throw new Error('pg-limits measures Postgres only: nothing may use the queues');
  },
}) as unknown as Queues;

async function createDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `sb_pglimits_${process.pid}_${randomBytes(3).toString('hex')}`;
  const admin = new pg.Client({ connectionString: BASE_URL, connectionTimeoutMillis: 5000 });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)}`);
  } finally {
    await admin.end();
  }
  const url = new URL(BASE_URL);
  url.pathname = `/${name}`;
  measured.database = name;
  let dropped = false;
  return {
    url: url.toString(),
    drop: async () => {
      if (dropped) return;
      dropped = true;
      const c = new pg.Client({ connectionString: BASE_URL, connectionTimeoutMillis: 5000 });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** The calls of a run: 10 message objects × 10 recipients each, every number its own, checked as acceptance checks them. */
function prepareCalls(opts: Options, key: ApiKeyRecord, config: Config, now: Date): AcceptedObject[][] {
  const calls: AcceptedObject[][] = [];
  let n = 0;
  for (let c = 0; c < opts.recipients / (OBJECTS_PER_CALL * RECIPIENTS_PER_OBJECT); c++) {
    const objects: AcceptedObject[] = [];
    for (let o = 0; o < OBJECTS_PER_CALL; o++) {
      const to = Array.from({ length: RECIPIENTS_PER_OBJECT }, () => ({ phone_number: String(420601000000 + n++) }));
      const raw = { body: 'Your parcel is on its way: pick it up at the depot by Friday.', to, callback: 'http://127.0.0.1:9/hook', payload: { order: n } };
      const p = prepareMessage(raw, key, config, now);
      if (typeof p === 'string') throw new Error(`message object refused: ${p}`);
      p.key = String(o);
      const messageId = newId();
      objects.push({ p, entry: { messageId, publicIds: to.map((_, i) => `${messageId}-${i}`), phones: p.phones, recipientIds: [] } });
    }
    calls.push(objects);
  }
  return calls;
}

async function oneRun(opts: Options, run: number): Promise<StageResult[]> {
  const database = await createDatabase();
  const stop = (): void => {
    void database.drop().finally(() => process.exit(130));
  };
  process.once('SIGINT', stop);
  const web = counted(createPool(database.url, 8));
  const engine = counted(createPool(database.url, 8, { indexOnly: true }));
  try {
    await migrate(web);
    const config = loadConfig({
      NODE_ENV: 'test', DATABASE_URL: database.url, REDIS_URL: 'redis://127.0.0.1:6379', ALLOW_PRIVATE_CALLBACKS: '1', LOG_LEVEL: 'silent',
    });
    const logger = createLogger('silent');
    const account = await createAccount(web, { currency: 'CZK', credit_czk: 1_000_000_000 });
    const key = await authenticateKey(web, account.api_key);
    if (!key) throw new Error('the new key does not authenticate');
    const now = new Date();
    const calls = prepareCalls(opts, key, config, now);
    const carriers = new CarrierRegistry();
    carriers.setDefault(quietCarrier);
    const deps: EngineDeps = {
      db: engine, queues: noQueues, config, logger, carriers, hooks: {}, messageFacts: new MessageFactsCache(), attemptFacts: new AttemptFactsCache(),
      enqueueNextSteps: async () => undefined, enqueueLater: async () => undefined,
      ttlTimers: { set: async () => undefined, setEachKeep: async () => undefined, clear: async () => undefined },
    };
    const results: StageResult[] = [];
    const c = opts.concurrency;

    results.push(await timed('accept (insertObjects)', 'recipients', async () => {
      await inParallel(calls.length, c, async (i) => {
        const result = { requestId: randomUUID(), accepted: [], rejected: [], recipients: [] };
        await insertObjects(web, { key, opts: { mode: 'batch', source: 'v2' }, now, result }, calls[i]!);
      });
      return { calls: calls.length, rowCount: opts.recipients };
    }));

    const jobs: DispatchJob[] = calls.map((objects) => ({
      step: 0, messages: objects.map((o) => ({ messageId: o.entry.messageId, recipientIds: o.entry.recipientIds })),
    }));
    let handed = 0;
    const batcher = new DispatchBatcher((runs, committed) => dispatchRuns(deps, runs, new Date(), committed));
    results.push(await timed('dispatch (dispatchRuns)', 'attempts', async () => {
      await inParallel(jobs.length, c, async (i) => {
        const outcome = await batcher.run({ job: jobs[i]!, delaySelf: false });
        handed += outcome.handed; // after the await: `x += await …` would read x before it
      });
      return { calls: jobs.length, rowCount: handed };
    }));
    if (handed !== opts.recipients) throw new Error(`dispatch handed ${handed} of ${opts.recipients} attempts`);

    const { rows: attempts } = await web.query<{ id: number }>('SELECT id FROM attempts ORDER BY id');
    const batches = (make: (id: number) => StatusReport): StatusReport[][] => {
      const out: StatusReport[][] = [];
      for (let i = 0; i < attempts.length; i += STATUS_BATCH) out.push(attempts.slice(i, i + STATUS_BATCH).map((a) => make(a.id)));
      return out;
    };
    const applyAll = async (list: StatusReport[][]): Promise<{ calls: number; rowCount: number }> => {
      let moved = 0;
      await inParallel(list.length, c, async (i) => {
        const outcome = await applyReports(deps, list[i]!);
        moved += outcome.transitions;
      });
      return { calls: list.length, rowCount: moved };
    };
    const at = Date.now();
    const sent = batches((id) => ({ attemptId: id, carrier: CARRIER, ref: `r${id}`, part: 0, partCount: 1, state: 'sent', resultInfo: 'Sent', at }));
    results.push(await timed('status: submit responses (applyReports)', 'attempts moved', () => applyAll(sent)));
    const receipts = batches((id) => ({ carrier: CARRIER, ref: `r${id}`, state: 'delivered', resultInfo: '[0] Delivered', at: at + 100 }));
    results.push(await timed('status: receipts by ref (applyReports)', 'attempts moved', () => applyAll(receipts)));
    for (const r of results.slice(-2)) {
      if (r.rowCount !== opts.recipients) throw new Error(`${r.stage} moved ${r.rowCount} of ${opts.recipients} attempts`);
    }

    const { rows: [events] } = await web.query<{ n: number }>('SELECT count(*)::int AS n FROM events');
    const delivered: number[] = [];
    const direct = { offer: (b: ReadyBatch) => delivered.push(b.id) > 0 } as unknown as DirectDelivery;
    let passes = 0;
    results.push(await timed('relay (relayOnce, direct delivery)', 'events', async () => {
      let after = 0;
      for (;;) {
        const pass = await relayOnce(engine, noQueues, { batchMax: 100, lingerMs: 0, retries: 8, pageSize: 5000 }, Date.now(), after, direct);
        passes++;
        if (pass.doneThrough === null) break;
        after = pass.doneThrough;
      }
      return { calls: passes, rowCount: events!.n };
    }));
    const { rows: [left] } = await web.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox');
    if (left!.n !== 0) throw new Error(`the relay left ${left!.n} outbox rows`);

    results.push(await timed('webhook outcomes (recordOutcomes)', 'batches', async () => {
      const chunks: number[][] = [];
      for (let i = 0; i < delivered.length; i += OUTCOMES_PER_STATEMENT) chunks.push(delivered.slice(i, i + OUTCOMES_PER_STATEMENT));
      await inParallel(chunks.length, c, async (i) => {
        await recordOutcomes(engine, chunks[i]!.map((batchId) => ({ batchId, result: { ok: true, status: 200 } })));
      });
      return { calls: chunks.length, rowCount: delivered.length };
    }));

    const messageIds = calls.flat().map((o) => o.entry.messageId);
    results.push(await timed('lookup GET /v2/messages/{id} (lookupMessage)', 'recipients shown', async () => {
      let shown = 0;
      const count = Math.min(LOOKUPS, messageIds.length);
      await inParallel(count, c, async (i) => {
        const found = await lookupMessage(web, key, messageIds[(i * 7919) % messageIds.length]!);
        shown += found?.recipients.length ?? 0;
      });
      return { calls: count, rowCount: shown };
    }));

    results.push(await timed('list GET /v1/messages (listMessages)', 'recipients listed', async () => {
      const from = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
      const to = new Date(from.getTime() + 86_400_000);
      let pages = 0;
      let listed = 0;
      let cursor: { at: string; id: number } | undefined;
      for (;;) {
        const page = await listMessages(web, key, { from, to, limit: LIST_PAGE, ...(cursor && { cursor }) });
        pages++;
        listed += page.messages.length;
        if (!page.next_cursor) break;
        const [cursorAt, id] = Buffer.from(page.next_cursor, 'base64url').toString('utf8').split('|');
        cursor = { at: cursorAt!, id: Number(id) };
      }
      return { calls: pages, rowCount: listed };
    }));

    for (const r of results) {
      process.stdout.write(`${JSON.stringify({
        run, ...r, rowsPerSecond: Math.round(r.rowCount / r.seconds), callsPerSecond: Math.round(r.calls / r.seconds),
        pgCpuMicrosPerRow: Math.round((r.pgCpu / r.rowCount) * 1e6), otherCores: Number((r.otherCpu / r.seconds).toFixed(2)),
      })}\n`);
    }
    log(`run ${run}: ${results.map((r) => `${r.stage} ${Math.round(r.rowCount / r.seconds)}/s`).join(', ')}`);
    return results;
  } finally {
    process.removeListener('SIGINT', stop);
    await Promise.all([web.end(), engine.end()]).catch(() => undefined);
    await database.drop();
  }
}

const range = (values: number[], digits = 1): string => {
  const lo = Math.min(...values);
  const hi = Math.max(...values);
  const fmt = (x: number): string => (x >= 100 ? Math.round(x).toLocaleString('en-US') : x.toFixed(digits));
  return lo === hi || fmt(lo) === fmt(hi) ? fmt(lo) : `${fmt(lo)}–${fmt(hi)}`;
};

function machine(): string {
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  } catch {
    // not a git checkout
  }
  return `${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB; commit ${commit}`;
}

/** Waits (up to `seconds`) until the machine was below 0.3 busy cores for 3 s; returns the busy cores of the last 3 s. */
async function waitQuiet(seconds: number): Promise<number> {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const a = machineCpuSeconds();
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const busy = (machineCpuSeconds().busy - a.busy) / 3;
    if (busy < 0.3 || Date.now() >= deadline) return busy;
  }
}

async function main(): Promise<void> {
  const opts = parseOptions();
  const admin = new pg.Client({ connectionString: BASE_URL, connectionTimeoutMillis: 5000 });
  await admin.connect();
  const { rows: settings } = await admin.query<{ v: string }>(
    `SELECT current_setting('server_version') AS v UNION ALL SELECT current_setting('shared_buffers')
     UNION ALL SELECT current_setting('synchronous_commit') UNION ALL SELECT current_setting('fsync')`);
  await admin.end();
  const server = `Postgres ${settings[0]!.v}, shared_buffers ${settings[1]!.v}, synchronous_commit ${settings[2]!.v}, fsync ${settings[3]!.v}`;
  log(`${opts.runs} run(s) of ${opts.recipients} recipients, concurrency ${opts.concurrency}; ${machine()}; ${server}`);
  const runs: StageResult[][] = [];
  for (let run = 1; run <= opts.runs; run++) {
    if (opts.waitQuiet > 0) log(`run ${run}: machine busy ${(await waitQuiet(opts.waitQuiet)).toFixed(2)} cores before it`);
    log(`run ${run}: machine probe ${describeProbe(await probeMachine(BASE_URL, log))}`);
    runs.push(await oneRun(opts, run));
  }
  const lines = [
    `${opts.runs} run(s) of ${opts.recipients.toLocaleString('en-US')} recipients, ${opts.concurrency} calls at once (relay and list: 1); ${machine()}; ${server}`,
    '',
    '| stage | row | rows/s | calls/s | rows per call | round trips per call | Postgres CPU µs per row (backends) | Postgres cores busy | other load (cores) |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  runs[0]!.forEach((first, i) => {
    const all = runs.map((r) => r[i]!);
    lines.push(`| ${first.stage} | ${first.rows} | ${range(all.map((r) => r.rowCount / r.seconds))} | ${range(all.map((r) => r.calls / r.seconds))} | `
      + `${range(all.map((r) => r.rowCount / r.calls))} | ${range(all.map((r) => r.roundTrips / r.calls))} | `
      + `${range(all.map((r) => (r.pgCpu / r.rowCount) * 1e6))} | ${range(all.map((r) => r.pgCpu / r.seconds), 2)} | `
      + `${range(all.map((r) => r.otherCpu / r.seconds), 2)} |`);
  });
  process.stdout.write(`\n${lines.join('\n')}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`[pg-limits] failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
